// Package client is the Go SDK for agents that speak agent-correspondence/v0.1
// to a relay (spec/correspondence-0.1.md).
//
// It covers the agent's side of the protocol:
//
//   - Signer and key files: an Ed25519 private key (PKCS#8 PEM, or a raw
//     32-byte seed in hex or base64url) plus the sender ids of spec §3.
//   - Session and the builders (Intent, ClaimOpen, ClaimRenew, …): one
//     helper per kind of spec §5 with the kind's exact body; referenced event
//     ids are added to parents (spec §5), claim renew/release derive claim_id,
//     generation, predecessor and scope from their predecessor (spec §8), and
//     session_seq comes from a Sequencer whose persistence the caller picks
//     (spec §7).
//   - Client: Post (retries the same bytes on 503 and network errors),
//     EventsPage and Events (paged by the receipt cursor), Claims, Voice,
//     Follow (wake SSE plus replay, spec §9), Discover (RFC 8288 Link and
//     RFC 9652 Link-Template), and the admin calls the demo needs.
//   - WebSubSubscriber: a WebSub subscriber and its callback handler (W3C
//     WebSub): subscribe and unsubscribe, verification of intent, HMAC-
//     authenticated deliveries of Atom or JSON topics, de-duplicated by
//     event_id and verified with a Keyring.
//   - Keyring: every record read through a Client with a Keyring is verified
//     (signature and event id, spec §6) and refused on mismatch.
//
// It deliberately does not validate events it builds beyond what the
// builders guarantee (the relay is the judge, spec §3), keeps no state of
// its own on disk (Sequencer and cursor files are the caller's choice) and
// never acts on what it reads: events are advisory (spec §1).
package client
