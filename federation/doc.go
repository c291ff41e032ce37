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
//     AppendAt at the remote's receipt time: the sender identity and key
//     must be active now or have stopped being active strictly after it, by
//     the change times this relay holds (its own for local keys, the
//     remote's listed revoked_at / deactivated_at for imported ones). In a
//     line A↔B↔C, C judges a record of A's by B's receipt time against A's
//     revoked_at (the times of two clocks): history that reached B only
//     after the key was revoked on A is refused on C.
//   - Registry sync. Each link walks the remote's GET
//     /v1/correspondence/keys every KeysInterval with If-None-Match per page
//     (a 304 page costs no import), and also at once when a record's key is
//     unknown here. Imports never touch local keys; revocation and
//     deactivation are one-way (a remote cannot re-activate a key).
//   - Cursor. The remote cursor moves over a contiguous range of handled
//     records: stored, duplicate, or refused for good (bad signature, an
//     unknown key after a registry sync, different bytes under a known
//     event_id, a malformed record). A record whose append failed for a
//     temporary reason (the store unavailable) ends the page there, and the
//     page is fetched again later; it is never skipped. Received_seq must
//     grow strictly within and across pages; a page that does not (or that
//     claims more but brings nothing) ends the round. A round reads at most
//     MaxPagesPerRound pages (a round that ends there with the remote
//     still having more is followed by the next at once, without the poll
//     wait), and a page body is read up to MaxPageBytes under a timeout,
//     so a page that never ends costs bounded time and memory and the
//     link retries on its next round.
//   - Live records. WebSub deliveries (client.WebSubSubscriber: the hub's
//     challenge and the X-Hub-Signature HMAC are checked there) are
//     appended at once but never move the cursor; backfill polls every
//     PollInterval while the subscription is not active and every
//     IdlePollInterval while it is, re-subscribing at three quarters of
//     the granted lease. A subscription whose lease ends without a
//     verified renewal (the remote was unreachable for each) has lapsed:
//     the link status says "expired", a backfill round starts at once and
//     polls every PollInterval, and the link re-subscribes every
//     PollInterval until the remote verifies again. The subscriber's secret lives in the process that
//     holds the lease: a delivery that reaches another process (or arrives
//     after a restart, before the new subscription is verified) is
//     acknowledged and dropped by the subscriber, and backfill brings the
//     record.
//   - Loops: at most a no-op. A record that came from B is delivered back
//     to B by A's hub (A's topic holds every record A stored); B's append
//     finds it stored with identical bytes and answers Created false, which
//     publishes no advance, so B's hub announces nothing and the record
//     goes no further. The tests count the deliveries that stored a record.
//   - Scope. A link without a repository mirrors the whole project through
//     the project-wide replay (GET /v1/correspondence/events?project_id=P)
//     and the project-wide JSON topic (events.json?project_id=P); with one,
//     through that repository's replay and JSON topic.
//
// What it does not do: copy receipts, trust a peer's verification, decode
// and re-encode records (the bytes that verified are the bytes stored), or
// serve HTTP routes itself (relay routes the callback to ServeCallback).
package federation
