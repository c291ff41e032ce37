package shared

import (
	"context"
	"fmt"

	"github.com/acrelay/acrelay/store"
)

// FeedSQL is one dialect's statements for project visibility, feed tokens
// (store.Visibility, store.FeedTokens) and the archives' counts
// (store.Archives).
type FeedSQL struct {
	// Visibility (project) → visibility; SetVisibility (visibility, project).
	Visibility, SetVisibility string
	// Token (id) → id, project, repository, hash, created_by, revoked,
	// created_at; RevokeToken (project, id).
	Token, RevokeToken string
	// CountRepository (project, repository) and CountThread (project,
	// repository, thread) → count.
	CountRepository, CountThread string
}

// Feeds is the dialect-independent part of store.Visibility,
// store.FeedTokens and store.Archives.
type Feeds struct {
	Engine
	SQL *FeedSQL
}

// Visibility returns store.VisibilityPrivate or store.VisibilityPublic.
// Errors: store.ErrNotFound, store.ErrUnavailable.
func (f Feeds) Visibility(ctx context.Context, projectID string) (string, error) {
	var v string
	if err := f.Read.QueryRow(ctx, f.SQL.Visibility, projectID).Scan(&v); err != nil {
		return "", f.MapErr("project visibility", err)
	}
	return v, nil
}

// SetVisibility errors: store.ErrNotFound, store.ErrUnavailable; a value
// other than the two visibilities is refused before any write.
func (f Feeds) SetVisibility(ctx context.Context, projectID, visibility string) error {
	const op = "set project visibility"
	if visibility != store.VisibilityPrivate && visibility != store.VisibilityPublic {
		return fmt.Errorf("%s: %q is not private or public", op, visibility)
	}
	return f.execOne(ctx, op, f.SQL.SetVisibility, visibility, projectID)
}

// Token errors: store.ErrNotFound, store.ErrUnavailable.
func (f Feeds) Token(ctx context.Context, id string) (store.FeedToken, error) {
	var t store.FeedToken
	var at Time
	err := f.Read.QueryRow(ctx, f.SQL.Token, id).Scan(&t.ID, &t.ProjectID, &t.RepositoryID, &t.Hash, &t.CreatedBy, &t.Revoked, &at)
	if err != nil {
		return store.FeedToken{}, f.MapErr("feed token", err)
	}
	t.CreatedAt = at.T
	return t, nil
}

// RevokeToken errors: store.ErrNotFound (no such feed token in the
// project), store.ErrUnavailable.
func (f Feeds) RevokeToken(ctx context.Context, projectID, id string) error {
	return f.execOne(ctx, "revoke feed token", f.SQL.RevokeToken, projectID, id)
}

// CountRecords errors: store.ErrUnavailable.
func (f Feeds) CountRecords(ctx context.Context, sel store.Selection) (int64, error) {
	var n int64
	var err error
	if sel.ThreadID == "" {
		err = f.Read.QueryRow(ctx, f.SQL.CountRepository, sel.ProjectID, sel.RepositoryID).Scan(&n)
	} else {
		err = f.Read.QueryRow(ctx, f.SQL.CountThread, sel.ProjectID, sel.RepositoryID, sel.ThreadID).Scan(&n)
	}
	return n, f.MapErr("count records", err)
}
