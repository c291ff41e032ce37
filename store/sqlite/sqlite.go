package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pressly/goose/v3"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/internal/shared"
)

//go:embed migrations/*.sql
var migrations embed.FS

var (
	_ store.Store             = (*DB)(nil)
	_ store.MigrationReporter = (*DB)(nil)
)

// timeLayout is how the schema spells every time: RFC 3339, milliseconds, UTC.
const timeLayout = "2006-01-02T15:04:05.000Z"

// Options tune Open. The zero value is the production setting.
type Options struct {
	// MaxBatch caps how many queued appends one transaction takes (group
	// commit); 0 means 128, and OpenWith refuses a negative value or one
	// above MaxBatchLimit. 1 gives one transaction per event, for
	// comparison only. A page of foreign records (AppendPageAt, at most
	// 200 from a peer link) is one group that is never split: the batch
	// that takes it may exceed MaxBatch by that much.
	MaxBatch int
	// ThreadIndexEvery is how many of a project's newest events may be
	// missing from thread_events (the thread index, filled in bulk) before
	// a batch adds them; 0 means 256. Thread-filtered reads scan those
	// events instead; tests set it low to cross the boundary often.
	ThreadIndexEvery int
	// BusyTimeout bounds how long a statement waits for a lock held by
	// another process; 0 means 5s.
	BusyTimeout time.Duration
	// CheckpointEvents is how many appends start a WAL checkpoint; 0 means
	// 1024. A negative value never checkpoints until Close, which keeps
	// every commit's frames in the WAL: for measurements only (the WAL
	// then grows without bound).
	CheckpointEvents int
	// CheckpointIdle is the longest a committed change waits in the WAL
	// for its checkpoint when fewer than CheckpointEvents appends arrive;
	// 0 means 2s. Tests set it low.
	CheckpointIdle time.Duration
	// Observer, when set, is told the duration of every write transaction
	// and each group commit's size (metrics); nil observes nothing.
	Observer store.Observer
}

// MaxBatchLimit is the largest Options.MaxBatch: the append queue holds
// four batches, and a batch is one transaction whose appends all wait for
// its commit.
const MaxBatchLimit = 16384

// DB is the embedded SQLite store. It is safe for concurrent use.
type DB struct {
	// Witnessing's methods are store.Cosignatures and
	// store.LogWitnesses (witnessing.go).
	shared.Witnessing

	migrated store.MigrationSummary // what Open's migration did (Migrations)
	path     string                 // the database file (MatrixCryptoDB opens it again)
	busy     time.Duration          // Options.BusyTimeout
	w        *sql.DB                // one connection: the group committer and registry writes
	stmts    map[string]*sql.Stmt   // prepared on w; used by the writer goroutine and checkExternal (under wmu)
	r        *sql.DB                // query_only pool: reads never wait for the writer
	rd       *reader                // prepared statements on r
	ck       *sql.DB                // one connection for WAL checkpoints
	ckStop   chan struct{}
	ckDone   chan struct{}
	logger   *slog.Logger
	maxBatch int
	obs      store.Observer // Options.Observer; nil observes nothing

	// wmu is held by the writer for each batch, by registry writes that
	// invalidate ws, by checkExternal, and by checkpointLoop's catch-up
	// step.
	wmu sync.Mutex
	ws  *wstate // guarded by wmu

	tokens tokenCache

	advances store.AdvanceBroker  // published after each committed new append
	wakes    store.PeerWakeBroker // peer link wakes (advances.go)

	sinceCheckpoint atomic.Int64 // events committed since the last checkpoint began
	ckEvents        int64        // Options.CheckpointEvents
	// ckFailed is the last checkpoint cycle's error, nil once a cycle
	// succeeds (Health).
	ckFailed  atomic.Pointer[error]
	ckCovered atomic.Int64  // events whose checkpoint cycle has ended (tests wait on it)
	ckCycles  atomic.Int64  // checkpoint cycles ended (tests wait on it)
	ckIdle    time.Duration // Options.CheckpointIdle

	mu     sync.RWMutex // guards closed and sends on queue
	closed bool
	queue  chan *job
	done   chan struct{} // closed when the writer goroutine has drained and exited
}

// UseFdatasync makes every SQLite connection in the process commit with
// fdatasync(2) instead of fsync(2) (on false, back to fsync), as SQLite's
// own Linux builds do: a file's data and size reach stable storage just as
// with fsync, without also journaling its timestamps on every commit. It
// is process-wide, so main decides it, before opening stores. Errors:
// modernc.org/sqlite's ErrFdatasyncUnavailable where the platform syncs
// otherwise (macOS, Windows), which leaves fsync in place.
func UseFdatasync(on bool) error {
	_, err := sqlite.Fdatasync(on)
	return err
}

// Open opens (creating if needed) the database file at path, applies the
// embedded migrations and starts the writer goroutine. Errors:
// store.ErrUnavailable when the file cannot be opened or migrated.
func Open(ctx context.Context, path string, logger *slog.Logger) (*DB, error) {
	return OpenWith(ctx, path, logger, Options{})
}

// OpenWith is Open with options.
func OpenWith(ctx context.Context, path string, logger *slog.Logger, opts Options) (*DB, error) {
	if path == "" || strings.ContainsAny(path, "?#") || strings.HasPrefix(path, "file:") {
		return nil, fmt.Errorf("open sqlite: path %q must be a plain file path", path)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if opts.MaxBatch < 0 || opts.MaxBatch > MaxBatchLimit {
		return nil, fmt.Errorf("open sqlite: MaxBatch %d: want 1 to %d (0 for the default)", opts.MaxBatch, MaxBatchLimit)
	}
	if opts.MaxBatch == 0 {
		opts.MaxBatch = 128
	}
	if opts.BusyTimeout <= 0 {
		opts.BusyTimeout = 5 * time.Second
	}
	if opts.ThreadIndexEvery <= 0 {
		opts.ThreadIndexEvery = threadIndexEvery
	}
	if opts.CheckpointEvents == 0 {
		opts.CheckpointEvents = checkpointEvents
	}
	if opts.CheckpointIdle <= 0 {
		opts.CheckpointIdle = checkpointIdle
	}
	common := fmt.Sprintf("_pragma=busy_timeout(%d)&_pragma=foreign_keys(1)&_pragma=synchronous(FULL)&_pragma=temp_store(MEMORY)",
		opts.BusyTimeout.Milliseconds())
	// wal_autocheckpoint(0): commits never run a checkpoint (and its fsync
	// of the database file) inline; checkpointLoop does it on its own
	// connection, concurrently with appends, which WAL mode allows.
	w, err := sql.Open("sqlite", path+"?"+common+fmt.Sprintf("&_pragma=journal_mode(WAL)&_pragma=wal_autocheckpoint(0)&_pragma=journal_size_limit(%d)&_pragma=cache_size(%d)&_txlock=immediate", walSizeLimit, writerCacheKiB))
	if err != nil {
		return nil, mapErr("open sqlite", err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	// A 201 is durable only if every commit syncs the WAL
	// (synchronous=FULL or EXTRA); check what the DSN gave the connection.
	var syncLevel int
	err = w.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&syncLevel)
	if err == nil && syncLevel < 2 {
		err = fmt.Errorf("the writer connection runs synchronous=%d, want 2 (FULL)", syncLevel)
	}
	if err != nil {
		w.Close()
		return nil, mapErr("open sqlite", err)
	}
	migrated, err := migrate(ctx, w, logger)
	if err != nil {
		w.Close()
		return nil, err
	}
	st, err := prepare(ctx, w)
	if err != nil {
		w.Close()
		return nil, err
	}
	ck, err := sql.Open("sqlite", path+"?"+common)
	if err != nil {
		w.Close()
		return nil, mapErr("open sqlite", err)
	}
	ck.SetMaxOpenConns(1)
	r, err := sql.Open("sqlite", path+"?"+common+"&_pragma=query_only(1)")
	if err != nil {
		w.Close()
		return nil, mapErr("open sqlite", err)
	}
	n := max(4, runtime.NumCPU())
	r.SetMaxOpenConns(n)
	r.SetMaxIdleConns(n)
	if err := r.PingContext(ctx); err != nil {
		w.Close()
		r.Close()
		return nil, mapErr("open sqlite", err)
	}
	db := &DB{
		path:     path,
		busy:     opts.BusyTimeout,
		w:        w,
		r:        r,
		rd:       newReader(r),
		stmts:    st,
		logger:   logger,
		maxBatch: opts.MaxBatch,
		queue:    make(chan *job, 4*opts.MaxBatch),
		done:     make(chan struct{}),
		ck:       ck,
		ckStop:   make(chan struct{}),
		ckDone:   make(chan struct{}),
		ws:       newWState(),
		ckEvents: int64(opts.CheckpointEvents),
		ckIdle:   opts.CheckpointIdle,
		obs:      opts.Observer,
		migrated: migrated,
	}
	db.Witnessing = shared.NewWitnessing(db.engine(), &witnessingSQL)
	db.ws.external = db.tokens.invalidate
	db.ws.threadEvery = int64(opts.ThreadIndexEvery)
	go db.writeLoop()
	go db.checkpointLoop()
	return db, nil
}

// Migrations is what Open's migration applied (store.MigrationReporter).
func (db *DB) Migrations() store.MigrationSummary { return db.migrated }

func migrate(ctx context.Context, w *sql.DB, logger *slog.Logger) (store.MigrationSummary, error) {
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return store.MigrationSummary{}, fmt.Errorf("migrate: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, w, sub, goose.WithDisableGlobalRegistry(true))
	if err != nil {
		return store.MigrationSummary{}, fmt.Errorf("migrate: %w", err)
	}
	results, err := p.Up(ctx)
	if err != nil {
		logger.Error("sqlite migration failed", "err", err)
		return store.MigrationSummary{}, fmt.Errorf("migrate: %w", store.ErrUnavailable)
	}
	sum := store.MigrationSummary{Dialect: "sqlite", Applied: len(results)}
	for i, r := range results {
		// One line per migration at debug; the summary is logged once by
		// cmd, after the first start's token banner.
		logger.Debug("sqlite migration applied", "version", r.Source.Version, "duration", r.Duration)
		if i == 0 {
			sum.From = r.Source.Version - 1
		}
		sum.To = r.Source.Version
		sum.Duration += r.Duration
	}
	return sum, nil
}

// Close stops accepting appends, lets the writer finish everything already
// queued, then closes both connection pools. Calling it twice is harmless.
func (db *DB) Close() error {
	db.mu.Lock()
	if db.closed {
		db.mu.Unlock()
		return nil
	}
	db.closed = true
	close(db.queue)
	db.mu.Unlock()
	<-db.done
	close(db.ckStop)
	<-db.ckDone
	for _, s := range db.stmts {
		s.Close()
	}
	db.rd.close()
	// A last full checkpoint leaves the database file complete on its own.
	_, ckErr := db.ck.Exec("PRAGMA wal_checkpoint(TRUNCATE)")
	if ckErr != nil {
		db.logger.Warn("final sqlite checkpoint", "err", mapErr("checkpoint", ckErr))
	}
	// The checkpointer's connection closes last, so that SQLite's
	// close-time checkpoint runs on its file handle: the one whose syncs
	// the checkpoint cycles used, so that a failure there is not hidden by a
	// fresh handle's sync succeeding in its place.
	return errors.Join(db.r.Close(), db.w.Close(), db.ck.Close())
}

// mapErr adds op as context to err and translates the driver's errors to
// store sentinels: a unique or primary-key violation (modernc's
// *sqlite.Error) to ErrExists, any other SQLite result code and
// database/sql's connection and transaction errors to ErrUnavailable,
// sql.ErrNoRows to ErrNotFound. The driver error itself is never wrapped,
// so nothing above store can reach it. Every other error (a store sentinel,
// a sentinel of this package or a test's, a context error) passes through
// unchanged, wrapped with %w, so a new sentinel needs no list to survive.
func mapErr(op string, err error) error {
	if err == nil {
		return nil
	}
	if s := driverSentinel(err); s != nil {
		return fmt.Errorf("%s: %w", op, s)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// driverSentinel is the store sentinel (with the SQLite result code when
// there is one) for an error of the driver or of database/sql, nil for any
// other error.
func driverSentinel(err error) error {
	var se *sqlite.Error
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return nil // the caller's own error, kept as it is
	case errors.As(err, &se):
		switch se.Code() {
		case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
			return store.ErrExists
		}
		return fmt.Errorf("%w (sqlite result code %d)", store.ErrUnavailable, se.Code())
	case errors.Is(err, sql.ErrNoRows):
		return store.ErrNotFound
	case errors.Is(err, sql.ErrConnDone), errors.Is(err, sql.ErrTxDone), errors.Is(err, driver.ErrBadConn),
		errors.Is(err, errDBClosed()):
		return store.ErrUnavailable
	}
	return nil
}

// errDBClosed is database/sql's error for a closed *sql.DB (after Close),
// which it does not export: taken once from a closed in-memory database.
// (A closed *sql.Stmt's error is a new value each time; reader.close
// forgets its statements, so a read after Close meets errDBClosed.)
var errDBClosed = sync.OnceValue(func() error {
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		return err
	}
	db.Close()
	return db.Ping()
})

func parseTime(s string) time.Time {
	t, err := time.Parse(timeLayout, s)
	if err != nil {
		return time.Time{}
	}
	return t.UTC()
}

func parseNullTime(s sql.NullString) time.Time {
	if !s.Valid {
		return time.Time{}
	}
	return parseTime(s.String)
}

// Health is nil when the store can be read and its last checkpoint cycle
// succeeded. Otherwise it is ErrCheckpointFailing (wrapping the cause) or
// the read's error. After a failed checkpoint (a write or sync of the
// database file failed) the store keeps every committed page in its WAL,
// so appends go on and nothing is lost, but the WAL grows until a cycle
// succeeds; after a failed sync the kernel may have dropped the pages it
// could not write, so a restart (which copies the WAL again) is the safe
// remedy. The relay's GET /healthz answers 503 for it.
func (db *DB) Health(ctx context.Context) error {
	if p := db.ckFailed.Load(); p != nil {
		return fmt.Errorf("%w: %w", ErrCheckpointFailing, *p)
	}
	_, err := db.CountProjects(ctx)
	return err
}

var _ store.HealthChecker = (*DB)(nil)

// ErrCheckpointFailing is Health's error while the last checkpoint cycle
// failed.
var ErrCheckpointFailing = errors.New("sqlite: the WAL checkpoint is failing; the WAL keeps every commit and grows until the store is reopened")

// writeTx runs fn in one transaction on the writer connection; its error
// goes through mapErr.
func (db *DB) writeTx(ctx context.Context, op string, fn func(tx *sql.Tx) error) (err error) {
	if db.obs != nil {
		defer func(start time.Time) { db.obs.ObserveTx(op, time.Since(start), err) }(time.Now())
	}
	tx, err := db.w.BeginTx(ctx, nil)
	if err != nil {
		return mapErr(op, err)
	}
	defer tx.Rollback()
	if err := fn(tx); err != nil {
		return mapErr(op, err)
	}
	return mapErr(op, tx.Commit())
}

// mustExist returns store.ErrNotFound unless query (a SELECT 1 …) has a row.
func mustExist(ctx context.Context, tx *sql.Tx, query string, args ...any) error {
	return (&txn{ctx: ctx, tx: tx}).mustExist(query, args...)
}

// mustExist is the package mustExist with the writer's prepared statements.
func (t *txn) mustExist(query string, args ...any) error {
	var one int
	err := t.queryRow(query, args...).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return store.ErrNotFound
	}
	return err
}

// txn is one write transaction with the writer's prepared statements:
// modernc.org/sqlite parses a statement on every unprepared call, which
// was half of an append's CPU time. Queries not in st run unprepared.
type txn struct {
	ctx context.Context
	tx  *sql.Tx
	st  map[string]*sql.Stmt
	// In a group-commit batch: the writer's remembered state, the running
	// job's clock, and the changes to ws the running job applies once it has
	// succeeded (its savepoint released, in a replayed batch). Nil ws
	// outside batches (writeTx).
	ws     *wstate
	now    time.Time
	staged []func()
	log    *slog.Logger
	// wrote is set once the running job issues a statement that may write
	// (anything but a SELECT); failed keeps the first error a statement
	// returned. The batch reads both after each job (batch.runOne).
	wrote  bool
	failed error
}

// onRelease stages f to run once the job has succeeded (its savepoint
// released, in a replayed batch); a job that fails drops what it staged.
func (t *txn) onRelease(f func()) { t.staged = append(t.staged, f) }

func (t *txn) exec(q string, args ...any) (sql.Result, error) {
	t.wrote = true
	var r sql.Result
	var err error
	if s, ok := t.st[q]; ok {
		r, err = t.tx.StmtContext(t.ctx, s).ExecContext(t.ctx, args...)
	} else {
		r, err = t.tx.ExecContext(t.ctx, q, args...)
	}
	t.fail(err)
	return r, err
}

// queryRow runs q; its error surfaces from Scan (and is not recorded in
// failed).
func (t *txn) queryRow(q string, args ...any) *sql.Row {
	t.wrote = t.wrote || mayWrite(q)
	if s, ok := t.st[q]; ok {
		return t.tx.StmtContext(t.ctx, s).QueryRowContext(t.ctx, args...)
	}
	return t.tx.QueryRowContext(t.ctx, q, args...)
}

func (t *txn) query(q string, args ...any) (*sql.Rows, error) {
	t.wrote = t.wrote || mayWrite(q)
	var rows *sql.Rows
	var err error
	if s, ok := t.st[q]; ok {
		rows, err = t.tx.StmtContext(t.ctx, s).QueryContext(t.ctx, args...)
	} else {
		rows, err = t.tx.QueryContext(t.ctx, q, args...)
	}
	t.fail(err)
	return rows, err
}

// fail records err as the first failure of the running job's statements.
func (t *txn) fail(err error) {
	if err != nil && t.failed == nil {
		t.failed = err
	}
}

// mayWrite reports whether q is anything but a plain SELECT (a DELETE …
// RETURNING runs through query too).
func mayWrite(q string) bool {
	return !strings.HasPrefix(strings.TrimLeft(q, " \t\n"), "SELECT")
}

// writerStatements are prepared once on the writer connection at Open.
var writerStatements = []string{
	projectExists, selectSender, selectCanonical, insertEvent, insertParent, selectSessionTuple,
	insertLineage, selectLineage, updateLineage, eventExists, insertWaiting, takeWaiters, insertFrontier,
	selectFrontierHead, deleteFrontierRow, frontierRemains, updateLineageFlags, insertTip, deleteTip, selectRecord,
	selectMissingParents, savepointAppend, rollbackToAppend, releaseAppend,
	selectProjectState, updateProjectHead, selectSessionMax, dataVersion,
}

func prepare(ctx context.Context, w *sql.DB) (map[string]*sql.Stmt, error) {
	st := make(map[string]*sql.Stmt, len(writerStatements))
	for _, q := range writerStatements {
		s, err := w.PrepareContext(ctx, q)
		if err != nil {
			for _, s := range st {
				s.Close()
			}
			return nil, mapErr("prepare", err)
		}
		st[q] = s
	}
	return st, nil
}

var _ store.MigrationChecker = (*DB)(nil)

// PendingMigrations is the number of embedded migrations newer than the
// database's schema version, read on the query-only pool (it never waits
// for the writer). Errors: ErrUnavailable.
func (db *DB) PendingMigrations(ctx context.Context) (int, error) {
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return 0, fmt.Errorf("migrations: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, db.r, sub, goose.WithDisableGlobalRegistry(true))
	if err != nil {
		return 0, fmt.Errorf("migrations: %w", err)
	}
	current, target, err := p.GetVersions(ctx)
	if err != nil {
		return 0, mapErr("migrations", err)
	}
	return int(max(target-current, 0)), nil
}
