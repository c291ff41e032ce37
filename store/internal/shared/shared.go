// Package shared is the part of the stores' reads and writes that does not
// depend on the SQL dialect, written once over Querier, after Dendrite's
// storage/shared: paging with Limit+1 rows and has_more, existence
// checks, version checks, scans and the error wrapping around them. Each
// dialect (store/sqlite, store/postgres) keeps its SQL in its own files
// and hands it to this package in a per-feature SQL struct (HandoffSQL,
// ...), together with its Engine: a Querier over its read pool and its
// mapErr. Transactions stay the dialect's (a dialect may take a lock or
// check the project first); the shared code runs inside them through a
// Querier over the dialect's transaction. store/internal/groupcommit is
// the append path's shared layer.
//
// Two driver habits are hidden here: a missing row is always
// sql.ErrNoRows (the PostgreSQL adapter translates pgx.ErrNoRows; both
// dialects' mapErr make it store.ErrNotFound), and a stored time is
// scanned into Time, which reads SQLite's text and PostgreSQL's
// timestamptz alike. A value only passed back to the database (a page
// cursor) is scanned into an any and passed back as it came.
package shared

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/acrelay/acrelay/store"
)

// Row is one row of QueryRow: Scan returns sql.ErrNoRows when there is none.
type Row interface {
	Scan(dest ...any) error
}

// Rows is the cursor of Query; Close is idempotent.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close()
}

// Querier is a pool or a transaction of either engine, through the
// dialect's thin adapter. Exec returns the rows affected.
type Querier interface {
	QueryRow(ctx context.Context, query string, args ...any) Row
	Query(ctx context.Context, query string, args ...any) (Rows, error)
	Exec(ctx context.Context, query string, args ...any) (int64, error)
}

// Engine is a dialect as the shared code sees it outside its
// transactions: its read pool, where single writing statements run
// (SQLite's writer connection, PostgreSQL's pool), and its error mapper,
// which adds op as context and turns the driver's errors into store
// sentinels (sql.ErrNoRows into store.ErrNotFound).
type Engine struct {
	Read   Querier
	Write  Querier
	MapErr func(op string, err error) error
	// TimeArg is how a time is passed to a statement (SQLite: text in
	// TimeLayout; PostgreSQL: the time in UTC).
	TimeArg func(time.Time) any
}

// NullTimeArg is TimeArg, or NULL for the zero time.
func (e Engine) NullTimeArg(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return e.TimeArg(t)
}

// List runs query on the read pool and scans every row; errors are
// mapped with op.
func List[T any](ctx context.Context, e Engine, op string, scan func(Row) (T, error), query string, args ...any) ([]T, error) {
	out, err := Collect(ctx, e.Read, scan, query, args...)
	if err != nil {
		return nil, e.MapErr(op, err)
	}
	return out, nil
}

// ExecN runs one writing statement on Write and returns the rows it
// affected; errors are mapped with op.
func (e Engine) ExecN(ctx context.Context, op, query string, args ...any) (int, error) {
	n, err := e.Write.Exec(ctx, query, args...)
	if err != nil {
		return 0, e.MapErr(op, err)
	}
	return int(n), nil
}

// execOne runs a writing statement on Write; no row affected is
// store.ErrNotFound.
func (e Engine) execOne(ctx context.Context, op, query string, args ...any) error {
	n, err := e.ExecN(ctx, op, query, args...)
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("%s: %w", op, store.ErrNotFound)
	}
	return nil
}

// ScanString scans a one-column row of text.
func ScanString(r Row) (s string, err error) { return s, r.Scan(&s) }

// Exists reports whether query (a SELECT 1 …) has a row.
func Exists(ctx context.Context, q Querier, query string, args ...any) (bool, error) {
	var one int
	err := q.QueryRow(ctx, query, args...).Scan(&one)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	}
	return false, err
}

// MustExist returns store.ErrNotFound unless query (a SELECT 1 …) has a row.
func MustExist(ctx context.Context, q Querier, query string, args ...any) error {
	ok, err := Exists(ctx, q, query, args...)
	if err == nil && !ok {
		return store.ErrNotFound
	}
	return err
}

// Collect runs query and scans every row with scan. Errors are the
// driver's, unmapped.
func Collect[T any](ctx context.Context, q Querier, scan func(Row) (T, error), query string, args ...any) ([]T, error) {
	rows, err := q.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// Page cuts the Limit+1 rows a page query asked for to limit and reports
// whether there were more.
func Page[T any](rows []T, limit int) ([]T, bool) {
	return rows[:min(len(rows), limit)], len(rows) > limit
}

// CheckLimit is the error of a page size outside 1–max, nil inside.
func CheckLimit(op string, limit, max int) error {
	if limit < 1 || limit > max {
		return fmt.Errorf("%s: limit %d outside 1–%d", op, limit, max)
	}
	return nil
}

// TimeLayout is how SQLite stores a time: UTC text with milliseconds, as
// strftime('%Y-%m-%dT%H:%M:%fZ','now') writes it.
const TimeLayout = "2006-01-02T15:04:05.000Z"

// Time is a scan destination for a stored time on either engine: SQLite's
// text in TimeLayout, PostgreSQL's timestamptz, or NULL (the zero time).
// T is in UTC; text that does not parse is the zero time.
type Time struct{ T time.Time }

// Scan implements sql.Scanner (pgx uses it too).
func (t *Time) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		t.T = time.Time{}
	case time.Time:
		t.T = v.UTC()
	case string:
		t.T = parseText(v)
	case []byte:
		t.T = parseText(string(v))
	default:
		return fmt.Errorf("shared: cannot scan %T into a time", src)
	}
	return nil
}

func parseText(s string) time.Time {
	t, err := time.Parse(TimeLayout, s)
	if err != nil {
		return time.Time{}
	}
	return t.UTC()
}

// TimeOf is a value scanned into an any (a cursor, a RETURNING created_at)
// read as a Time.
func TimeOf(v any) time.Time {
	var t Time
	if err := t.Scan(v); err != nil {
		return time.Time{}
	}
	return t.T
}
