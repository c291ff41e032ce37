package postgres

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/acrelay/acrelay/store/internal/shared"
)

// pgxQuerier is what pgx.Tx and *pgxpool.Pool have in common.
type pgxQuerier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// querier adapts pgx to shared.Querier: a missing row is sql.ErrNoRows
// (mapErr makes either store.ErrNotFound).
type querier struct{ q pgxQuerier }

func qr(pq pgxQuerier) shared.Querier { return querier{pq} }

func (a querier) QueryRow(ctx context.Context, query string, args ...any) shared.Row {
	return row{a.q.QueryRow(ctx, query, args...)}
}

func (a querier) Query(ctx context.Context, query string, args ...any) (shared.Rows, error) {
	return a.q.Query(ctx, query, args...)
}

func (a querier) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	tag, err := a.q.Exec(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

type row struct{ pgx.Row }

func (r row) Scan(dest ...any) error {
	err := r.Row.Scan(dest...)
	if errors.Is(err, pgx.ErrNoRows) {
		return sql.ErrNoRows
	}
	return err
}

// engine is this store as the shared code's reads see it.
func (db *DB) engine() shared.Engine {
	return shared.Engine{Read: qr(db.pool), Write: qr(db.pool), MapErr: mapErr,
		TimeArg: func(t time.Time) any { return t.UTC() }}
}
