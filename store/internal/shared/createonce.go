package shared

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// CreateOnce returns the one stored value of a create-once row (the log
// key of store.Tree): selectQ reads it on Read; when there is none,
// create makes one, insertQ stores it unless another writer stored one
// first (ON CONFLICT DO NOTHING or INSERT OR IGNORE), and selectQ, on
// Write, reads the value every process uses. Errors from create are
// wrapped with op; the driver's are mapped.
func (e Engine) CreateOnce(ctx context.Context, op, selectQ, insertQ string, create func() (string, error)) (string, error) {
	var v string
	err := e.Read.QueryRow(ctx, selectQ).Scan(&v)
	if err == nil {
		return v, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return "", e.MapErr(op, err)
	}
	created, err := create()
	if err != nil {
		return "", fmt.Errorf("%s: %w", op, err)
	}
	if _, err := e.Write.Exec(ctx, insertQ, created); err != nil {
		return "", e.MapErr(op, err)
	}
	if err := e.Write.QueryRow(ctx, selectQ).Scan(&v); err != nil {
		return "", e.MapErr(op, err)
	}
	return v, nil
}
