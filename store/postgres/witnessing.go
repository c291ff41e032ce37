package postgres

import (
	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/internal/shared"
)

// Witnessing (store.Cosignatures, store.LogWitnesses): the relay's
// witness key, cosignatures on its checkpoints, each peer link's witness
// state and the split-view evidence (migration 0017); external
// witnesses' states per project and the logs this relay witnesses
// (migration 0019). The logic is shared.Witnessing's; this file is the
// SQL.

var (
	_ store.Cosignatures = (*DB)(nil)
	_ store.LogWitnesses = (*DB)(nil)
)

const (
	selectWitnessKey = `SELECT skey FROM witness_key WHERE id = 1`
	insertWitnessKey = `INSERT INTO witness_key (id, skey, created_at) VALUES (1, $1, ` + nowMS + `) ON CONFLICT (id) DO NOTHING`

	upsertCosignature = `INSERT INTO log_cosignatures (project_id, key_name, tree_size, root, body, line, signed_at, stored_at)
		SELECT id, $2, $3, $4, $5, $6, $7, $8 FROM projects WHERE id = $1
		ON CONFLICT (project_id, key_name) DO UPDATE SET tree_size = excluded.tree_size, root = excluded.root, body = excluded.body,
			line = excluded.line, signed_at = excluded.signed_at, stored_at = excluded.stored_at
		WHERE excluded.tree_size >= log_cosignatures.tree_size`
	selectCosignatures = `SELECT project_id, key_name, tree_size, root, body, line, signed_at, stored_at
		FROM log_cosignatures WHERE project_id = $1 ORDER BY key_name`
	selectProjectOne = `SELECT 1 FROM projects WHERE id = $1`

	witnessColumns     = `project_id, peer_id, log_key, witness_key, tree_size, root, checkpoint, cosigned_at`
	selectWitnessState = `SELECT ` + witnessColumns + ` FROM witness_states WHERE peer_id = $2 AND project_id = $1`
	insertWitnessState = `INSERT INTO witness_states (` + witnessColumns + `)
		SELECT project_id, peer_id, $3, $4, $5, $6, $7, $8 FROM federation_peers WHERE peer_id = $2 AND project_id = $1
		ON CONFLICT (peer_id) DO UPDATE SET log_key = excluded.log_key, witness_key = excluded.witness_key, tree_size = excluded.tree_size,
			root = excluded.root, checkpoint = excluded.checkpoint, cosigned_at = excluded.cosigned_at
		WHERE witness_states.tree_size = 0`
	updateWitnessState = `UPDATE witness_states SET log_key = $3, witness_key = $4, tree_size = $5, root = $6, checkpoint = $7, cosigned_at = $8
		WHERE peer_id = $2 AND project_id = $1 AND tree_size = $9`
	selectPeerExists  = `SELECT 1 FROM federation_peers WHERE peer_id = $2 AND project_id = $1`
	selectWitnessKeys = `SELECT peer_id, witness_key FROM witness_states WHERE project_id = $1 AND witness_key <> '' ORDER BY peer_id`
	insertSplitView   = `INSERT INTO witness_split_views (project_id, peer_id, kind, origin, cosigned, seen, detected_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id,
		NOT EXISTS (SELECT 1 FROM federation_peers p WHERE p.peer_id = $2 AND p.project_id = $1)`
	selectSplitViews = `SELECT v.id, v.project_id, v.peer_id, v.kind, v.origin, v.cosigned, v.seen, v.detected_at,
		NOT EXISTS (SELECT 1 FROM federation_peers p WHERE p.peer_id = v.peer_id AND p.project_id = v.project_id)
		FROM witness_split_views v WHERE ($1 = '' OR v.project_id = $1) ORDER BY v.id`

	logWitnessColumns     = `project_id, witness, known_size, cosigned_size, cosigned_at, last_error, error_at, updated_at`
	selectLogWitnessState = `SELECT ` + logWitnessColumns + ` FROM log_witness_states WHERE ($1 = '' OR project_id = $1) ORDER BY project_id, witness`
	upsertLogWitnessState = `INSERT INTO log_witness_states (` + logWitnessColumns + `)
		SELECT id, $2, $3, $4, $5, $6, $7, $8 FROM projects WHERE id = $1
		ON CONFLICT (project_id, witness) DO UPDATE SET known_size = excluded.known_size, cosigned_size = excluded.cosigned_size,
			cosigned_at = excluded.cosigned_at, last_error = excluded.last_error, error_at = excluded.error_at, updated_at = excluded.updated_at`

	selectWitnessedLog = `SELECT origin, tree_size, root, checkpoint, updated_at FROM witnessed_logs WHERE origin = $1`
	insertWitnessedLog = `INSERT INTO witnessed_logs (origin, tree_size, root, checkpoint, updated_at) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (origin) DO NOTHING`
	updateWitnessedLog = `UPDATE witnessed_logs SET tree_size = $2, root = $3, checkpoint = $4, updated_at = $5 WHERE origin = $1 AND tree_size = $6`
)

var witnessingSQL = shared.WitnessingSQL{
	SelectWitnessKey: selectWitnessKey, InsertWitnessKey: insertWitnessKey,
	UpsertCosignature: upsertCosignature, Cosignatures: selectCosignatures, ProjectExists: selectProjectOne,
	WitnessState: selectWitnessState, InsertWitnessState: insertWitnessState, UpdateWitnessState: updateWitnessState,
	PeerExists: selectPeerExists, PeerWitnessKeys: selectWitnessKeys, InsertSplitView: insertSplitView, SplitViews: selectSplitViews,
	LogWitnessStates: selectLogWitnessState, UpsertLogWitnessState: upsertLogWitnessState,
	WitnessedLog: selectWitnessedLog, InsertWitnessedLog: insertWitnessedLog, UpdateWitnessedLog: updateWitnessedLog,
}
