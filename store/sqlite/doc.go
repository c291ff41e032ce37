// Package sqlite is the embedded default implementation of store.Store: one
// SQLite file in WAL mode through modernc.org/sqlite (pure Go, no cgo).
//
// Durability: synchronous=FULL, so an Append that returned has its WAL frame
// fsynced and survives a process or machine crash (spec §7: a 201 is a
// promise). Throughput comes from group commit rather than from weakening
// that promise: concurrent Append calls queue to one writer goroutine that
// runs them, as they arrive, in one transaction (at most Options.MaxBatch;
// a page of foreign records, AppendPageAt, is one group never split),
// so one commit and one fsync cover a batch while each caller still gets
// its own result or error: the batch runs without savepoints until an
// append fails, then is rolled back and replayed with each append in its
// own SAVEPOINT (writer.go; the policy, jobs and pages are
// store/internal/groupcommit's, shared with store/postgres).
//
// Connections: one writer connection (BEGIN IMMEDIATE) used by the group
// committer and the registry writes, and a separate pool of query_only
// connections for reads, which in WAL mode never wait for the writer. A
// third connection runs the WAL checkpoints (checkpoint.go), concurrently
// with appends. All use SQLite's default VFS.
//
// Clock: created_at and lineage_changed_at come from the database clock,
// strftime('%Y-%m-%dT%H:%M:%fZ','now'): UTC with milliseconds. received_at
// is the system clock read as each append runs in its batch, at millisecond
// precision, and never earlier than the project's previous receipt, so it
// never decreases along received_seq (wstate.go, receiptTime).
//
// The group committer remembers what it committed (wstate.go): receipt
// counters, active senders, session highs and lineage flags, trusted only
// while the writer connection's PRAGMA data_version is unchanged, that is
// while no other connection has committed.
//
// Lineage (spec §8) is materialized from the first append: claim_lineage
// holds each claim event's status, lineage_waiting the pending children by
// the predecessor they wait for, lineage_frontier the durable ready frontier
// and claim_tips the branch tips. The rules themselves are
// correspondence.NodeOf and correspondence.Successor; this package only
// persists their results.
//
// Schema changes are embedded goose migrations (migrations/*.sql), applied
// at Open. Driver errors never leave the package (mapErr): unique
// violations become store.ErrExists and other driver errors
// store.ErrUnavailable; errors that are not the driver's pass through.
//
// Open starts the writer goroutine and Close stops it, draining the queue
// first; that is the one exception to "constructors start no goroutines",
// because the writer is part of the store's own consistency.
package sqlite
