package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/internal/shared"
)

// Federation (store.Federation): foreign appends under the key-at-time
// rule, the project-wide replay, the registry export and import, and peer
// links (migration 0011).

var _ store.Federation = (*DB)(nil)

const (
	// selectSenderAt reads the statuses and change times of the sender
	// identity and key; no row when the key is not a key of that identity.
	selectSenderAt = `SELECT i.status, i.deactivated_at, k.status, k.revoked_at FROM signing_keys k
		JOIN identities i ON i.project_id = k.project_id AND i.id = k.identity_id
		WHERE k.id = ? AND k.identity_id = ? AND k.project_id = ? AND i.project_id = ?`

	selectProjectRecordsAfter = recordColumns + `
		WHERE e.project_id = ? AND e.received_seq > ?
		ORDER BY e.received_seq LIMIT ?`

	selectRegistryKeys = `SELECT k.id, k.identity_id, k.public_key, k.status, k.created_at, k.revoked_at, k.source,
		i.display_name, i.status, i.created_at, i.deactivated_at, i.source
		FROM signing_keys k JOIN identities i ON i.project_id = k.project_id AND i.id = k.identity_id
		WHERE k.project_id = ? AND k.id > ? ORDER BY k.id LIMIT ?`

	selectImportIdentity = `SELECT status, source FROM identities WHERE project_id = ? AND id = ?`
	insertImportIdentity = `INSERT INTO identities (id, project_id, display_name, status, created_at, deactivated_at, source)
		VALUES (?, ?, ?, ?, ?, ?, ?)`
	deactivateImportIdentity = `UPDATE identities SET status = 'inactive', deactivated_at = ?
		WHERE project_id = ? AND id = ? AND status = 'active' AND source <> ''`
	selectImportKey = `SELECT identity_id, public_key FROM signing_keys WHERE project_id = ? AND id = ?`
	insertImportKey = `INSERT INTO signing_keys (id, identity_id, project_id, public_key, status, created_at, revoked_at, source)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`
	// revokeImportKey revokes an imported key, or moves an imported
	// revocation earlier.
	revokeImportKey = `UPDATE signing_keys SET status = 'revoked', revoked_at = ?1
		WHERE project_id = ?2 AND id = ?3 AND source <> '' AND (status = 'active' OR revoked_at IS NULL OR revoked_at > ?1)`

	insertPeer = `INSERT INTO federation_peers (peer_id, project_id, remote_url, token, repository_id, created_at)
		VALUES (?, ?, ?, ?, ?, ` + nowMS + `) RETURNING created_at`
	peerColumns   = `SELECT peer_id, project_id, remote_url, token, repository_id, created_at FROM federation_peers`
	selectPeer    = peerColumns + ` WHERE project_id = ? AND peer_id = ?`
	selectPeers   = peerColumns + ` WHERE project_id = ? ORDER BY project_id, peer_id`
	selectAllPeer = peerColumns + ` ORDER BY project_id, peer_id`
	deletePeer    = `DELETE FROM federation_peers WHERE project_id = ? AND peer_id = ?`
)

// AppendAt is Append under the key-at-time rule (store.Federation).
func (db *DB) AppendAt(ctx context.Context, ev *correspondence.Event, canonical []byte, at time.Time) (store.AppendResult, error) {
	if at.IsZero() {
		return store.AppendResult{}, errors.New("append at: zero time")
	}
	if ev == nil || ev.ID == "" {
		return store.AppendResult{}, errors.New("append: event without an id")
	}
	in, err := newAppendInput(ev, canonical)
	if err != nil {
		return store.AppendResult{}, err
	}
	in.activeAt = at.UTC()
	var res store.AppendResult
	err = db.submit(ctx, "append", func(t *txn) error {
		var err error
		res, err = appendTx(t, in)
		return err
	})
	if err != nil {
		return store.AppendResult{}, err
	}
	if res.Created {
		db.advances.Publish(ev.ProjectID, res.Record.ReceivedSeq)
	}
	return res, nil
}

// AppendPageAt appends a page of foreign records in order in one group
// commit (store.Federation).
func (db *DB) AppendPageAt(ctx context.Context, page []store.ForeignAppend) []store.AppendOutcome {
	out := make([]store.AppendOutcome, len(page))
	// res is written by the writer goroutine; a job's entry is read only
	// once that job answered success (the answer happens after the write),
	// so a caller whose context ended never races a job still running.
	res := make([]store.AppendResult, len(page))
	runs := make([]func(t *txn) error, 0, len(page))
	idx := make([]int, 0, len(page))
	for i, f := range page {
		switch {
		case f.At.IsZero():
			out[i].Err = errors.New("append at: zero time")
			continue
		case f.Event == nil || f.Event.ID == "":
			out[i].Err = errors.New("append: event without an id")
			continue
		}
		in, err := newAppendInput(f.Event, f.Canonical)
		if err != nil {
			out[i].Err = err
			continue
		}
		in.activeAt = f.At.UTC()
		r := &res[i]
		runs = append(runs, func(t *txn) error {
			var err error
			*r, err = appendTx(t, in)
			return err
		})
		idx = append(idx, i)
	}
	errs := db.submitGroup(ctx, "append", runs)
	var last int64
	var projectID string
	for k, i := range idx {
		if errs[k] != nil {
			out[i] = store.AppendOutcome{Err: errs[k]}
			continue
		}
		out[i].Result = res[i]
		if out[i].Result.Created && out[i].Result.Record.ReceivedSeq > last {
			last, projectID = out[i].Result.Record.ReceivedSeq, page[i].Event.ProjectID
		}
	}
	if last > 0 {
		db.advances.Publish(projectID, last)
	}
	return out
}

// senderActiveAt reports whether the sender identity and key were active
// at at: active now, or stopped strictly after at. sql.ErrNoRows when the
// key is not a key of that identity in the project.
func senderActiveAt(t *txn, ev *correspondence.Event, at time.Time) (bool, error) {
	var idStatus, keyStatus string
	var deactivated, revoked sql.NullString
	err := t.queryRow(selectSenderAt, ev.Sender.SigningKeyID, ev.Sender.IdentityID, ev.ProjectID, ev.ProjectID).
		Scan(&idStatus, &deactivated, &keyStatus, &revoked)
	if err != nil {
		return false, err
	}
	return activeAt(idStatus == store.StatusActive, deactivated, at) && activeAt(keyStatus == store.StatusActive, revoked, at), nil
}

func activeAt(activeNow bool, stopped sql.NullString, at time.Time) bool {
	if activeNow {
		return true
	}
	end := parseNullTime(stopped)
	return !end.IsZero() && end.After(at)
}

// ProjectEvents reads a page of every repository's records
// (store.Federation).
func (db *DB) ProjectEvents(ctx context.Context, projectID string, after int64, limit int) (store.EventPage, error) {
	limit = min(max(limit, 1), 200)
	rows, err := db.rd.QueryContext(ctx, selectProjectRecordsAfter, projectID, after, limit+1)
	if err != nil {
		return store.EventPage{}, mapErr("project events", err)
	}
	defer rows.Close()
	var page store.EventPage
	for rows.Next() {
		if len(page.Records) == limit {
			page.HasMore = true
			break
		}
		rec, err := scanRecord(rows, projectID)
		if err != nil {
			return store.EventPage{}, mapErr("project events", err)
		}
		page.Records = append(page.Records, rec)
	}
	return page, mapErr("project events", rows.Err())
}

// RegistryKeys pages the project's keys with their identities
// (store.Federation).
func (db *DB) RegistryKeys(ctx context.Context, projectID, afterKeyID string, limit int) ([]store.RegistryKey, error) {
	return db.federation().RegistryKeys(ctx, projectID, afterKeyID, limit)
}

func formatTime(t time.Time) string { return t.UTC().Format(timeLayout) }

// ImportKey brings one remote key into the project (store.Federation).
func (db *DB) ImportKey(ctx context.Context, projectID, source string, k store.RegistryKey) (bool, error) {
	if err := shared.CheckImport(source, k); err != nil {
		return false, err
	}
	db.wmu.Lock()
	defer db.wmu.Unlock()
	changed := false
	err := db.writeTx(ctx, "import key", func(tx *sql.Tx) error {
		if err := mustExist(ctx, tx, projectExists, projectID); err != nil {
			return err
		}
		var err error
		changed, err = db.federation().ImportKey(ctx, qr(tx), projectID, source, k)
		return err
	})
	if changed {
		db.ws.forgetSenders() // the next append re-reads the sender's status
	}
	if errors.Is(err, store.ErrKeyConflict) {
		return false, fmt.Errorf("import key %s: %w", k.SigningKeyID, store.ErrKeyConflict)
	}
	return changed, err
}

// CreatePeer stores a peer link (store.Federation).
func (db *DB) CreatePeer(ctx context.Context, p store.Peer) (store.Peer, error) {
	var at string
	err := db.writeTx(ctx, "create peer", func(tx *sql.Tx) error {
		if err := mustExist(ctx, tx, projectExists, p.ProjectID); err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, insertPeer, p.ID, p.ProjectID, p.RemoteURL, p.Token, p.RepositoryID).Scan(&at)
	})
	if err != nil {
		return store.Peer{}, err
	}
	p.CreatedAt = parseTime(at)
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
