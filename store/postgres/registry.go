package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acrelay/acrelay/store"
)

// Registry (spec §10). Each method is one statement, so one round trip and
// its own implicit transaction.

// CreateProject creates an empty project stream. Errors: store.ErrExists.
func (db *DB) CreateProject(ctx context.Context, id string) (store.Project, error) {
	var at time.Time
	if err := db.pool.QueryRow(ctx, insertProject, id).Scan(&at); err != nil {
		return store.Project{}, mapErr("create project", err)
	}
	return store.Project{ID: id, CreatedAt: utc(at)}, nil
}

// GetProject errors: store.ErrNotFound.
func (db *DB) GetProject(ctx context.Context, id string) (store.Project, error) {
	var p store.Project
	if err := db.pool.QueryRow(ctx, selectProject, id).Scan(&p.ID, &p.CreatedAt); err != nil {
		return store.Project{}, mapErr("get project", err)
	}
	p.CreatedAt = utc(p.CreatedAt)
	return p, nil
}

// CountProjects returns the number of projects.
func (db *DB) CountProjects(ctx context.Context) (int, error) {
	var n int
	if err := db.pool.QueryRow(ctx, countProjects).Scan(&n); err != nil {
		return 0, mapErr("count projects", err)
	}
	return n, nil
}

// CreateIdentity stores id; an empty Status means active. Errors:
// store.ErrNotFound (unknown project), store.ErrExists.
func (db *DB) CreateIdentity(ctx context.Context, id store.Identity) (store.Identity, error) {
	if id.Status == "" {
		id.Status = store.StatusActive
	}
	if id.Status != store.StatusActive && id.Status != store.StatusInactive {
		return store.Identity{}, fmt.Errorf("create identity: status %q is not active or inactive", id.Status)
	}
	var at time.Time
	if err := db.pool.QueryRow(ctx, insertIdentity, id.ID, id.ProjectID, id.DisplayName, id.Status).Scan(&at); err != nil {
		return store.Identity{}, mapErr("create identity", err)
	}
	id.CreatedAt = utc(at)
	return id, nil
}

// GetIdentity errors: store.ErrNotFound.
func (db *DB) GetIdentity(ctx context.Context, projectID, id string) (store.Identity, error) {
	i, err := scanIdentity(db.pool.QueryRow(ctx, selectIdentity, projectID, id))
	return i, mapErr("get identity", err)
}

// DeactivateIdentity marks the identity inactive; its history stays.
// Errors: store.ErrNotFound.
func (db *DB) DeactivateIdentity(ctx context.Context, projectID, id string) (store.Identity, error) {
	i, err := scanIdentity(db.pool.QueryRow(ctx, deactivateIdentity, projectID, id))
	return i, mapErr("deactivate identity", err)
}

func scanIdentity(row pgx.Row) (store.Identity, error) {
	var i store.Identity
	if err := row.Scan(&i.ID, &i.ProjectID, &i.DisplayName, &i.Status, &i.CreatedAt); err != nil {
		return store.Identity{}, err
	}
	i.CreatedAt = utc(i.CreatedAt)
	return i, nil
}

// ActiveIdentityIDs pages active identity ids in ascending byte order
// (COLLATE "C"), strictly after afterID, at most limit.
func (db *DB) ActiveIdentityIDs(ctx context.Context, projectID, afterID string, limit int) ([]string, error) {
	rows, err := db.pool.Query(ctx, selectActiveIdentityIDs, projectID, afterID, limit)
	if err != nil {
		return nil, mapErr("active identity ids", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return ids, mapErr("active identity ids", err)
}

// ListIdentities pages the project's identities of every status in
// ascending byte order of id (COLLATE "C"), strictly after afterID, at
// most limit.
func (db *DB) ListIdentities(ctx context.Context, projectID, afterID string, limit int) ([]store.Identity, error) {
	rows, err := db.pool.Query(ctx, listIdentities, projectID, afterID, limit)
	if err != nil {
		return nil, mapErr("list identities", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.Identity, error) { return scanIdentity(row) })
	return out, mapErr("list identities", err)
}

// ListKeys pages the signing keys of every status of one identity in
// ascending byte order of id, strictly after afterID, at most limit.
func (db *DB) ListKeys(ctx context.Context, projectID, identityID, afterID string, limit int) ([]store.SigningKey, error) {
	rows, err := db.pool.Query(ctx, listKeys, projectID, identityID, afterID, limit)
	if err != nil {
		return nil, mapErr("list keys", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.SigningKey, error) { return scanKey(row) })
	return out, mapErr("list keys", err)
}

// ListTokens pages the project's tokens, revoked ones included, in
// ascending byte order of id, strictly after afterID, at most limit;
// Hash is left empty.
func (db *DB) ListTokens(ctx context.Context, projectID, afterID string, limit int) ([]store.Token, error) {
	rows, err := db.pool.Query(ctx, listTokens, projectID, afterID, limit)
	if err != nil {
		return nil, mapErr("list tokens", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.Token, error) {
		var t store.Token
		err := row.Scan(&t.ID, &t.ProjectID, &t.Scopes, &t.Revoked, &t.CreatedAt)
		t.CreatedAt = utc(t.CreatedAt)
		return t, err
	})
	return out, mapErr("list tokens", err)
}

// AddKey stores a signing key of an identity; an empty Status means active
// and an empty ProjectID means the identity's project. Errors:
// store.ErrNotFound (no such identity in that project), store.ErrExists.
func (db *DB) AddKey(ctx context.Context, k store.SigningKey) (store.SigningKey, error) {
	if k.Status == "" {
		k.Status = store.StatusActive
	}
	if k.Status != store.StatusActive && k.Status != store.StatusRevoked {
		return store.SigningKey{}, fmt.Errorf("add key: status %q is not active or revoked", k.Status)
	}
	var at time.Time
	err := db.pool.QueryRow(ctx, insertKey, k.ID, k.IdentityID, k.ProjectID, k.PublicKey, k.Status).Scan(&k.ProjectID, &at)
	if err != nil {
		return store.SigningKey{}, mapErr("add key", err)
	}
	k.CreatedAt = utc(at)
	return k, nil
}

// GetKey errors: store.ErrNotFound.
func (db *DB) GetKey(ctx context.Context, projectID, id string) (store.SigningKey, error) {
	k, err := scanKey(db.pool.QueryRow(ctx, selectKey, projectID, id))
	return k, mapErr("get key", err)
}

// RevokeKey marks the key revoked; events it signed stay. Errors:
// store.ErrNotFound.
func (db *DB) RevokeKey(ctx context.Context, projectID, id string) (store.SigningKey, error) {
	k, err := scanKey(db.pool.QueryRow(ctx, revokeKey, projectID, id))
	return k, mapErr("revoke key", err)
}

func scanKey(row pgx.Row) (store.SigningKey, error) {
	var k store.SigningKey
	if err := row.Scan(&k.ID, &k.IdentityID, &k.ProjectID, &k.PublicKey, &k.Status, &k.CreatedAt); err != nil {
		return store.SigningKey{}, err
	}
	k.CreatedAt = utc(k.CreatedAt)
	return k, nil
}

// CreateToken stores a token's id, project, scopes (in the order given)
// and hash. Errors: store.ErrNotFound (unknown project), store.ErrExists.
func (db *DB) CreateToken(ctx context.Context, t store.Token) (store.Token, error) {
	scopes := append([]string{}, t.Scopes...) // '{}', never NULL
	var at time.Time
	if err := db.pool.QueryRow(ctx, insertToken, t.ID, t.ProjectID, scopes, t.Hash, t.Revoked).Scan(&at); err != nil {
		return store.Token{}, mapErr("create token", err)
	}
	t.CreatedAt = utc(at)
	return t, nil
}

// GetToken errors: store.ErrNotFound.
func (db *DB) GetToken(ctx context.Context, id string) (store.Token, error) {
	var t store.Token
	err := db.pool.QueryRow(ctx, selectToken, id).Scan(&t.ID, &t.ProjectID, &t.Scopes, &t.Hash, &t.Revoked, &t.CreatedAt)
	if err != nil {
		return store.Token{}, mapErr("get token", err)
	}
	t.CreatedAt = utc(t.CreatedAt)
	return t, nil
}

// RevokeToken marks the token revoked. Errors: store.ErrNotFound.
func (db *DB) RevokeToken(ctx context.Context, id string) error {
	tag, err := db.pool.Exec(ctx, revokeToken, id)
	if err != nil {
		return mapErr("revoke token", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("revoke token: %w", store.ErrNotFound)
	}
	return nil
}

// Setting returns a server-wide value. Errors: store.ErrNotFound.
func (db *DB) Setting(ctx context.Context, name string) (string, error) {
	var v string
	if err := db.pool.QueryRow(ctx, selectSetting, name).Scan(&v); err != nil {
		return "", mapErr("setting", err)
	}
	return v, nil
}

// PutSetting sets a server-wide value, replacing any earlier one.
func (db *DB) PutSetting(ctx context.Context, name, value string) error {
	_, err := db.pool.Exec(ctx, upsertSetting, name, value)
	return mapErr("put setting", err)
}
