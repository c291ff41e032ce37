package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acrelay/acrelay/store"
)

// Cosignatures (store.Cosignatures): the relay's witness key, peers'
// cosignatures on its checkpoints, each peer link's witness state and the
// split-view evidence (migration 0018).

var _ store.Cosignatures = (*DB)(nil)

const (
	selectWitnessKey = `SELECT skey FROM witness_key WHERE id = 1`
	insertWitnessKey = `INSERT INTO witness_key (id, skey, created_at) VALUES (1, $1, $2) ON CONFLICT (id) DO NOTHING`

	upsertCosignatureSQL = `INSERT INTO log_cosignatures (project_id, key_name, tree_size, root, body, line, signed_at, stored_at)
		SELECT id, $2, $3, $4, $5, $6, $7, $8 FROM projects WHERE id = $1
		ON CONFLICT (project_id, key_name) DO UPDATE SET tree_size = excluded.tree_size, root = excluded.root, body = excluded.body,
			line = excluded.line, signed_at = excluded.signed_at, stored_at = excluded.stored_at
		WHERE excluded.tree_size >= log_cosignatures.tree_size`
	selectCosignatures = `SELECT project_id, key_name, tree_size, root, body, line, signed_at, stored_at
		FROM log_cosignatures WHERE project_id = $1 ORDER BY key_name`

	witnessColumns     = `project_id, peer_id, log_key, witness_key, tree_size, root, checkpoint, cosigned_at`
	selectWitnessState = `SELECT ` + witnessColumns + ` FROM witness_states WHERE peer_id = $1 AND project_id = $2`
	insertWitnessState = `INSERT INTO witness_states (` + witnessColumns + `)
		SELECT project_id, peer_id, $3, $4, $5, $6, $7, $8 FROM federation_peers WHERE peer_id = $1 AND project_id = $2
		ON CONFLICT (peer_id) DO UPDATE SET log_key = excluded.log_key, witness_key = excluded.witness_key, tree_size = excluded.tree_size,
			root = excluded.root, checkpoint = excluded.checkpoint, cosigned_at = excluded.cosigned_at
		WHERE witness_states.tree_size = 0`
	updateWitnessState = `UPDATE witness_states SET log_key = $3, witness_key = $4, tree_size = $5, root = $6, checkpoint = $7, cosigned_at = $8
		WHERE peer_id = $1 AND project_id = $2 AND tree_size = $9`
	selectPeerExists   = `SELECT 1 FROM federation_peers WHERE peer_id = $1 AND project_id = $2`
	selectWitnessKeys  = `SELECT peer_id, witness_key FROM witness_states WHERE project_id = $1 AND witness_key <> '' ORDER BY peer_id`
	insertSplitViewSQL = `INSERT INTO witness_split_views (project_id, peer_id, kind, origin, cosigned, seen, detected_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id,
		NOT EXISTS (SELECT 1 FROM federation_peers p WHERE p.peer_id = $2 AND p.project_id = $1)`
	selectSplitViews = `SELECT v.id, v.project_id, v.peer_id, v.kind, v.origin, v.cosigned, v.seen, v.detected_at,
		NOT EXISTS (SELECT 1 FROM federation_peers p WHERE p.peer_id = v.peer_id AND p.project_id = v.project_id)
		FROM witness_split_views v WHERE ($1 = '' OR v.project_id = $1) ORDER BY v.id`
)

// WitnessKey returns the relay's witness signer key, creating it once
// (store.Cosignatures).
func (db *DB) WitnessKey(ctx context.Context, create func() (string, error)) (string, error) {
	var skey string
	err := db.pool.QueryRow(ctx, selectWitnessKey).Scan(&skey)
	if err == nil {
		return skey, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return "", mapErr("witness key", err)
	}
	skey, err = create()
	if err != nil {
		return "", fmt.Errorf("witness key: %w", err)
	}
	if _, err := db.pool.Exec(ctx, insertWitnessKey, skey, time.Now().UTC().Truncate(time.Millisecond)); err != nil {
		return "", mapErr("witness key", err)
	}
	if err := db.pool.QueryRow(ctx, selectWitnessKey).Scan(&skey); err != nil {
		return "", mapErr("witness key", err)
	}
	return skey, nil
}

// SaveCosignature keeps the latest cosignature of a witness key on a
// project's checkpoints (store.Cosignatures).
func (db *DB) SaveCosignature(ctx context.Context, c store.Cosignature) (bool, error) {
	tag, err := db.pool.Exec(ctx, upsertCosignatureSQL, c.ProjectID, c.KeyName, c.Size, c.Root[:], c.Body, c.Line,
		c.SignedAt.UTC(), time.Now().UTC().Truncate(time.Millisecond))
	if err != nil {
		return false, mapErr("save cosignature", err)
	}
	if tag.RowsAffected() == 1 {
		return true, nil
	}
	if _, err := db.GetProject(ctx, c.ProjectID); err != nil {
		return false, fmt.Errorf("save cosignature: %w", err)
	}
	return false, nil
}

// Cosignatures lists a project's held cosignatures (store.Cosignatures).
func (db *DB) Cosignatures(ctx context.Context, projectID string) ([]store.Cosignature, error) {
	rows, err := db.pool.Query(ctx, selectCosignatures, projectID)
	if err != nil {
		return nil, mapErr("cosignatures", err)
	}
	defer rows.Close()
	var out []store.Cosignature
	for rows.Next() {
		var c store.Cosignature
		var root []byte
		if err := rows.Scan(&c.ProjectID, &c.KeyName, &c.Size, &root, &c.Body, &c.Line, &c.SignedAt, &c.StoredAt); err != nil {
			return nil, mapErr("cosignatures", err)
		}
		copy(c.Root[:], root)
		c.SignedAt, c.StoredAt = utc(c.SignedAt), utc(c.StoredAt)
		out = append(out, c)
	}
	return out, mapErr("cosignatures", rows.Err())
}

// WitnessState reads a peer link's witness state (store.Cosignatures).
func (db *DB) WitnessState(ctx context.Context, projectID, peerID string) (store.WitnessState, error) {
	var w store.WitnessState
	var root []byte
	err := db.pool.QueryRow(ctx, selectWitnessState, peerID, projectID).Scan(&w.ProjectID, &w.PeerID, &w.LogKey, &w.WitnessKey,
		&w.Size, &root, &w.Checkpoint, &w.CosignedAt)
	if err != nil {
		return store.WitnessState{}, mapErr("witness state", err)
	}
	copy(w.Root[:], root)
	w.CosignedAt = utc(w.CosignedAt)
	return w, nil
}

// SaveWitnessState stores a peer link's witness state while the stored
// size is oldSize (store.Cosignatures).
func (db *DB) SaveWitnessState(ctx context.Context, w store.WitnessState, oldSize int64) (bool, error) {
	args := []any{w.PeerID, w.ProjectID, w.LogKey, w.WitnessKey, w.Size, w.Root[:], w.Checkpoint, w.CosignedAt.UTC().Truncate(time.Millisecond)}
	q := insertWitnessState
	if oldSize != 0 {
		q, args = updateWitnessState, append(args, oldSize)
	}
	tag, err := db.pool.Exec(ctx, q, args...)
	if err != nil {
		return false, mapErr("save witness state", err)
	}
	if tag.RowsAffected() == 1 {
		return true, nil
	}
	var one int
	if err := db.pool.QueryRow(ctx, selectPeerExists, w.PeerID, w.ProjectID).Scan(&one); err != nil {
		return false, mapErr("save witness state", err)
	}
	return false, nil
}

// PeerWitnessKeys lists the witness keys a project's links learnt
// (store.Cosignatures).
func (db *DB) PeerWitnessKeys(ctx context.Context, projectID string) (map[string]string, error) {
	rows, err := db.pool.Query(ctx, selectWitnessKeys, projectID)
	if err != nil {
		return nil, mapErr("peer witness keys", err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var peer, key string
		if err := rows.Scan(&peer, &key); err != nil {
			return nil, mapErr("peer witness keys", err)
		}
		out[peer] = key
	}
	return out, mapErr("peer witness keys", rows.Err())
}

// SaveSplitView stores split-view evidence (store.Cosignatures).
func (db *DB) SaveSplitView(ctx context.Context, e store.SplitView) (store.SplitView, error) {
	e.DetectedAt = time.Now().UTC().Truncate(time.Millisecond)
	if err := db.pool.QueryRow(ctx, insertSplitViewSQL, e.ProjectID, e.PeerID, e.Kind, e.Origin, e.Cosigned, e.Seen,
		e.DetectedAt).Scan(&e.ID, &e.LinkRemoved); err != nil {
		return store.SplitView{}, mapErr("save split view", err)
	}
	return e, nil
}

// SplitViews lists split-view evidence (store.Cosignatures).
func (db *DB) SplitViews(ctx context.Context, projectID string) ([]store.SplitView, error) {
	rows, err := db.pool.Query(ctx, selectSplitViews, projectID)
	if err != nil {
		return nil, mapErr("split views", err)
	}
	defer rows.Close()
	var out []store.SplitView
	for rows.Next() {
		var e store.SplitView
		if err := rows.Scan(&e.ID, &e.ProjectID, &e.PeerID, &e.Kind, &e.Origin, &e.Cosigned, &e.Seen, &e.DetectedAt, &e.LinkRemoved); err != nil {
			return nil, mapErr("split views", err)
		}
		e.DetectedAt = utc(e.DetectedAt)
		out = append(out, e)
	}
	return out, mapErr("split views", rows.Err())
}
