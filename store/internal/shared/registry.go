package shared

import (
	"context"
	"fmt"

	"github.com/acrelay/acrelay/store"
)

// RegistrySQL is one dialect's statements for the registry's reads and
// single-statement writes (store.Registry, spec §10). Identity rows are
// (id, project, display name, status, created_at); key rows (id,
// identity, project, public key, status, created_at); token rows (id,
// project, scopes, [hash,] revoked, created_at).
type RegistrySQL struct {
	// Project (id) → id, created_at; CountProjects → count.
	Project, CountProjects string
	// Identity (project, id); ActiveIdentityIDs and Identities (project,
	// after, limit).
	Identity, ActiveIdentityIDs, Identities string
	// Key (project, id); Keys (project, identity, after, limit).
	Key, Keys string
	// Token (id) with hash; Tokens (project, after, limit) without;
	// RevokeToken (id).
	Token, Tokens, RevokeToken string
	// Setting (name) → value; PutSetting (name, value).
	Setting, PutSetting string
	// Scopes is a scan destination for a token's scopes column and the
	// step that stores them in *out once the row is scanned (SQLite keeps
	// a JSON array, PostgreSQL a text[]).
	Scopes func(out *[]string) (dest any, finish func() error)
}

// Registry is the dialect-independent part of store.Registry.
type Registry struct {
	Engine
	SQL *RegistrySQL
}

// Project errors: store.ErrNotFound.
func (r Registry) Project(ctx context.Context, id string) (store.Project, error) {
	var p store.Project
	var at Time
	if err := r.Read.QueryRow(ctx, r.SQL.Project, id).Scan(&p.ID, &at); err != nil {
		return store.Project{}, r.MapErr("get project", err)
	}
	p.CreatedAt = at.T
	return p, nil
}

// CountProjects returns the number of projects.
func (r Registry) CountProjects(ctx context.Context) (int, error) {
	var n int
	if err := r.Read.QueryRow(ctx, r.SQL.CountProjects).Scan(&n); err != nil {
		return 0, r.MapErr("count projects", err)
	}
	return n, nil
}

// Identity errors: store.ErrNotFound.
func (r Registry) Identity(ctx context.Context, projectID, id string) (store.Identity, error) {
	i, err := ScanIdentity(r.Read.QueryRow(ctx, r.SQL.Identity, projectID, id))
	return i, r.MapErr("get identity", err)
}

// ActiveIdentityIDs pages active identity ids in ascending byte order,
// strictly after afterID, at most limit.
func (r Registry) ActiveIdentityIDs(ctx context.Context, projectID, afterID string, limit int) ([]string, error) {
	return List(ctx, r.Engine, "active identity ids", ScanString, r.SQL.ActiveIdentityIDs, projectID, afterID, limit)
}

// Identities pages the project's identities of every status in ascending
// byte order of id, strictly after afterID, at most limit.
func (r Registry) Identities(ctx context.Context, projectID, afterID string, limit int) ([]store.Identity, error) {
	return List(ctx, r.Engine, "list identities", ScanIdentity, r.SQL.Identities, projectID, afterID, limit)
}

// Key errors: store.ErrNotFound.
func (r Registry) Key(ctx context.Context, projectID, id string) (store.SigningKey, error) {
	k, err := ScanKey(r.Read.QueryRow(ctx, r.SQL.Key, projectID, id))
	return k, r.MapErr("get key", err)
}

// Keys pages the signing keys of every status of one identity in
// ascending byte order of id, strictly after afterID, at most limit.
func (r Registry) Keys(ctx context.Context, projectID, identityID, afterID string, limit int) ([]store.SigningKey, error) {
	return List(ctx, r.Engine, "list keys", ScanKey, r.SQL.Keys, projectID, identityID, afterID, limit)
}

// Token reads a token by id. Errors: store.ErrNotFound.
func (r Registry) Token(ctx context.Context, id string) (store.Token, error) {
	var t store.Token
	var at Time
	dest, finish := r.SQL.Scopes(&t.Scopes)
	if err := r.Read.QueryRow(ctx, r.SQL.Token, id).Scan(&t.ID, &t.ProjectID, dest, &t.Hash, &t.Revoked, &at); err != nil {
		return store.Token{}, r.MapErr("get token", err)
	}
	if err := finish(); err != nil {
		return store.Token{}, fmt.Errorf("get token: %w", err)
	}
	t.CreatedAt = at.T
	return t, nil
}

// Tokens pages the project's tokens, revoked ones included, in ascending
// byte order of id, strictly after afterID, at most limit; Hash is left
// empty.
func (r Registry) Tokens(ctx context.Context, projectID, afterID string, limit int) ([]store.Token, error) {
	return List(ctx, r.Engine, "list tokens", func(row Row) (store.Token, error) {
		var t store.Token
		var at Time
		dest, finish := r.SQL.Scopes(&t.Scopes)
		if err := row.Scan(&t.ID, &t.ProjectID, dest, &t.Revoked, &at); err != nil {
			return store.Token{}, err
		}
		if err := finish(); err != nil {
			return store.Token{}, err
		}
		t.CreatedAt = at.T
		return t, nil
	}, r.SQL.Tokens, projectID, afterID, limit)
}

// RevokeToken marks the token revoked. Errors: store.ErrNotFound.
func (r Registry) RevokeToken(ctx context.Context, id string) error {
	return r.execOne(ctx, "revoke token", r.SQL.RevokeToken, id)
}

// Setting returns a server-wide value. Errors: store.ErrNotFound.
func (r Registry) Setting(ctx context.Context, name string) (string, error) {
	var v string
	if err := r.Read.QueryRow(ctx, r.SQL.Setting, name).Scan(&v); err != nil {
		return "", r.MapErr("setting", err)
	}
	return v, nil
}

// PutSetting sets a server-wide value, replacing any earlier one.
func (r Registry) PutSetting(ctx context.Context, name, value string) error {
	_, err := r.ExecN(ctx, "put setting", r.SQL.PutSetting, name, value)
	return err
}

// ScanIdentity scans an identity row.
func ScanIdentity(r Row) (store.Identity, error) {
	var i store.Identity
	var at Time
	if err := r.Scan(&i.ID, &i.ProjectID, &i.DisplayName, &i.Status, &at); err != nil {
		return store.Identity{}, err
	}
	i.CreatedAt = at.T
	return i, nil
}

// ScanKey scans a signing key row.
func ScanKey(r Row) (store.SigningKey, error) {
	var k store.SigningKey
	var at Time
	if err := r.Scan(&k.ID, &k.IdentityID, &k.ProjectID, &k.PublicKey, &k.Status, &at); err != nil {
		return store.SigningKey{}, err
	}
	k.CreatedAt = at.T
	return k, nil
}
