package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/acrelay/acrelay/store"
)

// Cosignatures (store.Cosignatures): the relay's witness key, peers'
// cosignatures on its checkpoints, each peer link's witness state and the
// split-view evidence (migration 0020).

var _ store.Cosignatures = (*DB)(nil)

const (
	selectWitnessKey = `SELECT skey FROM witness_key WHERE id = 1`
	insertWitnessKey = `INSERT INTO witness_key (id, skey, created_at) VALUES (1, ?, ?) ON CONFLICT (id) DO NOTHING`

	upsertCosignatureSQL = `INSERT INTO log_cosignatures (project_id, key_name, tree_size, root, body, line, signed_at, stored_at)
		SELECT id, ?, ?, ?, ?, ?, ?, ? FROM projects WHERE id = ?
		ON CONFLICT (project_id, key_name) DO UPDATE SET tree_size = excluded.tree_size, root = excluded.root, body = excluded.body,
			line = excluded.line, signed_at = excluded.signed_at, stored_at = excluded.stored_at
		WHERE excluded.tree_size >= log_cosignatures.tree_size`
	selectCosignatures = `SELECT project_id, key_name, tree_size, root, body, line, signed_at, stored_at
		FROM log_cosignatures WHERE project_id = ? ORDER BY key_name`

	witnessColumns     = `project_id, peer_id, log_key, witness_key, tree_size, root, checkpoint, cosigned_at`
	selectWitnessState = `SELECT ` + witnessColumns + ` FROM witness_states WHERE peer_id = ? AND project_id = ?`
	insertWitnessState = `INSERT INTO witness_states (` + witnessColumns + `)
		SELECT project_id, peer_id, ?, ?, ?, ?, ?, ? FROM federation_peers WHERE peer_id = ? AND project_id = ?
		ON CONFLICT (peer_id) DO UPDATE SET log_key = excluded.log_key, witness_key = excluded.witness_key, tree_size = excluded.tree_size,
			root = excluded.root, checkpoint = excluded.checkpoint, cosigned_at = excluded.cosigned_at
		WHERE witness_states.tree_size = 0`
	updateWitnessState = `UPDATE witness_states SET log_key = ?, witness_key = ?, tree_size = ?, root = ?, checkpoint = ?, cosigned_at = ?
		WHERE peer_id = ? AND project_id = ? AND tree_size = ?`
	selectPeerExists   = `SELECT 1 FROM federation_peers WHERE peer_id = ? AND project_id = ?`
	selectWitnessKeys  = `SELECT peer_id, witness_key FROM witness_states WHERE project_id = ? AND witness_key != '' ORDER BY peer_id`
	insertSplitViewSQL = `INSERT INTO witness_split_views (project_id, peer_id, kind, origin, cosigned, seen, detected_at)
		VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id`
	selectSplitViews = `SELECT v.id, v.project_id, v.peer_id, v.kind, v.origin, v.cosigned, v.seen, v.detected_at,
		NOT EXISTS (SELECT 1 FROM federation_peers p WHERE p.peer_id = v.peer_id AND p.project_id = v.project_id)
		FROM witness_split_views v WHERE (? = '' OR v.project_id = ?) ORDER BY v.id`
)

// WitnessKey returns the relay's witness signer key, creating it once
// (store.Cosignatures).
func (db *DB) WitnessKey(ctx context.Context, create func() (string, error)) (string, error) {
	var skey string
	err := db.w.QueryRowContext(ctx, selectWitnessKey).Scan(&skey)
	if err == nil {
		return skey, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return "", mapErr("witness key", err)
	}
	skey, err = create()
	if err != nil {
		return "", fmt.Errorf("witness key: %w", err)
	}
	if _, err := db.w.ExecContext(ctx, insertWitnessKey, skey, formatTime(time.Now())); err != nil {
		return "", mapErr("witness key", err)
	}
	if err := db.w.QueryRowContext(ctx, selectWitnessKey).Scan(&skey); err != nil {
		return "", mapErr("witness key", err)
	}
	return skey, nil
}

// SaveCosignature keeps the latest cosignature of a witness key on a
// project's checkpoints (store.Cosignatures).
func (db *DB) SaveCosignature(ctx context.Context, c store.Cosignature) (bool, error) {
	r, err := db.w.ExecContext(ctx, upsertCosignatureSQL, c.KeyName, c.Size, c.Root[:], c.Body, c.Line,
		formatTime(c.SignedAt), formatTime(time.Now()), c.ProjectID)
	if err != nil {
		return false, mapErr("save cosignature", err)
	}
	if n, err := r.RowsAffected(); err != nil {
		return false, mapErr("save cosignature", err)
	} else if n == 1 {
		return true, nil
	}
	if _, err := db.GetProject(ctx, c.ProjectID); err != nil {
		return false, fmt.Errorf("save cosignature: %w", err)
	}
	return false, nil
}

// Cosignatures lists a project's held cosignatures (store.Cosignatures).
func (db *DB) Cosignatures(ctx context.Context, projectID string) ([]store.Cosignature, error) {
	return listRows(ctx, db, "cosignatures", func(row rowScanner) (store.Cosignature, error) {
		var c store.Cosignature
		var root []byte
		var signed, stored string
		if err := row.Scan(&c.ProjectID, &c.KeyName, &c.Size, &root, &c.Body, &c.Line, &signed, &stored); err != nil {
			return store.Cosignature{}, err
		}
		copy(c.Root[:], root)
		c.SignedAt, c.StoredAt = parseTime(signed), parseTime(stored)
		return c, nil
	}, selectCosignatures, projectID)
}

// WitnessState reads a peer link's witness state (store.Cosignatures).
func (db *DB) WitnessState(ctx context.Context, projectID, peerID string) (store.WitnessState, error) {
	var w store.WitnessState
	var root []byte
	var at string
	err := db.rd.QueryRowContext(ctx, selectWitnessState, peerID, projectID).Scan(&w.ProjectID, &w.PeerID, &w.LogKey, &w.WitnessKey,
		&w.Size, &root, &w.Checkpoint, &at)
	if err != nil {
		return store.WitnessState{}, mapErr("witness state", err)
	}
	copy(w.Root[:], root)
	w.CosignedAt = parseTime(at)
	return w, nil
}

// SaveWitnessState stores a peer link's witness state while the stored
// size is oldSize (store.Cosignatures).
func (db *DB) SaveWitnessState(ctx context.Context, w store.WitnessState, oldSize int64) (bool, error) {
	args := []any{w.LogKey, w.WitnessKey, w.Size, w.Root[:], w.Checkpoint, formatTime(w.CosignedAt), w.PeerID, w.ProjectID}
	q := insertWitnessState
	if oldSize != 0 {
		q, args = updateWitnessState, append(args, oldSize)
	}
	r, err := db.w.ExecContext(ctx, q, args...)
	if err != nil {
		return false, mapErr("save witness state", err)
	}
	if n, err := r.RowsAffected(); err != nil {
		return false, mapErr("save witness state", err)
	} else if n == 1 {
		return true, nil
	}
	var one int
	if err := db.rd.QueryRowContext(ctx, selectPeerExists, w.PeerID, w.ProjectID).Scan(&one); err != nil {
		return false, mapErr("save witness state", err)
	}
	return false, nil
}

// PeerWitnessKeys lists the witness keys a project's links learnt
// (store.Cosignatures).
func (db *DB) PeerWitnessKeys(ctx context.Context, projectID string) (map[string]string, error) {
	type kv struct{ peer, key string }
	rows, err := listRows(ctx, db, "peer witness keys", func(row rowScanner) (kv, error) {
		var v kv
		return v, row.Scan(&v.peer, &v.key)
	}, selectWitnessKeys, projectID)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(rows))
	for _, v := range rows {
		out[v.peer] = v.key
	}
	return out, nil
}

// SaveSplitView stores split-view evidence (store.Cosignatures).
func (db *DB) SaveSplitView(ctx context.Context, e store.SplitView) (store.SplitView, error) {
	e.DetectedAt = time.Now().UTC().Truncate(time.Millisecond)
	if err := db.w.QueryRowContext(ctx, insertSplitViewSQL, e.ProjectID, e.PeerID, e.Kind, e.Origin, e.Cosigned, e.Seen,
		formatTime(e.DetectedAt)).Scan(&e.ID); err != nil {
		return store.SplitView{}, mapErr("save split view", err)
	}
	var one int
	err := db.rd.QueryRowContext(ctx, selectPeerExists, e.PeerID, e.ProjectID).Scan(&one)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		e.LinkRemoved = true
	case err != nil:
		return store.SplitView{}, mapErr("save split view", err)
	}
	return e, nil
}

// SplitViews lists split-view evidence (store.Cosignatures).
func (db *DB) SplitViews(ctx context.Context, projectID string) ([]store.SplitView, error) {
	return listRows(ctx, db, "split views", func(row rowScanner) (store.SplitView, error) {
		var e store.SplitView
		var at string
		if err := row.Scan(&e.ID, &e.ProjectID, &e.PeerID, &e.Kind, &e.Origin, &e.Cosigned, &e.Seen, &at, &e.LinkRemoved); err != nil {
			return store.SplitView{}, err
		}
		e.DetectedAt = parseTime(at)
		return e, nil
	}, selectSplitViews, projectID, projectID)
}
