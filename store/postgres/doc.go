// Package postgres is the PostgreSQL implementation of store.Store, through
// github.com/jackc/pgx/v5 (pgxpool). `acrelay serve --database-url
// postgres://…` (ACRELAY_DATABASE_URL) selects it; several relay processes
// may serve one database.
//
// It keeps the schema ideas and lineage rules of store/sqlite (the
// reference): the same tables, the same ready frontier and branch tips,
// correspondence.NodeOf, RootStatus and Successor for every lineage
// decision. Both pass store/storetest.
//
// Stream coordination (spec §7, §8). Every Append and every
// ReconcileLineage first takes pg_advisory_xact_lock(k), k a stable 64-bit
// hash of the project id (streamLockKey), in a statement of its own, and
// holds it until commit. So per project:
//   - receipts are taken from the projects.last_seq counter row in the
//     appending transaction, and commits happen in receipt order: a reader
//     paging by received_seq never sees seq n+1 before n is visible, and
//     gaps appear only when a transaction rolls back;
//   - the exact-retry check, the unique insert and all lineage bookkeeping
//     of one project are serialized, so they never race each other;
//   - projects never wait on each other: one lock per project and
//     transaction, so advisory locks cannot deadlock.
//
// The lock is its own statement because READ COMMITTED takes a snapshot at
// the start of each statement: a statement that waited for the lock inside
// itself would still read with the snapshot it started with, missing what
// the previous holder committed. Claims and voice reads call
// ReconcileLineage (a short locked transaction, at most 32 frontier rows)
// and then ClaimsSnapshot or VoiceSnapshot, which run in one REPEATABLE
// READ, READ ONLY transaction without the lock.
//
// Clock. received_at, created_at, lineage_changed_at and lease expiry are
// date_trunc('milliseconds', clock_timestamp()): the database clock, UTC,
// milliseconds. clock_timestamp() and not now(): now() is the start of the
// transaction, and an append that began early but waited for the stream
// lock would carry a time earlier than the receipt committed just before
// it. clock_timestamp() read under the lock is monotone per project as
// long as the server clock is; receipts also take the GREATEST of it and
// the project's previous received_at, so a backwards clock step cannot
// make a later receipt look older.
//
// Errors never leave the package as driver errors: unique violations
// (23505) become store.ErrExists, foreign-key violations (23503)
// store.ErrNotFound, serialization failures and deadlocks (40001, 40P01)
// are retried up to three times and then store.ErrUnavailable, as is
// everything else (connection errors included). Context errors are kept.
//
// Schema changes are embedded goose migrations (migrations/*.sql), applied
// at Open under goose's PostgreSQL session lock, so relay processes
// starting together migrate once.
package postgres
