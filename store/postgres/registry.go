package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/internal/shared"
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
	return db.registry().Project(ctx, id)
}

// CountProjects returns the number of projects.
func (db *DB) CountProjects(ctx context.Context) (int, error) {
	return db.registry().CountProjects(ctx)
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
	return db.registry().Identity(ctx, projectID, id)
}

// DeactivateIdentity marks the identity inactive; its history stays.
// Errors: store.ErrNotFound.
func (db *DB) DeactivateIdentity(ctx context.Context, projectID, id string) (store.Identity, error) {
	i, err := shared.ScanIdentity(db.pool.QueryRow(ctx, deactivateIdentity, projectID, id))
	return i, mapErr("deactivate identity", err)
}

// ActiveIdentityIDs pages active identity ids in ascending byte order,
// strictly after afterID, at most limit.
func (db *DB) ActiveIdentityIDs(ctx context.Context, projectID, afterID string, limit int) ([]string, error) {
	return db.registry().ActiveIdentityIDs(ctx, projectID, afterID, limit)
}

// ListIdentities pages the project's identities of every status in
// ascending byte order of id, strictly after afterID, at most limit.
func (db *DB) ListIdentities(ctx context.Context, projectID, afterID string, limit int) ([]store.Identity, error) {
	return db.registry().Identities(ctx, projectID, afterID, limit)
}

// ListKeys pages the signing keys of every status of one identity in
// ascending byte order of id, strictly after afterID, at most limit.
func (db *DB) ListKeys(ctx context.Context, projectID, identityID, afterID string, limit int) ([]store.SigningKey, error) {
	return db.registry().Keys(ctx, projectID, identityID, afterID, limit)
}

// ListTokens pages the project's tokens, revoked ones included, in
// ascending byte order of id, strictly after afterID, at most limit;
// Hash is left empty.
func (db *DB) ListTokens(ctx context.Context, projectID, afterID string, limit int) ([]store.Token, error) {
	return db.registry().Tokens(ctx, projectID, afterID, limit)
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
	return db.registry().Key(ctx, projectID, id)
}

// RevokeKey marks the key revoked; events it signed stay. Errors:
// store.ErrNotFound.
func (db *DB) RevokeKey(ctx context.Context, projectID, id string) (store.SigningKey, error) {
	k, err := shared.ScanKey(db.pool.QueryRow(ctx, revokeKey, projectID, id))
	return k, mapErr("revoke key", err)
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
	return db.registry().Token(ctx, id)
}

// RevokeToken marks the token revoked. Errors: store.ErrNotFound.
func (db *DB) RevokeToken(ctx context.Context, id string) error {
	return db.registry().RevokeToken(ctx, id)
}

// Setting returns a server-wide value. Errors: store.ErrNotFound.
func (db *DB) Setting(ctx context.Context, name string) (string, error) {
	return db.registry().Setting(ctx, name)
}

// PutSetting sets a server-wide value, replacing any earlier one.
func (db *DB) PutSetting(ctx context.Context, name, value string) error {
	return db.registry().PutSetting(ctx, name, value)
}

var registrySQL = shared.RegistrySQL{
	Project: selectProject, CountProjects: countProjects,
	Identity: selectIdentity, ActiveIdentityIDs: selectActiveIdentityIDs, Identities: listIdentities,
	Key: selectKey, Keys: listKeys,
	Token: selectToken, Tokens: listTokens, RevokeToken: revokeToken,
	Setting: selectSetting, PutSetting: upsertSetting,
	// text[] scans into a []string as it is.
	Scopes: func(out *[]string) (any, func() error) { return out, func() error { return nil } },
}

func (db *DB) registry() shared.Registry {
	return shared.Registry{Engine: db.engine(), SQL: &registrySQL}
}
