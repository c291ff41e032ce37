package shared

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/acrelay/acrelay/store"
)

// FederationSQL is one dialect's statements for the registry export and
// import and the peer links of store.Federation (the foreign appends are
// the dialects' append path).
type FederationSQL struct {
	// RegistryKeys (project, after key id, limit) → key id, identity id,
	// public key, status, created_at, revoked_at, source, display name,
	// identity status, identity created_at, deactivated_at, identity source.
	RegistryKeys string
	// ImportIdentity (project, identity) → status, source.
	ImportIdentity string
	// InsertImportIdentity (id, project, display name, status, created_at,
	// deactivated_at, source).
	InsertImportIdentity string
	// DeactivateImportIdentity (deactivated_at, project, id) deactivates
	// an active imported identity.
	DeactivateImportIdentity string
	// ImportKey (project, key) → identity id, public key.
	ImportKey string
	// InsertImportKey (id, identity, project, public key, status,
	// created_at, revoked_at, source).
	InsertImportKey string
	// RevokeImportKey (revoked_at, project, key) revokes an imported key
	// or moves an imported revocation earlier.
	RevokeImportKey string
	// Peer (project, peer), Peers (project), AllPeers → peer rows (peer,
	// project, remote url, token, repository, created_at); DeletePeer
	// (project, peer).
	Peer, Peers, AllPeers, DeletePeer string
}

// Federation is the dialect-independent part of store.Federation.
type Federation struct {
	Engine
	SQL *FederationSQL
}

// RegistryKeys pages the project's keys with their identities. Errors:
// store.ErrUnavailable.
func (f Federation) RegistryKeys(ctx context.Context, projectID, afterKeyID string, limit int) ([]store.RegistryKey, error) {
	return List(ctx, f.Engine, "registry keys", func(row Row) (store.RegistryKey, error) {
		var k store.RegistryKey
		var created, revoked, idCreated, deactivated Time
		if err := row.Scan(&k.SigningKeyID, &k.IdentityID, &k.PublicKey, &k.Status, &created, &revoked, &k.Source,
			&k.DisplayName, &k.IdentityStatus, &idCreated, &deactivated, &k.IdentitySource); err != nil {
			return store.RegistryKey{}, err
		}
		k.CreatedAt, k.RevokedAt = created.T, revoked.T
		k.IdentityCreatedAt, k.DeactivatedAt = idCreated.T, deactivated.T
		return k, nil
	}, f.SQL.RegistryKeys, projectID, afterKeyID, limit)
}

// CheckImport refuses an import from the local source or with a status
// that is not a key's or an identity's.
func CheckImport(source string, k store.RegistryKey) error {
	if source == store.SourceLocal {
		return errors.New("import key: empty source")
	}
	if (k.Status != store.StatusActive && k.Status != store.StatusRevoked) ||
		(k.IdentityStatus != store.StatusActive && k.IdentityStatus != store.StatusInactive) {
		return fmt.Errorf("import key %s: bad status", k.SigningKeyID)
	}
	return nil
}

// ImportKey brings one remote key into the project in tx, once the
// dialect has checked (and locked) the project: the identity is created
// once and only ever deactivated, the key is created once and only ever
// revoked or its revocation moved earlier. It reports whether a row
// changed. Errors: store.ErrKeyConflict (the key id is taken by another
// identity or public key), the driver's.
func (f Federation) ImportKey(ctx context.Context, tx Querier, projectID, source string, k store.RegistryKey) (bool, error) {
	changed := false
	var idStatus, idSource string
	err := tx.QueryRow(ctx, f.SQL.ImportIdentity, projectID, k.IdentityID).Scan(&idStatus, &idSource)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		if _, err := tx.Exec(ctx, f.SQL.InsertImportIdentity, k.IdentityID, projectID, k.DisplayName, k.IdentityStatus,
			f.TimeArg(k.IdentityCreatedAt), f.NullTimeArg(k.DeactivatedAt), source); err != nil {
			return false, err
		}
		changed = true
	case err != nil:
		return false, err
	case k.IdentityStatus == store.StatusInactive && !k.DeactivatedAt.IsZero():
		n, err := tx.Exec(ctx, f.SQL.DeactivateImportIdentity, f.TimeArg(k.DeactivatedAt), projectID, k.IdentityID)
		if err != nil {
			return false, err
		}
		changed = changed || n > 0
	}
	var identityID, pub string
	err = tx.QueryRow(ctx, f.SQL.ImportKey, projectID, k.SigningKeyID).Scan(&identityID, &pub)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		if _, err := tx.Exec(ctx, f.SQL.InsertImportKey, k.SigningKeyID, k.IdentityID, projectID, k.PublicKey, k.Status,
			f.TimeArg(k.CreatedAt), f.NullTimeArg(k.RevokedAt), source); err != nil {
			return false, err
		}
		return true, nil
	case err != nil:
		return false, err
	}
	if identityID != k.IdentityID || pub != k.PublicKey {
		return false, store.ErrKeyConflict
	}
	if k.Status == store.StatusRevoked && !k.RevokedAt.IsZero() {
		n, err := tx.Exec(ctx, f.SQL.RevokeImportKey, f.TimeArg(k.RevokedAt), projectID, k.SigningKeyID)
		if err != nil {
			return false, err
		}
		changed = changed || n > 0
	}
	return changed, nil
}

// Peers lists the project's links, or every link when projectID is
// empty. Errors: store.ErrUnavailable.
func (f Federation) Peers(ctx context.Context, projectID string) ([]store.Peer, error) {
	if projectID == "" {
		return List(ctx, f.Engine, "peers", scanPeer, f.SQL.AllPeers)
	}
	return List(ctx, f.Engine, "peers", scanPeer, f.SQL.Peers, projectID)
}

// Peer reads one link. Errors: store.ErrNotFound, store.ErrUnavailable.
func (f Federation) Peer(ctx context.Context, projectID, peerID string) (store.Peer, error) {
	p, err := scanPeer(f.Read.QueryRow(ctx, f.SQL.Peer, projectID, peerID))
	return p, f.MapErr("peer", err)
}

// RemovePeer deletes one link. Errors: store.ErrNotFound,
// store.ErrUnavailable.
func (f Federation) RemovePeer(ctx context.Context, projectID, peerID string) error {
	return f.execOne(ctx, "remove peer", f.SQL.DeletePeer, projectID, peerID)
}

func scanPeer(row Row) (store.Peer, error) {
	var p store.Peer
	var at Time
	if err := row.Scan(&p.ID, &p.ProjectID, &p.RemoteURL, &p.Token, &p.RepositoryID, &at); err != nil {
		return store.Peer{}, err
	}
	p.CreatedAt = at.T
	return p, nil
}
