// Package ingest is the one append path of the relay (DESIGN.md "One
// ingest path"): every event that enters the log, whether an agent's HTTP
// POST, a signed submission in a project's Matrix room or a record
// re-verified from a federation peer, goes through (*Ingester).Append, with
// the same checks, the same errors and the same idempotency. Nothing else
// writes events.
//
// Append takes the project the caller speaks for (a bearer token's
// project, a room binding's project, a peer link's project) and the
// untrusted bytes of one event, and checks, in this order:
//
//  1. size: at most MaxEventBytes (spec §3) → ErrEventTooLarge;
//  2. strict parse and validation (spec §2–§5, correspondence.ParseEvent)
//     → *canonicaljson.ProfileError or *correspondence.ValidationError;
//  3. project: the event's project_id is the caller's → ErrProjectMismatch;
//  4. sender (spec §6): sender.signing_key_id is a key of sender.identity_id
//     in that project → ErrSenderNotActive (an unknown key is
//     ErrSenderUnknown, which matches ErrSenderNotActive too; a key of
//     another identity, an undecodable stored key); the key's immutable facts are
//     cached in a bounded cache, its status is not;
//  5. signature and event id (spec §6) → correspondence.ErrSignatureEncoding,
//     correspondence.ErrSignatureInvalid, correspondence.ErrEventIDMismatch;
//  6. canonicalization (RFC 8785) and store.Log.Append in one transaction
//     (spec §7), which re-checks that identity and key are active (so a
//     revocation takes effect on the very next append: ErrSenderNotActive)
//     → store.ErrEventIDCollision, store.ErrNotFound (unknown project),
//     ErrAppendUnavailable (the store is unavailable or ctx ended).
//
// AppendForeign takes a page of a federation peer's records
// (spec/federation.md): steps 1–5 for each record in parallel, then one
// store call appends every record that passed them in page order, in one
// group commit, with a verdict per record.
//
// Idempotency (spec §7): an exact retry of a stored event (the same
// event_id and the same canonical bytes) is not an error; it returns the
// original receipt with Created false. A retry after ErrAppendUnavailable
// is always safe.
//
// Errors are typed so that each caller translates them once: Refusal names
// each one's stable code, whose status wire's error table holds (the relay
// answers it through internal/apierror); a courier or a federation link
// logs or reports them. Error chains wrap with %w; test with errors.Is/errors.As.
//
// ingest does no HTTP (body limits, media types and status codes are the
// relay's), no authentication (the caller says which project it speaks
// for), and no notification: committed appends are published by the store.
package ingest
