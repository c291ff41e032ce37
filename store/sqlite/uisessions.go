package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/acrelay/acrelay/store"
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

// CreateUISession stores s. Errors: store.ErrExists.
func (db *DB) CreateUISession(ctx context.Context, s store.UISession) error {
	_, err := db.w.ExecContext(ctx, insertUISession, s.Hash, s.ProjectID, s.TokenID, formatTime(s.CreatedAt), formatTime(s.ExpiresAt))
	return mapErr("create ui session", err)
}

// UISession returns a session by hash. Errors: store.ErrNotFound.
func (db *DB) UISession(ctx context.Context, hash []byte) (store.UISession, error) {
	s := store.UISession{Hash: hash}
	var created, expires string
	err := db.rd.QueryRowContext(ctx, selectUISession, hash).Scan(&s.ProjectID, &s.TokenID, &created, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return store.UISession{}, fmt.Errorf("ui session: %w", store.ErrNotFound)
	}
	if err != nil {
		return store.UISession{}, mapErr("ui session", err)
	}
	s.CreatedAt, s.ExpiresAt = parseTime(created), parseTime(expires)
	return s, nil
}

// DeleteUISession ends a session (absent is no error).
func (db *DB) DeleteUISession(ctx context.Context, hash []byte) error {
	_, err := db.execN(ctx, "delete ui session", deleteUISession, hash)
	return err
}

// DeleteExpiredUISessions deletes one batch of expired sessions.
func (db *DB) DeleteExpiredUISessions(ctx context.Context, before time.Time, limit int) (int, error) {
	return db.execN(ctx, "delete expired ui sessions", deleteExpiredUISessions, formatTime(before), limit)
}
