// Package store declares what the layers above need from persistence, and
// nothing of how: the project registry (identities, signing keys,
// bearer-token hashes), the append-only event log with receipts, lineage
// bookkeeping and the durable ready frontier of spec §8, and the state of
// every projection that tails the log — courier cursors and fenced leases,
// the hub's subscriptions, Matrix rooms and submissions, peer links, the
// verifiable log's trees and cosignatures.
//
// # Interfaces by consumer
//
// Store is the whole, and what cmd/acrelay opens; it is the union of one
// interface per concern: Registry, Log, Feed, Handoffs, Visibility,
// FeedTokens, Archives (the relay's reads and writes), Couriers (cursors,
// backoff state and the leases package lease keeps), Advances (the wake),
// WebSub, WebSubLimits and WebSubScans (the hub), Matrix, Federation and
// PeerSubscriptions, Tree, Cosignatures and LogWitnesses (the verifiable
// log), UISessions. A store may also offer MatrixCrypto, PeerWakes,
// HealthChecker, MigrationChecker and MigrationReporter, found by type
// assertion. Each consumer declares the few methods it calls as its own
// interface (ingest.Store, lease.Store, couriers.Store, hub.Store, ...),
// so a package depends on what it uses, not on all of Store.
//
// # Writes and wakes
//
// The log is written in one place: Log.Append, through package ingest,
// stores each event with its receipt in one transaction and returns the
// record. Nothing is pushed from the request path to a projection: every
// dialect publishes its projects' advances ("project P reached
// received_seq N") through one AdvanceBroker — in process after each commit
// on SQLite, across processes by LISTEN/NOTIFY on PostgreSQL — and a
// subscriber reads after its own durable cursor, so a missed or coalesced
// advance loses nothing. Cursor writes name their lease's fence: once the
// lease has lapsed or changed hands they fail with ErrLeaseLost.
//
// # Dialects
//
// Two dialects implement Store: store/sqlite (the embedded default, pure
// Go, modernc.org/sqlite) and store/postgres (pgx/v5, several relay
// processes on one database). What does not depend on the SQL dialect is
// written once: store/internal/groupcommit is the append path (per-project
// queues, batches, savepoints, answers) and store/internal/shared the rest
// (paging with has_more, existence and version checks, scans and the
// error wrapping around them)
// over a Querier both engines satisfy; each dialect keeps its SQL, its
// transactions and its embedded, forward-only migrations (goose, applied
// at open: MigrationReporter). Both pass the one behavioural suite,
// store/storetest.
//
// # Errors
//
// Nothing above this package sees a driver error: each dialect maps its
// driver's errors to the sentinels below (ErrNotFound, ErrExists,
// ErrUnavailable, ErrEventIDCollision, ErrLeaseLost, ...), wrapped with
// context; test them with errors.Is. The mapping from sentinel to HTTP
// status and stable code is the relay's, not this package's.
package store
