package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/internal/shared"
)

// The registry (spec §10): projects, identities, signing keys, tokens and
// server-wide settings.

// CreateProject creates an empty project stream. Errors: store.ErrExists.
func (db *DB) CreateProject(ctx context.Context, id string) (store.Project, error) {
	var at string
	if err := db.w.QueryRowContext(ctx, insertProject, id).Scan(&at); err != nil {
		return store.Project{}, mapErr("create project", err)
	}
	return store.Project{ID: id, CreatedAt: parseTime(at)}, nil
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
	var at string
	err := db.writeTx(ctx, "create identity", func(tx *sql.Tx) error {
		if err := mustExist(ctx, tx, projectExists, id.ProjectID); err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, insertIdentity, id.ID, id.ProjectID, id.DisplayName, id.Status).Scan(&at)
	})
	if err != nil {
		return store.Identity{}, err
	}
	id.CreatedAt = parseTime(at)
	return id, nil
}

// GetIdentity errors: store.ErrNotFound.
func (db *DB) GetIdentity(ctx context.Context, projectID, id string) (store.Identity, error) {
	return db.registry().Identity(ctx, projectID, id)
}

// DeactivateIdentity marks the identity inactive; its history stays.
// Errors: store.ErrNotFound.
func (db *DB) DeactivateIdentity(ctx context.Context, projectID, id string) (store.Identity, error) {
	db.wmu.Lock()
	defer db.wmu.Unlock()
	i, err := shared.ScanIdentity(db.w.QueryRowContext(ctx, deactivateIdentity, projectID, id))
	db.ws.forgetSenders() // the next append re-reads the sender's status
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

// AddKey stores a signing key of the identity k.IdentityID in project
// k.ProjectID; an empty Status means active. Errors:
// store.ErrNotFound (no such identity in that project), store.ErrExists.
func (db *DB) AddKey(ctx context.Context, k store.SigningKey) (store.SigningKey, error) {
	if k.Status == "" {
		k.Status = store.StatusActive
	}
	if k.Status != store.StatusActive && k.Status != store.StatusRevoked {
		return store.SigningKey{}, fmt.Errorf("add key: status %q is not active or revoked", k.Status)
	}
	var at string
	err := db.writeTx(ctx, "add key", func(tx *sql.Tx) error {
		var one int
		if err := tx.QueryRowContext(ctx, `SELECT 1 FROM identities WHERE project_id = ? AND id = ?`, k.ProjectID, k.IdentityID).Scan(&one); err != nil {
			return err // sql.ErrNoRows → ErrNotFound: no such identity in the project
		}
		return tx.QueryRowContext(ctx, insertKey, k.ID, k.IdentityID, k.ProjectID, k.PublicKey, k.Status).Scan(&at)
	})
	if err != nil {
		return store.SigningKey{}, err
	}
	k.CreatedAt = parseTime(at)
	return k, nil
}

// GetKey errors: store.ErrNotFound.
func (db *DB) GetKey(ctx context.Context, projectID, id string) (store.SigningKey, error) {
	return db.registry().Key(ctx, projectID, id)
}

// RevokeKey marks the key revoked; events it signed stay. Errors:
// store.ErrNotFound.
func (db *DB) RevokeKey(ctx context.Context, projectID, id string) (store.SigningKey, error) {
	db.wmu.Lock()
	defer db.wmu.Unlock()
	k, err := shared.ScanKey(db.w.QueryRowContext(ctx, revokeKey, projectID, id))
	db.ws.forgetSenders() // the next append re-reads the sender's status
	return k, mapErr("revoke key", err)
}

// CreateToken stores a token's id, project, scopes (in the order given)
// and hash. Errors: store.ErrNotFound (unknown project), store.ErrExists.
func (db *DB) CreateToken(ctx context.Context, t store.Token) (store.Token, error) {
	scopes, err := json.Marshal(append([]string{}, t.Scopes...))
	if err != nil {
		return store.Token{}, fmt.Errorf("create token: %w", err)
	}
	var at string
	err = db.writeTx(ctx, "create token", func(tx *sql.Tx) error {
		if err := mustExist(ctx, tx, projectExists, t.ProjectID); err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, insertToken, t.ID, t.ProjectID, string(scopes), t.Hash, t.Revoked).Scan(&at)
	})
	if err != nil {
		return store.Token{}, err
	}
	t.CreatedAt = parseTime(at)
	return t, nil
}

// GetToken reads a token by id, from a cache that RevokeToken invalidates
// before it returns (a revocation by another process on the same file
// within externalCheckInterval, 50 ms). Errors: store.ErrNotFound.
func (db *DB) GetToken(ctx context.Context, id string) (store.Token, error) {
	t, epoch, ok := db.tokens.get(id)
	if ok {
		return t, nil
	}
	t, err := db.registry().Token(ctx, id)
	if err != nil {
		return store.Token{}, err
	}
	db.tokens.put(id, t, epoch)
	return t, nil
}

// RevokeToken marks the token revoked. Errors: store.ErrNotFound.
func (db *DB) RevokeToken(ctx context.Context, id string) error {
	err := db.registry().RevokeToken(ctx, id)
	db.tokens.invalidate() // whatever the outcome: the row may have changed
	return err
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
	Scopes: scanScopes,
}

// scanScopes reads the scopes column, a JSON array of strings.
func scanScopes(out *[]string) (any, func() error) {
	var text string
	return &text, func() error {
		if err := json.Unmarshal([]byte(text), out); err != nil {
			return fmt.Errorf("scopes: %w", store.ErrUnavailable)
		}
		return nil
	}
}

func (db *DB) registry() shared.Registry {
	return shared.Registry{Engine: db.engine(), SQL: &registrySQL}
}
