package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/internal/shared"
)

// Federation (store.Federation): foreign appends under the key-at-time
// rule, the project-wide replay, the registry export and import, and peer
// links (migration 0009).

var _ store.Federation = (*DB)(nil)

const (
	selectProjectRecordsAfter = recordColumns + `
		WHERE e.project_id = $1 AND e.received_seq > $2
		ORDER BY e.received_seq LIMIT $3`

	selectRegistryKeys = `SELECT k.id, k.identity_id, k.public_key, k.status, k.created_at, k.revoked_at, k.source,
		i.display_name, i.status, i.created_at, i.deactivated_at, i.source
		FROM signing_keys k JOIN identities i ON i.project_id = k.project_id AND i.id = k.identity_id
		WHERE k.project_id = $1 AND k.id > $2 ORDER BY k.id LIMIT $3`

	selectImportIdentity = `SELECT status, source FROM identities WHERE project_id = $1 AND id = $2 FOR UPDATE`
	insertImportIdentity = `INSERT INTO identities (id, project_id, display_name, status, created_at, deactivated_at, source)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`
	deactivateImportIdentity = `UPDATE identities SET status = 'inactive', deactivated_at = $1
		WHERE project_id = $2 AND id = $3 AND status = 'active' AND source <> ''`
	selectImportKey = `SELECT identity_id, public_key FROM signing_keys WHERE project_id = $1 AND id = $2 FOR UPDATE`
	insertImportKey = `INSERT INTO signing_keys (id, identity_id, project_id, public_key, status, created_at, revoked_at, source)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`
	revokeImportKey = `UPDATE signing_keys SET status = 'revoked', revoked_at = $1
		WHERE project_id = $2 AND id = $3 AND source <> '' AND (status = 'active' OR revoked_at IS NULL OR revoked_at > $1)`
	lockProjectRow = `SELECT 1 FROM projects WHERE id = $1 FOR SHARE`

	insertPeer = `INSERT INTO federation_peers (peer_id, project_id, remote_url, token, repository_id, created_at)
		SELECT $1, p.id, $3, $4, $5, ` + nowMS + ` FROM projects p WHERE p.id = $2
		RETURNING created_at`
	peerColumns   = `SELECT peer_id, project_id, remote_url, token, repository_id, created_at FROM federation_peers`
	selectPeer    = peerColumns + ` WHERE project_id = $1 AND peer_id = $2`
	selectPeers   = peerColumns + ` WHERE project_id = $1 ORDER BY project_id, peer_id`
	selectAllPeer = peerColumns + ` ORDER BY project_id, peer_id`
	deletePeer    = `DELETE FROM federation_peers WHERE project_id = $1 AND peer_id = $2`
)

// AppendAt is Append under the key-at-time rule (store.Federation).
func (db *DB) AppendAt(ctx context.Context, ev *correspondence.Event, canonical []byte, at time.Time) (store.AppendResult, error) {
	if at.IsZero() {
		return store.AppendResult{}, errors.New("append at: zero time")
	}
	if ev == nil || ev.ID == "" {
		return store.AppendResult{}, errors.New("append: event without an id")
	}
	in := appendInput{ev: ev, canonical: bytes.Clone(canonical), paths: append([]string{}, ev.Scope.Paths...), activeAt: at.UTC()}
	in.node, in.isClaim = correspondence.NodeOf(ev)
	res, err := db.submitAppend(ctx, in)
	if err == nil && res.Created {
		db.advances.Publish(ev.ProjectID, res.Record.ReceivedSeq)
	}
	return res, err
}

// AppendPageAt appends a page of foreign records in order in one group
// commit (store.Federation).
func (db *DB) AppendPageAt(ctx context.Context, page []store.ForeignAppend) []store.AppendOutcome {
	out := make([]store.AppendOutcome, len(page))
	ins := make([]appendInput, 0, len(page))
	idx := make([]int, 0, len(page))
	projectID := ""
	for i, f := range page {
		switch {
		case f.At.IsZero():
			out[i].Err = errors.New("append at: zero time")
			continue
		case f.Event == nil || f.Event.ID == "":
			out[i].Err = errors.New("append: event without an id")
			continue
		case projectID != "" && f.Event.ProjectID != projectID:
			out[i].Err = errors.New("append page: records of two projects")
			continue
		}
		projectID = f.Event.ProjectID
		in := appendInput{ev: f.Event, canonical: bytes.Clone(f.Canonical), paths: append([]string{}, f.Event.Scope.Paths...), activeAt: f.At.UTC()}
		in.node, in.isClaim = correspondence.NodeOf(f.Event)
		ins = append(ins, in)
		idx = append(idx, i)
	}
	res, errs := db.submitAppends(ctx, projectID, ins)
	var last int64
	for k, i := range idx {
		out[i] = store.AppendOutcome{Result: res[k], Err: errs[k]}
		if errs[k] == nil && res[k].Created {
			last = max(last, res[k].Record.ReceivedSeq)
		}
	}
	if last > 0 {
		db.advances.Publish(projectID, last)
	}
	return out
}

// senderActive decides the sender check of an append: both active now,
// or, for a foreign record (activeAt set), each active now or stopped
// strictly after activeAt.
func senderActive(activeAt time.Time, idStatus, keyStatus *string, deactivatedAt, revokedAt *time.Time) bool {
	if idStatus == nil || keyStatus == nil {
		return false
	}
	ok := func(activeNow bool, stopped *time.Time) bool {
		if activeNow {
			return true
		}
		return !activeAt.IsZero() && stopped != nil && stopped.After(activeAt)
	}
	return ok(*idStatus == store.StatusActive, deactivatedAt) && ok(*keyStatus == store.StatusActive, revokedAt)
}

// ProjectEvents reads a page of every repository's records
// (store.Federation).
func (db *DB) ProjectEvents(ctx context.Context, projectID string, after int64, limit int) (store.EventPage, error) {
	limit = min(max(limit, 1), 200)
	rows, err := db.pool.Query(ctx, selectProjectRecordsAfter, projectID, after, limit+1)
	if err != nil {
		return store.EventPage{}, mapErr("project events", err)
	}
	recs, err := collectRecords(rows, projectID)
	if err != nil {
		return store.EventPage{}, mapErr("project events", err)
	}
	page := store.EventPage{Records: recs}
	if len(recs) > limit {
		page.Records, page.HasMore = recs[:limit], true
	}
	return page, nil
}

// RegistryKeys pages the project's keys with their identities
// (store.Federation).
func (db *DB) RegistryKeys(ctx context.Context, projectID, afterKeyID string, limit int) ([]store.RegistryKey, error) {
	return db.federation().RegistryKeys(ctx, projectID, afterKeyID, limit)
}

// ImportKey brings one remote key into the project (store.Federation).
func (db *DB) ImportKey(ctx context.Context, projectID, source string, k store.RegistryKey) (bool, error) {
	if err := shared.CheckImport(source, k); err != nil {
		return false, err
	}
	var changed bool
	err := db.inTx(ctx, "import key", readCommitted, func(tx pgx.Tx) error {
		var one int
		if err := tx.QueryRow(ctx, lockProjectRow, projectID).Scan(&one); err != nil {
			return err // no row: ErrNotFound
		}
		var err error
		changed, err = db.federation().ImportKey(ctx, qr(tx), projectID, source, k)
		return err
	})
	if errors.Is(err, store.ErrKeyConflict) {
		return false, fmt.Errorf("import key %s: %w", k.SigningKeyID, store.ErrKeyConflict)
	}
	if err != nil {
		return false, mapErr("import key", err)
	}
	return changed, nil
}

// CreatePeer stores a peer link (store.Federation).
func (db *DB) CreatePeer(ctx context.Context, p store.Peer) (store.Peer, error) {
	var at time.Time
	if err := db.pool.QueryRow(ctx, insertPeer, p.ID, p.ProjectID, p.RemoteURL, p.Token, p.RepositoryID).Scan(&at); err != nil {
		return store.Peer{}, mapErr("create peer", err)
	}
	p.CreatedAt = utc(at)
	return p, nil
}

// Peers lists links (store.Federation).
func (db *DB) Peers(ctx context.Context, projectID string) ([]store.Peer, error) {
	return db.federation().Peers(ctx, projectID)
}

// Peer reads one link (store.Federation).
func (db *DB) Peer(ctx context.Context, projectID, peerID string) (store.Peer, error) {
	return db.federation().Peer(ctx, projectID, peerID)
}

// RemovePeer deletes one link (store.Federation).
func (db *DB) RemovePeer(ctx context.Context, projectID, peerID string) error {
	return db.federation().RemovePeer(ctx, projectID, peerID)
}

var federationSQL = shared.FederationSQL{
	RegistryKeys:   selectRegistryKeys,
	ImportIdentity: selectImportIdentity, InsertImportIdentity: insertImportIdentity, DeactivateImportIdentity: deactivateImportIdentity,
	ImportKey: selectImportKey, InsertImportKey: insertImportKey, RevokeImportKey: revokeImportKey,
	Peer: selectPeer, Peers: selectPeers, AllPeers: selectAllPeer, DeletePeer: deletePeer,
}

func (db *DB) federation() shared.Federation {
	return shared.Federation{Engine: db.engine(), SQL: &federationSQL}
}
