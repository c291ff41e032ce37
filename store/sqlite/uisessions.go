package sqlite

import (
	"context"
	"time"

	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/internal/shared"
)

// The web view's sessions (store.UISessions; migration 0015).
const (
	insertUISession = `INSERT INTO ui_sessions (session_hash, project_id, token_id, created_at, expires_at)
		VALUES (?, ?, ?, ?, ?)`
	selectUISession = `SELECT project_id, token_id, created_at, expires_at FROM ui_sessions WHERE session_hash = ?`
	deleteUISession = `DELETE FROM ui_sessions WHERE session_hash = ?`
	// deleteExpiredUISessions deletes one batch, oldest first.
	deleteExpiredUISessions = `DELETE FROM ui_sessions WHERE session_hash IN (
		SELECT session_hash FROM ui_sessions WHERE expires_at < ?1 ORDER BY expires_at LIMIT ?2)`
)

var uiSessionSQL = shared.UISessionSQL{
	Insert: insertUISession, Select: selectUISession, Delete: deleteUISession, DeleteExpired: deleteExpiredUISessions,
}

func (db *DB) uiSessions() shared.UISessions {
	return shared.UISessions{Engine: db.engine(), SQL: &uiSessionSQL}
}

// CreateUISession stores s. Errors: store.ErrExists.
func (db *DB) CreateUISession(ctx context.Context, s store.UISession) error {
	return db.uiSessions().Create(ctx, s)
}

// UISession returns a session by hash. Errors: store.ErrNotFound.
func (db *DB) UISession(ctx context.Context, hash []byte) (store.UISession, error) {
	return db.uiSessions().Get(ctx, hash)
}

// DeleteUISession ends a session (absent is no error).
func (db *DB) DeleteUISession(ctx context.Context, hash []byte) error {
	return db.uiSessions().Delete(ctx, hash)
}

// DeleteExpiredUISessions deletes one batch of expired sessions.
func (db *DB) DeleteExpiredUISessions(ctx context.Context, before time.Time, limit int) (int, error) {
	return db.uiSessions().DeleteExpired(ctx, before, limit)
}
