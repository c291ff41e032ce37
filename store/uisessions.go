package store

import (
	"context"
	"time"
)

// UISession is one signed-in browser of the live web view (relay/ui.go),
// kept in the store so that every relay process behind one name serves a
// signed-in page. Only the SHA-256 of the session token (the cookie's
// value) is stored, never the token, and never the bearer token it was
// made from: the session names that token by id.
type UISession struct {
	Hash      []byte // SHA-256 of the session token, 32 bytes
	ProjectID string
	TokenID   string // the read token the browser signed in with
	CreatedAt time.Time
	ExpiresAt time.Time // the session is void from this instant
}

// UISessions stores the web view's sessions.
type UISessions interface {
	// CreateUISession stores s. Errors: ErrExists for a taken hash.
	CreateUISession(ctx context.Context, s UISession) error
	// UISession returns the session with this hash, expired or not (the
	// caller compares ExpiresAt with its clock). Errors: ErrNotFound.
	UISession(ctx context.Context, hash []byte) (UISession, error)
	// DeleteUISession ends a session; deleting an absent one is no error.
	DeleteUISession(ctx context.Context, hash []byte) error
	// DeleteExpiredUISessions deletes at most limit sessions that expired
	// before before and returns how many it deleted.
	DeleteExpiredUISessions(ctx context.Context, before time.Time, limit int) (int, error)
}
