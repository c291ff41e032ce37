package shared

import (
	"context"
	"time"

	"github.com/acrelay/acrelay/store"
)

// UISessionSQL is one dialect's statements for the web view's sessions
// (store.UISessions).
type UISessionSQL struct {
	// Insert (hash, project, token, created_at, expires_at).
	Insert string
	// Select (hash) → project, token, created_at, expires_at.
	Select string
	// Delete (hash); DeleteExpired (before, limit) deletes one batch,
	// oldest first.
	Delete, DeleteExpired string
}

// UISessions is store.UISessions over one dialect's SQL.
type UISessions struct {
	Engine
	SQL *UISessionSQL
}

// Create stores s. Errors: store.ErrExists, store.ErrUnavailable.
func (u UISessions) Create(ctx context.Context, s store.UISession) error {
	_, err := u.ExecN(ctx, "create ui session", u.SQL.Insert, s.Hash, s.ProjectID, s.TokenID, u.TimeArg(s.CreatedAt), u.TimeArg(s.ExpiresAt))
	return err
}

// Get returns a session by hash. Errors: store.ErrNotFound,
// store.ErrUnavailable.
func (u UISessions) Get(ctx context.Context, hash []byte) (store.UISession, error) {
	s := store.UISession{Hash: hash}
	var created, expires Time
	if err := u.Read.QueryRow(ctx, u.SQL.Select, hash).Scan(&s.ProjectID, &s.TokenID, &created, &expires); err != nil {
		return store.UISession{}, u.MapErr("ui session", err)
	}
	s.CreatedAt, s.ExpiresAt = created.T, expires.T
	return s, nil
}

// Delete ends a session (absent is no error).
func (u UISessions) Delete(ctx context.Context, hash []byte) error {
	_, err := u.ExecN(ctx, "delete ui session", u.SQL.Delete, hash)
	return err
}

// DeleteExpired deletes one batch of sessions expired before before and
// returns how many.
func (u UISessions) DeleteExpired(ctx context.Context, before time.Time, limit int) (int, error) {
	return u.ExecN(ctx, "delete expired ui sessions", u.SQL.DeleteExpired, u.TimeArg(before), limit)
}
