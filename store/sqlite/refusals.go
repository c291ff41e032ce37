package sqlite

import (
	"context"

	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/internal/shared"
)

// Refusals (store.Refusals): peer links' refused foreign records
// (migration 0012).

var _ store.Refusals = (*DB)(nil)

const (
	// upsertRefusal inserts a refusal for an existing link, or counts
	// one more on the record's row; a final row stays final, without
	// bytes.
	upsertRefusal = `INSERT INTO federation_refusals (peer_id, remote_seq, project_id, event_id, reason, final, record,
		remote_received_at, attempts, first_refused_at, refused_at)
		SELECT peer_id, ?3, project_id, ?4, ?5, ?6, ?7, ?8, 1, ` + nowMS + `, ` + nowMS + `
		FROM federation_peers WHERE project_id = ?1 AND peer_id = ?2
		ON CONFLICT (peer_id, remote_seq) DO UPDATE SET
			event_id = excluded.event_id,
			reason = CASE WHEN final = 1 THEN reason ELSE excluded.reason END,
			record = CASE WHEN final = 1 OR excluded.final = 1 THEN NULL ELSE excluded.record END,
			remote_received_at = excluded.remote_received_at,
			final = max(final, excluded.final),
			attempts = attempts + 1,
			refused_at = excluded.refused_at`
	deleteRefusal   = `DELETE FROM federation_refusals WHERE project_id = ? AND peer_id = ? AND remote_seq = ?`
	refusalColumns  = `SELECT project_id, peer_id, remote_seq, event_id, reason, final, record, remote_received_at, attempts, first_refused_at, refused_at FROM federation_refusals`
	selectPending   = refusalColumns + ` WHERE peer_id = ?2 AND final = 0 AND remote_seq > ?3 AND project_id = ?1 ORDER BY remote_seq LIMIT ?4`
	countRefusals   = `SELECT reason, final, count(*) FROM federation_refusals WHERE ?2 = '' OR (project_id = ?1 AND peer_id = ?2) GROUP BY reason, final ORDER BY reason, final`
	selectLatestRef = refusalColumns + ` WHERE ?2 = '' OR (project_id = ?1 AND peer_id = ?2) ORDER BY refused_at DESC, remote_seq DESC LIMIT 1`
)

var refusalSQL = shared.RefusalSQL{
	Upsert: upsertRefusal, Delete: deleteRefusal, Pending: selectPending, Count: countRefusals, Latest: selectLatestRef,
}

func (db *DB) refusals() shared.Refusals {
	return shared.Refusals{Engine: db.engine(), SQL: &refusalSQL}
}

// SaveRefusal records a refused foreign record (store.Refusals).
func (db *DB) SaveRefusal(ctx context.Context, r store.Refusal) error {
	return db.refusals().Save(ctx, r)
}

// DeleteRefusal forgets a refusal (store.Refusals).
func (db *DB) DeleteRefusal(ctx context.Context, projectID, peerID string, seq int64) error {
	return db.refusals().Delete(ctx, projectID, peerID, seq)
}

// PendingRefusals lists refusals that may pass (store.Refusals).
func (db *DB) PendingRefusals(ctx context.Context, projectID, peerID string, afterSeq int64, limit int) ([]store.Refusal, error) {
	return db.refusals().Pending(ctx, projectID, peerID, afterSeq, limit)
}

// SummarizeRefusals counts refusals (store.Refusals).
func (db *DB) SummarizeRefusals(ctx context.Context, projectID, peerID string) (store.RefusalSummary, error) {
	return db.refusals().Summarize(ctx, projectID, peerID)
}
