package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acrelay/acrelay/store"
)

// errTestSentinel is a sentinel no list in this package knows of.
var errTestSentinel = errors.New("a sentinel defined by the test")

// TestMapErrPassesThroughWhatIsNotTheDriver: an error that is not the
// driver's (a new sentinel, a store sentinel, a context error) comes out of
// mapErr as it went in, wrapped with op; driver errors map as before.
func TestMapErrPassesThroughWhatIsNotTheDriver(t *testing.T) {
	for _, sentinel := range []error{errTestSentinel, store.ErrHandoffExists, store.ErrIdempotencyKeyReused,
		store.ErrVersionConflict, store.ErrSenderNotActive, store.ErrEventIDCollision, ErrCheckpointFailing,
		context.Canceled, context.DeadlineExceeded} {
		t.Run(sentinel.Error(), func(t *testing.T) {
			in := fmt.Errorf("inner: %w", sentinel)
			got := mapErr("op", in)
			if !errors.Is(got, sentinel) || !errors.Is(got, in) {
				t.Errorf("mapErr(%v) = %v, want it wrapped", in, got)
			}
			if errors.Is(got, store.ErrUnavailable) && sentinel != store.ErrUnavailable {
				t.Errorf("mapErr(%v) = %v, which is ErrUnavailable", in, got)
			}
			if !strings.HasPrefix(got.Error(), "op: ") {
				t.Errorf("mapErr(%v) = %q, want op as context", in, got)
			}
		})
	}
	if mapErr("op", nil) != nil {
		t.Error("mapErr(nil) is not nil")
	}

	db, err := Open(context.Background(), filepath.Join(t.TempDir(), "maperr.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	if _, err := db.w.ExecContext(ctx, `INSERT INTO settings (name, value) VALUES ('k', 'v')`); err != nil {
		t.Fatal(err)
	}
	_, unique := db.w.ExecContext(ctx, `INSERT INTO settings (name, value) VALUES ('k', 'w')`)
	_, syntax := db.w.ExecContext(ctx, `INSERT INTO no_such_table VALUES (1)`)
	noRows := db.w.QueryRowContext(ctx, `SELECT value FROM settings WHERE name = 'none'`).Scan(new(string))
	tx, err := db.w.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	tx.Rollback()
	txDone := tx.Commit()
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"unique violation", unique, store.ErrExists},
		{"no such table", syntax, store.ErrUnavailable},
		{"no rows", noRows, store.ErrNotFound},
		{"transaction done", txDone, store.ErrUnavailable},
		{"connection done", fmt.Errorf("x: %w", sql.ErrConnDone), store.ErrUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.err == nil {
				t.Fatal("the driver returned no error")
			}
			got := mapErr("op", tc.err)
			if !errors.Is(got, tc.want) {
				t.Errorf("mapErr(%v) = %v, want %v", tc.err, got, tc.want)
			}
			if errors.Is(got, tc.err) {
				t.Errorf("mapErr(%v) = %v still wraps the driver error", tc.err, got)
			}
		})
	}
}

// TestMapErrClosed: database/sql's error for a closed pool maps to
// ErrUnavailable.
func TestMapErrClosed(t *testing.T) {
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	err = db.Ping()
	if err == nil {
		t.Fatal("no error from a closed pool")
	}
	if got := mapErr("op", err); !errors.Is(got, store.ErrUnavailable) {
		t.Errorf("mapErr(%v) = %v, want ErrUnavailable", err, got)
	}
}
