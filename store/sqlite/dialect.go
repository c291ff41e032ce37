package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/acrelay/acrelay/store/internal/shared"
)

// sqlQuerier is what database/sql's *sql.DB, *sql.Tx and this package's
// reader have in common.
type sqlQuerier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// querier adapts a database/sql querier to shared.Querier. Exec needs an
// ExecContext (a *sql.Tx, *sql.DB): the read pool has none.
type querier struct{ q sqlQuerier }

func qr(sq sqlQuerier) shared.Querier { return querier{sq} }

func (a querier) QueryRow(ctx context.Context, query string, args ...any) shared.Row {
	return a.q.QueryRowContext(ctx, query, args...)
}

func (a querier) Query(ctx context.Context, query string, args ...any) (shared.Rows, error) {
	rows, err := a.q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return sqlRows{rows}, nil
}

var errReadOnly = errors.New("sqlite: a write on the read pool")

func (a querier) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	e, ok := a.q.(interface {
		ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	})
	if !ok {
		return 0, errReadOnly
	}
	res, err := e.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// sqlRows is *sql.Rows with shared.Rows's Close (its error is Err's).
type sqlRows struct{ *sql.Rows }

func (r sqlRows) Close() { r.Rows.Close() }

// engine is this store as the shared code's reads see it.
func (db *DB) engine() shared.Engine {
	return shared.Engine{Read: qr(db.rd), Write: qr(db.w), MapErr: mapErr,
		TimeArg: func(t time.Time) any { return formatTime(t) }}
}
