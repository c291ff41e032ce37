package sqlite

import (
	"context"
	"database/sql"
	"sync"
)

// reader runs read-pool queries through statements prepared once per
// query text (database/sql then prepares each lazily on every pooled
// connection): modernc.org/sqlite would otherwise parse the SQL on every
// call, which was a tenth of a POST's CPU (token, key, identity lookups).
type reader struct {
	db    *sql.DB
	mu    sync.Mutex
	stmts map[string]*sql.Stmt
}

func newReader(db *sql.DB) *reader { return &reader{db: db, stmts: map[string]*sql.Stmt{}} }

func (r *reader) stmt(ctx context.Context, q string) (*sql.Stmt, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s, ok := r.stmts[q]; ok {
		return s, nil
	}
	s, err := r.db.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	r.stmts[q] = s
	return s, nil
}

// QueryRowContext is sql.DB.QueryRowContext through a prepared statement.
// A preparation error surfaces from Scan, as database/sql's does.
func (r *reader) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	s, err := r.stmt(ctx, q)
	if err != nil {
		return r.db.QueryRowContext(ctx, q, args...)
	}
	return s.QueryRowContext(ctx, args...)
}

// QueryContext is sql.DB.QueryContext through a prepared statement.
func (r *reader) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	s, err := r.stmt(ctx, q)
	if err != nil {
		return nil, err
	}
	return s.QueryContext(ctx, args...)
}

func (r *reader) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.stmts {
		s.Close()
	}
	r.stmts = map[string]*sql.Stmt{}
}
