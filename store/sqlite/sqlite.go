package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"embed"
	"encoding/json"
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
)

//go:embed migrations/*.sql
var migrations embed.FS

var _ store.Store = (*DB)(nil)

// timeLayout is how the schema spells every time: RFC 3339, milliseconds, UTC.
const timeLayout = "2006-01-02T15:04:05.000Z"

// Options tune Open. The zero value is the production setting.
type Options struct {
	// MaxBatch caps how many queued appends one transaction takes (group
	// commit); 0 means 128, and OpenWith refuses a negative value or one
	// above MaxBatchLimit. 1 gives one transaction per event, for
	// comparison only.
	MaxBatch int
	// ThreadIndexEvery is how many of a project's newest events may be
	// missing from thread_events (the thread index, filled in bulk) before
	// a batch adds them; 0 means 256. Thread-filtered reads scan those
	// events instead; tests set it low to cross the boundary often.
	ThreadIndexEvery int
	// DirectWALWrites makes the writer write each WAL frame as SQLite
	// issues it (two pwrite(2)s a frame) instead of gathering a commit's
	// frames into one write (see gatherVFSName); for comparison, or a
	// file system where the gathering VFS misbehaves. Durability is the
	// same either way.
	DirectWALWrites bool
	// BusyTimeout bounds how long a statement waits for a lock held by
	// another process; 0 means 5s.
	BusyTimeout time.Duration
	// CheckpointEvents is how many appends start a WAL checkpoint; 0 means
	// 1024. A negative value never checkpoints until Close, which keeps
	// every commit's frames in the WAL: for measurements only (the WAL
	// then grows without bound).
	CheckpointEvents int
	// CommitterSlice is the scheduling slice the group committer's OS
	// thread asks the kernel for (setThreadSlice; Linux 6.12 or later):
	// the committer is the one serial stage of an append, so it should
	// run as soon as its sync completes or an append arrives rather than
	// wait out another thread's slice. 0 means DefaultCommitterSlice; a
	// negative value leaves the thread to the default scheduling.
	CommitterSlice time.Duration
}

// MaxBatchLimit is the largest Options.MaxBatch: the append queue holds
// four batches, and a batch is one transaction whose appends all wait for
// its commit.
const MaxBatchLimit = 16384

// DefaultCommitterSlice is Options.CommitterSlice's default: the shortest
// slice Linux grants.
const DefaultCommitterSlice = 100 * time.Microsecond

// DB is the embedded SQLite store. It is safe for concurrent use.
type DB struct {
	w        *sql.DB              // one connection: the group committer and registry writes
	stmts    map[string]*sql.Stmt // prepared on w; used by the writer goroutine and checkExternal (under wmu)
	r        *sql.DB              // query_only pool: reads never wait for the writer
	rd       *reader              // prepared statements on r
	ck       *sql.DB              // one connection for WAL checkpoints
	ckStop   chan struct{}
	ckDone   chan struct{}
	logger   *slog.Logger
	maxBatch int

	// wmu is held by the writer for each batch, by registry writes that
	// invalidate ws, by checkExternal, and by checkpointLoop's catch-up
	// step.
	wmu sync.Mutex
	ws  *wstate // guarded by wmu

	tokens tokenCache

	sinceCheckpoint atomic.Int64 // events committed since the last checkpoint began
	ckEvents        int64        // Options.CheckpointEvents
	// ckFailed is the last checkpoint cycle's error, nil once a cycle
	// succeeds (Health).
	ckFailed  atomic.Pointer[error]
	ckCovered atomic.Int64 // events whose checkpoint cycle has ended (tests wait on it)

	// Set by writeLoop before Open returns: the slice the kernel granted
	// the group committer's thread (0 when none), why not, and the id of
	// the thread it holds (0 when it holds none).
	committerSlice    time.Duration
	committerSliceErr error
	committerTID      int

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
	if opts.CommitterSlice == 0 {
		opts.CommitterSlice = DefaultCommitterSlice
	}
	common := fmt.Sprintf("_pragma=busy_timeout(%d)&_pragma=foreign_keys(1)&_pragma=synchronous(FULL)&_pragma=temp_store(MEMORY)",
		opts.BusyTimeout.Milliseconds())
	// wal_autocheckpoint(0): commits never run a checkpoint (and its fsync
	// of the database file) inline; checkpointLoop does it on its own
	// connection, concurrently with appends, which WAL mode allows.
	vfs := ""
	if !opts.DirectWALWrites {
		name, err := gatherVFSRegistered()
		if err != nil {
			return nil, mapErr("open sqlite", err)
		}
		if name != "" {
			vfs = "vfs=" + name + "&"
		}
	}
	// synchronous(FULL) is what makes the gathering VFS safe (its doc).
	w, err := sql.Open("sqlite", path+"?"+vfs+common+fmt.Sprintf("&_pragma=journal_mode(WAL)&_pragma=wal_autocheckpoint(0)&_pragma=journal_size_limit(%d)&_pragma=cache_size(%d)&_pragma=mmap_size(%d)&_txlock=immediate", walSizeLimit, writerCacheKiB, writerMmapBytes))
	if err != nil {
		return nil, mapErr("open sqlite", err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	// The gathering VFS is safe only if every commit syncs the WAL before
	// SQLite publishes it (synchronous=FULL or EXTRA); check what the DSN
	// gave the connection.
	var syncLevel int
	err = w.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&syncLevel)
	if err == nil && syncLevel < 2 {
		err = fmt.Errorf("the writer connection runs synchronous=%d, want 2 (FULL)", syncLevel)
	}
	if err != nil {
		w.Close()
		return nil, mapErr("open sqlite", err)
	}
	if err := migrate(ctx, w, logger); err != nil {
		w.Close()
		return nil, err
	}
	st, err := prepare(ctx, w)
	if err != nil {
		w.Close()
		return nil, err
	}
	// The checkpointer opens the file through the same VFS as the writer:
	// its database file is synced after every checkpoint pass
	// (dbFileControl), not only after the one that empties the WAL.
	ck, err := sql.Open("sqlite", path+"?"+vfs+common)
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
	}
	db.ws.external = db.tokens.invalidate
	db.ws.threadEvery = int64(opts.ThreadIndexEvery)
	started := make(chan struct{})
	go db.writeLoop(opts.CommitterSlice, started)
	<-started
	go db.checkpointLoop()
	return db, nil
}

func migrate(ctx context.Context, w *sql.DB, logger *slog.Logger) error {
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, w, sub, goose.WithDisableGlobalRegistry(true))
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	results, err := p.Up(ctx)
	if err != nil {
		logger.Error("sqlite migration failed", "err", err)
		return fmt.Errorf("migrate: %w", store.ErrUnavailable)
	}
	for _, r := range results {
		logger.Info("sqlite migration applied", "version", r.Source.Version, "duration", r.Duration)
	}
	return nil
}

// CommitterSlice reports the scheduling slice the kernel granted the
// group committer's thread (Options.CommitterSlice), or 0 and why not;
// 0 and nil when none was asked for.
func (db *DB) CommitterSlice() (time.Duration, error) {
	return db.committerSlice, db.committerSliceErr
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
	// close-time checkpoint runs on its file handle: if one of its syncs
	// failed (dbSync), that checkpoint fails too and the WAL is kept for
	// the next open to copy again, instead of a fresh handle's sync
	// succeeding in its place.
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

// --- Registry (spec §10) ---

// CreateProject creates an empty project stream. Errors: store.ErrExists.
func (db *DB) CreateProject(ctx context.Context, id string) (store.Project, error) {
	var at string
	if err := db.w.QueryRowContext(ctx, insertProject, id).Scan(&at); err != nil {
		return store.Project{}, mapErr("create project", err)
	}
	return store.Project{ID: id, CreatedAt: parseTime(at)}, nil
}

// GetProject errors: store.ErrNotFound.
func (db *DB) GetProject(ctx context.Context, id string) (store.Project, error) {
	var p store.Project
	var at string
	if err := db.rd.QueryRowContext(ctx, selectProject, id).Scan(&p.ID, &at); err != nil {
		return store.Project{}, mapErr("get project", err)
	}
	p.CreatedAt = parseTime(at)
	return p, nil
}

// Health is nil when the store can be read and its last checkpoint cycle
// succeeded. Otherwise it is ErrCheckpointFailing (wrapping the cause) or
// the read's error. After a failed checkpoint (a write or sync of the
// database file failed) the store keeps every committed page in its WAL,
// so appends go on and nothing is lost, but the WAL grows until the store
// is reopened: a sync failure sticks to the file handle (dbSync), so only
// a restart clears it. The relay's GET /healthz answers 503 for it.
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

// CountProjects returns the number of projects.
func (db *DB) CountProjects(ctx context.Context) (int, error) {
	var n int
	if err := db.rd.QueryRowContext(ctx, countProjects).Scan(&n); err != nil {
		return 0, mapErr("count projects", err)
	}
	return n, nil
}

// CreateIdentity stores id; an empty Status means active. Errors:
// store.ErrNotFound (unknown project), store.ErrExists.
func (db *DB) CreateIdentity(ctx context.Context, id store.Identity) (store.Identity, error) {
	if id.Status == "" {
		id.Status = store.StatusActive
	}
	if id.Status != store.StatusActive && id.Status != store.StatusInactive {
		return store.Identity{}, fmt.Errorf("create identity: status %q is not active or inactive", id.Status)
	}
	var at string
	err := db.writeTx(ctx, "create identity", func(tx *sql.Tx) error {
		if err := mustExist(ctx, tx, projectExists, id.ProjectID); err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, insertIdentity, id.ID, id.ProjectID, id.DisplayName, id.Status).Scan(&at)
	})
	if err != nil {
		return store.Identity{}, err
	}
	id.CreatedAt = parseTime(at)
	return id, nil
}

// GetIdentity errors: store.ErrNotFound.
func (db *DB) GetIdentity(ctx context.Context, projectID, id string) (store.Identity, error) {
	i, err := scanIdentity(db.rd.QueryRowContext(ctx, selectIdentity, projectID, id))
	return i, mapErr("get identity", err)
}

// DeactivateIdentity marks the identity inactive; its history stays.
// Errors: store.ErrNotFound.
func (db *DB) DeactivateIdentity(ctx context.Context, projectID, id string) (store.Identity, error) {
	db.wmu.Lock()
	defer db.wmu.Unlock()
	i, err := scanIdentity(db.w.QueryRowContext(ctx, deactivateIdentity, projectID, id))
	db.ws.forgetSenders() // the next append re-reads the sender's status
	return i, mapErr("deactivate identity", err)
}

// rowScanner is a *sql.Row or *sql.Rows.
type rowScanner interface{ Scan(dest ...any) error }

func scanIdentity(row rowScanner) (store.Identity, error) {
	var i store.Identity
	var at string
	if err := row.Scan(&i.ID, &i.ProjectID, &i.DisplayName, &i.Status, &at); err != nil {
		return store.Identity{}, err
	}
	i.CreatedAt = parseTime(at)
	return i, nil
}

// ActiveIdentityIDs pages active identity ids in ascending byte order,
// strictly after afterID, at most limit.
func (db *DB) ActiveIdentityIDs(ctx context.Context, projectID, afterID string, limit int) ([]string, error) {
	return listRows(ctx, db, "active identity ids", func(row rowScanner) (id string, err error) {
		return id, row.Scan(&id)
	}, selectActiveIdentityIDs, projectID, afterID, limit)
}

// ListIdentities pages the project's identities of every status in
// ascending byte order of id, strictly after afterID, at most limit.
func (db *DB) ListIdentities(ctx context.Context, projectID, afterID string, limit int) ([]store.Identity, error) {
	return listRows(ctx, db, "list identities", scanIdentity, listIdentities, projectID, afterID, limit)
}

// ListKeys pages the signing keys of every status of one identity in
// ascending byte order of id, strictly after afterID, at most limit.
func (db *DB) ListKeys(ctx context.Context, projectID, identityID, afterID string, limit int) ([]store.SigningKey, error) {
	return listRows(ctx, db, "list keys", scanKey, listKeys, projectID, identityID, afterID, limit)
}

// ListTokens pages the project's tokens, revoked ones included, in
// ascending byte order of id, strictly after afterID, at most limit;
// Hash is left empty.
func (db *DB) ListTokens(ctx context.Context, projectID, afterID string, limit int) ([]store.Token, error) {
	return listRows(ctx, db, "list tokens", func(row rowScanner) (store.Token, error) {
		var t store.Token
		var scopes, at string
		if err := row.Scan(&t.ID, &t.ProjectID, &scopes, &t.Revoked, &at); err != nil {
			return store.Token{}, err
		}
		if err := json.Unmarshal([]byte(scopes), &t.Scopes); err != nil {
			return store.Token{}, fmt.Errorf("scopes: %w", store.ErrUnavailable)
		}
		t.CreatedAt = parseTime(at)
		return t, nil
	}, listTokens, projectID, afterID, limit)
}

// listRows runs a registry listing on the read pool and scans every row.
func listRows[T any](ctx context.Context, db *DB, what string, scan func(rowScanner) (T, error), query string, args ...any) ([]T, error) {
	rows, err := db.rd.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, mapErr(what, err)
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, mapErr(what, err)
		}
		out = append(out, v)
	}
	return out, mapErr(what, rows.Err())
}

// AddKey stores a signing key of the identity k.IdentityID in project
// k.ProjectID; an empty Status means active. Errors:
// store.ErrNotFound (no such identity in that project), store.ErrExists.
func (db *DB) AddKey(ctx context.Context, k store.SigningKey) (store.SigningKey, error) {
	if k.Status == "" {
		k.Status = store.StatusActive
	}
	if k.Status != store.StatusActive && k.Status != store.StatusRevoked {
		return store.SigningKey{}, fmt.Errorf("add key: status %q is not active or revoked", k.Status)
	}
	var at string
	err := db.writeTx(ctx, "add key", func(tx *sql.Tx) error {
		var one int
		if err := tx.QueryRowContext(ctx, `SELECT 1 FROM identities WHERE project_id = ? AND id = ?`, k.ProjectID, k.IdentityID).Scan(&one); err != nil {
			return err // sql.ErrNoRows → ErrNotFound: no such identity in the project
		}
		return tx.QueryRowContext(ctx, insertKey, k.ID, k.IdentityID, k.ProjectID, k.PublicKey, k.Status).Scan(&at)
	})
	if err != nil {
		return store.SigningKey{}, err
	}
	k.CreatedAt = parseTime(at)
	return k, nil
}

// GetKey errors: store.ErrNotFound.
func (db *DB) GetKey(ctx context.Context, projectID, id string) (store.SigningKey, error) {
	k, err := scanKey(db.rd.QueryRowContext(ctx, selectKey, projectID, id))
	return k, mapErr("get key", err)
}

// RevokeKey marks the key revoked; events it signed stay. Errors:
// store.ErrNotFound.
func (db *DB) RevokeKey(ctx context.Context, projectID, id string) (store.SigningKey, error) {
	db.wmu.Lock()
	defer db.wmu.Unlock()
	k, err := scanKey(db.w.QueryRowContext(ctx, revokeKey, projectID, id))
	db.ws.forgetSenders() // the next append re-reads the sender's status
	return k, mapErr("revoke key", err)
}

func scanKey(row rowScanner) (store.SigningKey, error) {
	var k store.SigningKey
	var at string
	if err := row.Scan(&k.ID, &k.IdentityID, &k.ProjectID, &k.PublicKey, &k.Status, &at); err != nil {
		return store.SigningKey{}, err
	}
	k.CreatedAt = parseTime(at)
	return k, nil
}

// CreateToken stores a token's id, project, scopes (in the order given)
// and hash. Errors: store.ErrNotFound (unknown project), store.ErrExists.
func (db *DB) CreateToken(ctx context.Context, t store.Token) (store.Token, error) {
	scopes, err := json.Marshal(append([]string{}, t.Scopes...))
	if err != nil {
		return store.Token{}, fmt.Errorf("create token: %w", err)
	}
	var at string
	err = db.writeTx(ctx, "create token", func(tx *sql.Tx) error {
		if err := mustExist(ctx, tx, projectExists, t.ProjectID); err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, insertToken, t.ID, t.ProjectID, string(scopes), t.Hash, t.Revoked).Scan(&at)
	})
	if err != nil {
		return store.Token{}, err
	}
	t.CreatedAt = parseTime(at)
	return t, nil
}

// GetToken reads a token by id, from a cache that RevokeToken invalidates
// before it returns (a revocation by another process on the same file
// within externalCheckInterval, 50 ms). Errors: store.ErrNotFound.
func (db *DB) GetToken(ctx context.Context, id string) (store.Token, error) {
	t, epoch, ok := db.tokens.get(id)
	if ok {
		return t, nil
	}
	var scopes, at string
	err := db.rd.QueryRowContext(ctx, selectToken, id).Scan(&t.ID, &t.ProjectID, &scopes, &t.Hash, &t.Revoked, &at)
	if err != nil {
		return store.Token{}, mapErr("get token", err)
	}
	if err := json.Unmarshal([]byte(scopes), &t.Scopes); err != nil {
		return store.Token{}, fmt.Errorf("get token: scopes: %w", store.ErrUnavailable)
	}
	t.CreatedAt = parseTime(at)
	db.tokens.put(id, t, epoch)
	return t, nil
}

// RevokeToken marks the token revoked. Errors: store.ErrNotFound.
func (db *DB) RevokeToken(ctx context.Context, id string) error {
	res, err := db.w.ExecContext(ctx, revokeToken, id)
	db.tokens.invalidate() // whatever the outcome: the row may have changed
	if err != nil {
		return mapErr("revoke token", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return mapErr("revoke token", err)
	} else if n == 0 {
		return fmt.Errorf("revoke token: %w", store.ErrNotFound)
	}
	return nil
}

// Setting returns a server-wide value. Errors: store.ErrNotFound.
func (db *DB) Setting(ctx context.Context, name string) (string, error) {
	var v string
	if err := db.rd.QueryRowContext(ctx, selectSetting, name).Scan(&v); err != nil {
		return "", mapErr("setting", err)
	}
	return v, nil
}

// PutSetting sets a server-wide value, replacing any earlier one.
func (db *DB) PutSetting(ctx context.Context, name, value string) error {
	_, err := db.w.ExecContext(ctx, upsertSetting, name, value)
	return mapErr("put setting", err)
}

// writeTx runs fn in one transaction on the writer connection; its error
// goes through mapErr.
func (db *DB) writeTx(ctx context.Context, op string, fn func(tx *sql.Tx) error) error {
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
