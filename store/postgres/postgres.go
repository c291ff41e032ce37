package postgres

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"embed"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/jackc/puddle/v2"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/internal/groupcommit"
	"github.com/acrelay/acrelay/store/internal/shared"
)

//go:embed migrations/*.sql
var migrations embed.FS

var (
	_ store.Store             = (*DB)(nil)
	_ store.MigrationReporter = (*DB)(nil)
)

// maxAttempts bounds how often a transaction that failed with a
// serialization failure or deadlock (or before reaching the server) runs.
const maxAttempts = 3

// DB is the PostgreSQL store. It is safe for concurrent use.
type DB struct {
	// Witnessing's methods are store.Cosignatures and
	// store.LogWitnesses (witnessing.go).
	shared.Witnessing

	migrated store.MigrationSummary // what Open's migration did (Migrations)
	pool     *pgxpool.Pool
	logger   *slog.Logger
	appends  *groupcommit.Queues[appendStep] // per-project group commit of appends (groupcommit.go)
	obs      store.Observer                  // Options.Observer; nil observes nothing

	advances   store.AdvanceBroker  // local appends and LISTEN/NOTIFY (advances.go)
	wakes      store.PeerWakeBroker // peer link wakes, LISTEN/NOTIFY on the same connection (advances.go)
	listenMu   sync.Mutex
	listenUses int                // brokers (advances, wakes) with subscriptions: the LISTEN loop runs while > 0
	listenStop context.CancelFunc // ends the LISTEN loop; nil while none runs
	listenDone chan struct{}
}

// Open connects to the database at url (a postgres:// URL or key=value
// DSN; pool_max_conns and the other pgxpool parameters apply), applies the
// embedded migrations and returns the store. Errors: store.ErrUnavailable
// when the database cannot be reached or migrated; a malformed url is
// reported without echoing it (it may hold a password).
func Open(ctx context.Context, url string, logger *slog.Logger) (*DB, error) {
	return OpenWith(ctx, url, logger, Options{})
}

// Options tune OpenWith. The zero value is Open's setting.
type Options struct {
	// Observer, when set, is told the duration of every transaction and
	// each group commit's size (metrics); nil observes nothing.
	Observer store.Observer
}

// OpenWith is Open with options.
func OpenWith(ctx context.Context, url string, logger *slog.Logger, opts Options) (*DB, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, errors.New("open postgres: the database url does not parse")
	}
	migrated, err := migrate(ctx, cfg.ConnConfig.Copy(), logger)
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, mapErr("open postgres", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, mapErr("open postgres", err)
	}
	db := &DB{pool: pool, logger: logger, obs: opts.Observer, migrated: migrated}
	db.Witnessing = shared.NewWitnessing(db.engine(), &witnessingSQL)
	db.appends = groupcommit.NewQueues(maxGroupBatch, db.runAppendBatch)
	db.advances.OnFirst, db.advances.OnLast = db.startListening, db.cancelListening
	db.wakes.OnFirst, db.wakes.OnLast = db.startListening, db.cancelListening
	return db, nil
}

// Migrations is what Open's migration applied (store.MigrationReporter).
func (db *DB) Migrations() store.MigrationSummary { return db.migrated }

// migrate applies the embedded migrations through a database/sql handle,
// holding goose's session-level advisory lock.
func migrate(ctx context.Context, cc *pgx.ConnConfig, logger *slog.Logger) (store.MigrationSummary, error) {
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return store.MigrationSummary{}, fmt.Errorf("migrate: %w", err)
	}
	sdb := stdlib.OpenDB(*cc)
	defer sdb.Close()
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return store.MigrationSummary{}, fmt.Errorf("migrate: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, sdb, sub,
		goose.WithDisableGlobalRegistry(true), goose.WithSessionLocker(locker))
	if err != nil {
		return store.MigrationSummary{}, fmt.Errorf("migrate: %w", err)
	}
	results, err := p.Up(ctx)
	if err != nil {
		// The driver's own text helps the operator here (pgconn never puts
		// the password in it); it is logged, not returned.
		logger.Error("postgres migration failed", "err", err)
		return store.MigrationSummary{}, fmt.Errorf("migrate: %w", store.ErrUnavailable)
	}
	sum := store.MigrationSummary{Dialect: "postgres", Applied: len(results)}
	for i, r := range results {
		// One line per migration at debug; the summary is logged once by
		// cmd, after the first start's token banner.
		logger.Debug("postgres migration applied", "version", r.Source.Version, "duration", r.Duration)
		if i == 0 {
			sum.From = r.Source.Version - 1
		}
		sum.To = r.Source.Version
		sum.Duration += r.Duration
	}
	return sum, nil
}

// Close closes every connection of the pool, waiting for those in use.
// Calling it twice is harmless.
func (db *DB) Close() error {
	db.stopListening()
	db.pool.Close()
	return nil
}

// streamLockKey is the advisory-lock key of a project's stream: the first 8
// bytes of SHA-256 over a fixed prefix and the project id. Stable across
// processes, versions and PostgreSQL releases (unlike hashtext), and
// prefixed so it does not meet other applications' keys by accident.
func streamLockKey(projectID string) int64 {
	sum := sha256.Sum256([]byte("acrelay/stream-lock\x00" + projectID))
	return int64(binary.BigEndian.Uint64(sum[:8]))
}

// lockStream takes the project's stream lock until the transaction ends.
// It must be a statement of its own: see doc.go.
func lockStream(ctx context.Context, tx pgx.Tx, projectID string) error {
	_, err := tx.Exec(ctx, lockStreamSQL, streamLockKey(projectID))
	return err
}

// inTx runs fn in one transaction and commits. A serialization failure, a
// deadlock, or a failure before anything reached the server is retried
// (maxAttempts in all, short backoff); fn must therefore only write its
// results to its own variables on success paths it can repeat. Its error
// goes through mapErr.
func (db *DB) inTx(ctx context.Context, op string, opts pgx.TxOptions, fn func(tx pgx.Tx) error) (err error) {
	if db.obs != nil {
		defer func(start time.Time) { db.obs.ObserveTx(op, time.Since(start), err) }(time.Now())
	}
	for attempt := 1; ; attempt++ {
		err = pgx.BeginTxFunc(ctx, db.pool, opts, fn)
		if err == nil {
			return nil
		}
		if attempt < maxAttempts && retryable(err) && ctx.Err() == nil {
			db.logger.DebugContext(ctx, "postgres transaction retried", "op", op, "attempt", attempt, "err", mapErr(op, err))
			select {
			case <-time.After(time.Duration(attempt*attempt) * 5 * time.Millisecond):
				continue
			case <-ctx.Done():
			}
		}
		err = mapErr(op, err)
		if errors.Is(err, store.ErrUnavailable) {
			db.logger.WarnContext(ctx, "postgres store unavailable", "op", op, "err", err)
		}
		return err
	}
}

// retryable reports a failure worth running the whole transaction again.
func retryable(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "40001" || pe.Code == "40P01"
	}
	return pgconn.SafeToRetry(err)
}

// mapErr adds op as context to err and translates the driver's errors to
// store sentinels: a unique violation (*pgconn.PgError 23505) to ErrExists,
// a foreign-key violation (23503) and pgx.ErrNoRows to ErrNotFound, a
// context error inside a driver error to the bare context error, and any
// other server error (with its SQLSTATE), a failed connect, a network
// error, a closed connection, pool or transaction to ErrUnavailable. The
// driver error itself is never wrapped (its message may quote stored
// values), so nothing above store can reach it. Every other error (a store
// sentinel, a test's sentinel) passes through unchanged, wrapped with %w,
// so a new sentinel needs no list to survive.
func mapErr(op string, err error) error {
	if err == nil {
		return nil
	}
	if s := driverSentinel(err); s != nil {
		return fmt.Errorf("%s: %w", op, s)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// driverSentinel is the store sentinel for an error of pgx, pgconn, the
// network or database/sql, nil for any other error.
func driverSentinel(err error) error {
	var pe *pgconn.PgError
	var ce *pgconn.ConnectError
	var ne net.Error // context.DeadlineExceeded is one too: checked after it
	var oe *net.OpError
	var sae pgx.ScanArgError
	// Every error type of pgconn's own (timeouts, a busy or closed
	// connection, a context already done) says whether it is SafeToRetry.
	var pgconnErr interface{ SafeToRetry() bool }
	switch {
	case errors.As(err, &pe):
		switch pe.Code {
		case "23505":
			return store.ErrExists
		case "23503":
			return store.ErrNotFound
		}
		return fmt.Errorf("%w (sqlstate %s)", store.ErrUnavailable, pe.Code)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		if errors.As(err, &pgconnErr) || errors.As(err, &ce) || errors.As(err, &oe) {
			return ctxErr(err) // not the driver's text around it
		}
		return nil // the caller's own error, kept as it is
	case errors.Is(err, pgx.ErrNoRows), errors.Is(err, sql.ErrNoRows):
		return store.ErrNotFound
	case errors.As(err, &ce), errors.As(err, &ne), errors.As(err, &pgconnErr), errors.As(err, &sae),
		errors.Is(err, pgconn.ErrConnClosed), errors.Is(err, pgx.ErrTxClosed), errors.Is(err, puddle.ErrClosedPool),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, sql.ErrConnDone), errors.Is(err, sql.ErrTxDone):
		return store.ErrUnavailable
	}
	return nil
}

// ctxErr returns the bare context error inside err.
func ctxErr(err error) error {
	if errors.Is(err, context.Canceled) {
		return context.Canceled
	}
	return context.DeadlineExceeded
}

// utc returns t in UTC (pgx decodes timestamptz in the local zone).
func utc(t time.Time) time.Time { return t.UTC() }

// nullTime is the zero time for NULL.
func nullTime(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}

// nullable returns nil for the zero time, for a NULL parameter.
func nullable(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}

var _ store.MigrationChecker = (*DB)(nil)

// PendingMigrations is the number of embedded migrations newer than the
// database's schema version (read without goose's lock, so it never waits
// for a migrating process). Errors: ErrUnavailable.
func (db *DB) PendingMigrations(ctx context.Context) (int, error) {
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return 0, fmt.Errorf("migrations: %w", err)
	}
	sdb := stdlib.OpenDBFromPool(db.pool)
	defer sdb.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, sdb, sub, goose.WithDisableGlobalRegistry(true))
	if err != nil {
		return 0, fmt.Errorf("migrations: %w", err)
	}
	current, target, err := p.GetVersions(ctx)
	if err != nil {
		return 0, mapErr("migrations", err)
	}
	return int(max(target-current, 0)), nil
}
