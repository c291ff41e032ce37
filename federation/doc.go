// Package federation runs peer links (spec/federation.md): a relay that
// shares a project with another relay (the same project_id on both)
// imports the remote's key registry, backfills the remote's history from a
// durable cursor, subscribes to the remote's WebSub topic for new records,
// and re-verifies every record through the one ingest path
// (ingest.Ingester.AppendForeign), giving it this relay's own receipt.
//
// A Manager runs every link of the projects whose lease it holds: one
// lease per (courier "federation", project), taken and renewed through
// store.Couriers, so with several processes on one PostgreSQL one process
// pulls each project. The remote cursor is the courier cursor of target
// peer_id, fenced by that lease.
//
// Decisions (where the issue left a choice):
//
//   - Key at time. A foreign record is appended with store.Federation
//     AppendPageAt at the remote's receipt time: the sender identity and key
//     must be active now or have stopped being active strictly after it, by
//     the change times this relay holds (its own for local keys, the
//     remote's listed revoked_at / deactivated_at for imported ones). In a
//     line A↔B↔C, C judges a record of A's by B's receipt time against A's
//     revoked_at (the times of two clocks): history that reached B only
//     after the key was revoked on A is refused on C.
//   - Registry sync: revocations in seconds. Of the
//     two mechanisms the issue offers, neither fits a revocation that no
//     record follows: a push carrying the registry's version tells B
//     nothing while A is quiet, and a keys topic on A's hub needs the hub
//     to publish something that is not in the log. So each link re-reads
//     the remote's key export (GET /v1/correspondence/keys, the registry
//     "Trust" imports) every KeysInterval, default 2 s, conditionally:
//     each page carries If-None-Match with the ETag the remote gave it, so
//     an unchanged registry costs one 304 per page and no import. A
//     revocation on A is therefore imported on B within KeysInterval plus
//     one round trip, and an event signed by the revoked key is refused on
//     B from then on ("Revoked keys": new events under a revoked key are
//     refused everywhere), while history A received before the
//     revocation still imports (key at time). The registry is also read at
//     once when a record's key is unknown here (a pushed record asks the
//     registry loop; a backfill page syncs inline, then takes the record
//     again). A sync that changed anything starts a backfill round, which
//     retries the kept refusals. Imports never touch local keys;
//     revocation and deactivation are one-way (a remote cannot
//     re-activate a key). The cost is one conditional GET per registry
//     page per link every KeysInterval; an operator with large registries
//     raises --federation-keys-interval.
//   - Cursor ("Cursors"). Backfill reads after an in-memory read position
//     and the remote cursor (durable, fenced by the lease) moves over a
//     contiguous range of handled records: stored, duplicate, or refused
//     for good. A record whose append failed for a temporary reason (the
//     store unavailable) ends the page there, and the page is fetched
//     again; it is never skipped. Received_seq must grow strictly within
//     and across pages; a page that does not (or that claims more but
//     brings nothing) ends the round. A round reads at most
//     MaxPagesPerRound pages (a round that ends there with the remote
//     still having more is followed by the next at once), and a page body
//     is read up to MaxPageBytes under a timeout, so a page that never
//     ends costs bounded time and memory. A failed round is retried after
//     100 ms, doubling up to PollInterval.
//   - Refusals ("Trust": record by record) are durable and visible
//     (store.Refusals): each refused record is kept with its stable reason
//     (an ingest refusal code, or signing_key_unknown, receipt_invalid,
//     receipt_backdated), listed by GET
//     /v1/admin/projects/{p}/peers/{peer_id} (counts by reason, pending
//     and final, and the latest) and by /metrics
//     (acrelay_federation_refused_records{reason,final}). A refusal that
//     may pass, a signing key still unknown after a registry sync, is kept
//     with the record's bytes and retried after every registry change and
//     backfill round; the read position moves on (later honest records
//     keep arriving) but the remote cursor stays before it until it is
//     stored or finally refused, so a restart fetches it again and there
//     is never a permanent hole. It turns final after KeptAttempts tries
//     over at least KeptGrace, or at once when a link keeps MaxKept. Final
//     at once: a bad signature, different bytes under a known event_id, a
//     key revoked (or identity deactivated) at the remote's receipt time,
//     a malformed record. No refusal for a parent not yet stored exists:
//     such a record is stored with missing_parents (spec §8).
//   - Remote clock. A record's remote received_at
//     earlier than the previous record's from that remote by more than
//     ClockTolerance (2 s) is refused for good (receipt_backdated), so a
//     lying remote cannot backdate a record into a revoked key's active
//     window. "Previous" is the newest record the link has seen (pushed
//     or fetched) for a record past it, and its predecessor in the page.
//   - Pages. A backfill page (and a push, as a page of one) goes through
//     ingest.AppendForeign at once: the checks run in parallel, then the
//     records are appended in the remote's order in one group commit,
//     with a verdict per record.
//   - Live records and gaps: no gap waits for a timer. WebSub deliveries
//     (client.WebSubSubscriber: the hub's challenge and the X-Hub-Signature
//     HMAC are checked there) are appended at once but never move the
//     cursor. A push whose received_seq does not follow what the link has
//     handled (records before it were neither pushed nor fetched; for a
//     repository link, whose received_seq are the project's, any push past
//     it) starts a backfill round at once. When the subscription is
//     verified a round starts at once, and since the remote's hub starts
//     the subscription's cursor at its head only once it has the answer,
//     backfill settles: a round every 250 ms until the first push (whose
//     received_seq shows any gap left) or 5 s. Otherwise backfill polls
//     every PollInterval while the subscription is not active and every
//     IdlePollInterval while it is, re-subscribing at three quarters of
//     the granted lease. A subscription whose lease ends without a
//     verified renewal (the remote was unreachable for each) has lapsed:
//     the link status says "expired", a backfill round starts at once and
//     polls every PollInterval, and the link re-subscribes every
//     PollInterval until the remote verifies again.
//   - Callback on any process. A link's WebSub subscriber state is in the
//     store, one row per link (store.PeerSubscriptions, table
//     federation_subscriptions; deleted with the link): the latest
//     request sent to the remote's hub (a random request id, hub.mode,
//     topic, time, whether it failed), the state and lease of the last
//     verification, a denial's hub.reason, and the HMAC secret. The
//     secret is at rest in the store, readable (it must be: every push is
//     verified with it), like the peer's token; it is never listed,
//     logged or put in an error. The link's client.WebSubSubscriber keeps
//     it through client.WebSubState (peerState, callback.go): Subscribe
//     stores the request (with the stored secret again on a renewal,
//     whichever process sent the last one) before sending it; any
//     process answers the hub's verification from the store (the stored
//     request must be of that mode, not failed, and at most 5 minutes
//     old; the answer is stored only while that request is still the
//     latest, so a late verification cannot revive a replaced one); the
//     link's Wait reads the store every 100 ms for a verification another
//     process answered. A push is handed to ingest by whichever process
//     received it — not queued for the lease holder: the process that
//     runs the link serves it as before; any other keeps, per link, a
//     link that is never started (its peer row re-read every 10 s) whose
//     subscriber verifies the X-Hub-Signature with the stored secret and
//     whose push path is the link's own (the remote clock check against
//     the pushes that process saw, ingest.AppendForeign in one group
//     commit, a registry read when the key is unknown). The record is
//     stored at once; it never moves the cursor (fenced by the holder's
//     lease). A push that does not follow what that process took of the
//     link (a gap, by the rule of "Live records and gaps"; or one whose
//     key is still unknown after the registry read, or that met an
//     unavailable store) wakes the holder: a store.PeerWakes hint, on
//     PostgreSQL a NOTIFY on channel acrelay_peer_wakes heard on the
//     LISTEN connection that already carries advances, on which the
//     holder's Manager starts that link's backfill round at once. The gap
//     is filled within a NOTIFY and a round trip to the remote, not at
//     the next IdlePollInterval. A wake is never stored: one lost (the
//     holder's LISTEN connection was down, or the lease moved meanwhile)
//     leaves the gap to the holder's next IdlePollInterval, as before,
//     except that a LISTEN connection that reconnects wakes every link its
//     process runs. Behind a load balancer that spreads one link's pushes
//     over several processes each sees the others' records as gaps, so
//     the holder's rounds run back to back while records flow (each reads
//     from its read position on); the pushed records never wait for them.
//     A delivery whose link state cannot be read is answered 503, and the
//     hub retries. Why not a queue for the holder: it would add a table
//     and the holder's latency to every record, for the gap detection
//     alone.
//     A delivery to a removed link is 410 Gone.
//   - Loops: at most a no-op. A record that came from B is delivered back
//     to B by A's hub (A's topic holds every record A stored); B's append
//     finds it stored with identical bytes and answers Created false, which
//     publishes no advance, so B's hub announces nothing and the record
//     goes no further. The tests count the deliveries that stored a record.
//   - Scope. A link without a repository mirrors the whole project through
//     the project-wide replay (GET /v1/correspondence/events?project_id=P)
//     and the project-wide JSON topic (events.json?project_id=P); with one,
//     through that repository's replay and JSON topic.
//   - Witnessing (witness.go, issue 24 item 5). Each link is a C2SP
//     witness of its remote's verifiable log: it reads the remote's
//     checkpoint every WitnessInterval and after each backfill round,
//     verifies it with the remote's log key (pinned), checks it against
//     the one it cosigned last (same size, same root; larger, the remote's
//     consistency proof), cosigns it with this relay's witness key (not
//     the log key: package witness says why) and POSTs the cosigned note
//     back. A fork or an inconsistent checkpoint is kept as evidence
//     (store.SplitView, both notes) and stops the link on every process;
//     it is raised at ERROR, in acrelay_federation_split_views and in
//     /readyz's degraded list.
//
// What it does not do: copy receipts, trust a peer's verification, decode
// and re-encode records (the bytes that verified are the bytes stored), or
// serve HTTP routes itself (relay routes the callback to ServeCallback).
package federation
