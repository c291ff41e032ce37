package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/acrelay/acrelay/store"
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
		SELECT peer_id, ?, project_id, ?, ?, ?, ?, ?, 1, ` + nowMS + `, ` + nowMS + `
		FROM federation_peers WHERE project_id = ? AND peer_id = ?
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
	selectPending   = refusalColumns + ` WHERE peer_id = ? AND final = 0 AND remote_seq > ? AND project_id = ? ORDER BY remote_seq LIMIT ?`
	countRefusals   = `SELECT reason, final, count(*) FROM federation_refusals WHERE ? = '' OR (project_id = ? AND peer_id = ?) GROUP BY reason, final ORDER BY reason, final`
	selectLatestRef = refusalColumns + ` WHERE ? = '' OR (project_id = ? AND peer_id = ?) ORDER BY refused_at DESC, remote_seq DESC LIMIT 1`
)

func scanRefusal(row rowScanner) (store.Refusal, error) {
	var r store.Refusal
	var final int
	var remoteAt sql.NullString
	var first, last string
	if err := row.Scan(&r.ProjectID, &r.PeerID, &r.ReceivedSeq, &r.EventID, &r.Reason, &final, &r.Record, &remoteAt,
		&r.Attempts, &first, &last); err != nil {
		return store.Refusal{}, err
	}
	r.Final = final != 0
	r.RemoteReceivedAt, r.FirstRefusedAt, r.RefusedAt = parseNullTime(remoteAt), parseTime(first), parseTime(last)
	return r, nil
}

// SaveRefusal records a refused foreign record (store.Refusals).
func (db *DB) SaveRefusal(ctx context.Context, r store.Refusal) error {
	if r.ProjectID == "" || r.PeerID == "" || r.Reason == "" {
		return fmt.Errorf("save refusal: project, peer and reason are required")
	}
	final := 0
	record := r.Record
	if r.Final {
		final, record = 1, nil
	}
	res, err := db.w.ExecContext(ctx, upsertRefusal, r.ReceivedSeq, r.EventID, r.Reason, final, record,
		nullTime(r.RemoteReceivedAt), r.ProjectID, r.PeerID)
	if err != nil {
		return mapErr("save refusal", err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return fmt.Errorf("save refusal: %w", store.ErrNotFound)
	}
	return nil
}

// DeleteRefusal forgets a refusal (store.Refusals).
func (db *DB) DeleteRefusal(ctx context.Context, projectID, peerID string, seq int64) error {
	_, err := db.w.ExecContext(ctx, deleteRefusal, projectID, peerID, seq)
	return mapErr("delete refusal", err)
}

// PendingRefusals lists refusals that may pass (store.Refusals).
func (db *DB) PendingRefusals(ctx context.Context, projectID, peerID string, afterSeq int64, limit int) ([]store.Refusal, error) {
	return listRows(ctx, db, "pending refusals", scanRefusal, selectPending, peerID, afterSeq, projectID, min(max(limit, 1), 200))
}

// SummarizeRefusals counts refusals (store.Refusals).
func (db *DB) SummarizeRefusals(ctx context.Context, projectID, peerID string) (store.RefusalSummary, error) {
	counts, err := listRows(ctx, db, "summarize refusals", func(row rowScanner) (store.RefusalCount, error) {
		var c store.RefusalCount
		var final int
		err := row.Scan(&c.Reason, &final, &c.Count)
		c.Final = final != 0
		return c, err
	}, countRefusals, peerID, projectID, peerID)
	if err != nil {
		return store.RefusalSummary{}, err
	}
	sum := store.RefusalSummary{Counts: counts}
	if len(counts) > 0 {
		latest, err := scanRefusal(db.rd.QueryRowContext(ctx, selectLatestRef, peerID, projectID, peerID))
		if err != nil {
			return store.RefusalSummary{}, mapErr("summarize refusals", err)
		}
		latest.Record = nil
		sum.Latest = &latest
	}
	return sum, nil
}
