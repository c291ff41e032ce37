package postgres

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/acrelay/acrelay/internal/pgtest"
	"github.com/acrelay/acrelay/store"
)

// errTestSentinel is a sentinel no list in this package knows of.
var errTestSentinel = errors.New("a sentinel defined by the test")

// TestMapErrPassesThroughWhatIsNotTheDriver: an error that is not the
// driver's (a new sentinel, a store sentinel, a context error) comes out of
// mapErr as it went in, wrapped with op.
func TestMapErrPassesThroughWhatIsNotTheDriver(t *testing.T) {
	for _, sentinel := range []error{errTestSentinel, store.ErrHandoffExists, store.ErrIdempotencyKeyReused,
		store.ErrVersionConflict, store.ErrSenderNotActive, store.ErrEventIDCollision,
		context.Canceled, context.DeadlineExceeded} {
		t.Run(sentinel.Error(), func(t *testing.T) {
			in := fmt.Errorf("inner: %w", sentinel)
			got := mapErr("op", in)
			if !errors.Is(got, sentinel) || !errors.Is(got, in) {
				t.Errorf("mapErr(%v) = %v, want it wrapped", in, got)
			}
			if errors.Is(got, store.ErrUnavailable) {
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
}

// TestMapErrDriverErrors: the driver's errors map to store sentinels as
// before, without the driver error in the chain.
func TestMapErrDriverErrors(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want error
	}{
		{"unique violation", &pgconn.PgError{Code: "23505"}, store.ErrExists},
		{"foreign key violation", &pgconn.PgError{Code: "23503"}, store.ErrNotFound},
		{"other sqlstate", &pgconn.PgError{Code: "53300"}, store.ErrUnavailable},
		{"no rows", pgx.ErrNoRows, store.ErrNotFound},
		{"tx closed", pgx.ErrTxClosed, store.ErrUnavailable},
		{"conn closed", pgconn.ErrConnClosed, store.ErrUnavailable},
	}
	// Errors as the driver returns them: a refused connection and, with a
	// server (pgtest.EnvVar), a unique violation and a canceled query.
	ctx := context.Background()
	_, refused := pgx.Connect(ctx, "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=2")
	cases = append(cases, struct {
		name string
		err  error
		want error
	}{"connect refused", refused, store.ErrUnavailable})
	if os.Getenv(pgtest.EnvVar) != "" {
		conn, err := pgx.Connect(ctx, pgtest.FreshDatabase(t))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, `CREATE TABLE u (k text PRIMARY KEY); INSERT INTO u VALUES ('a')`); err != nil {
			t.Fatal(err)
		}
		_, unique := conn.Exec(ctx, `INSERT INTO u VALUES ('a')`)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		_, canceled := conn.Exec(cctx, `SELECT pg_sleep(1)`)
		cases = append(cases, []struct {
			name string
			err  error
			want error
		}{{"server unique violation", unique, store.ErrExists}, {"canceled query", canceled, context.Canceled}}...)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.err == nil {
				t.Fatal("the driver returned no error")
			}
			got := mapErr("op", fmt.Errorf("inner: %w", tc.err))
			if !errors.Is(got, tc.want) {
				t.Errorf("mapErr(%v) = %v, want %v", tc.err, got, tc.want)
			}
			if errors.Is(got, tc.err) {
				t.Errorf("mapErr(%v) = %v still wraps the driver error", tc.err, got)
			}
		})
	}
}
