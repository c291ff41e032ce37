package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acrelay/acrelay/store"
)

// Refusals (store.Refusals): peer links' refused foreign records
// (migration 0010).

var _ store.Refusals = (*DB)(nil)

const (
	// upsertRefusal inserts a refusal for an existing link, or counts
	// one more on the record's row; a final row stays final, without
	// bytes.
	upsertRefusal = `INSERT INTO federation_refusals AS r (peer_id, remote_seq, project_id, event_id, reason, final, record,
		remote_received_at, attempts, first_refused_at, refused_at)
		SELECT peer_id, $3, project_id, $4, $5, $6, $7, $8, 1, ` + nowMS + `, ` + nowMS + `
		FROM federation_peers WHERE project_id = $1 AND peer_id = $2
		ON CONFLICT (peer_id, remote_seq) DO UPDATE SET
			event_id = excluded.event_id,
			reason = CASE WHEN r.final THEN r.reason ELSE excluded.reason END,
			record = CASE WHEN r.final OR excluded.final THEN NULL ELSE excluded.record END,
			remote_received_at = excluded.remote_received_at,
			final = r.final OR excluded.final,
			attempts = r.attempts + 1,
			refused_at = excluded.refused_at`
	deleteRefusal   = `DELETE FROM federation_refusals WHERE project_id = $1 AND peer_id = $2 AND remote_seq = $3`
	refusalColumns  = `SELECT project_id, peer_id, remote_seq, event_id, reason, final, record, remote_received_at, attempts, first_refused_at, refused_at FROM federation_refusals`
	selectPending   = refusalColumns + ` WHERE peer_id = $2 AND NOT final AND remote_seq > $3 AND project_id = $1 ORDER BY remote_seq LIMIT $4`
	countRefusals   = `SELECT reason, final, count(*) FROM federation_refusals WHERE $2 = '' OR (project_id = $1 AND peer_id = $2) GROUP BY reason, final ORDER BY reason, final`
	selectLatestRef = refusalColumns + ` WHERE $2 = '' OR (project_id = $1 AND peer_id = $2) ORDER BY refused_at DESC, remote_seq DESC LIMIT 1`
)

func scanRefusal(row pgx.Row) (store.Refusal, error) {
	var r store.Refusal
	var remoteAt *time.Time
	if err := row.Scan(&r.ProjectID, &r.PeerID, &r.ReceivedSeq, &r.EventID, &r.Reason, &r.Final, &r.Record, &remoteAt,
		&r.Attempts, &r.FirstRefusedAt, &r.RefusedAt); err != nil {
		return store.Refusal{}, err
	}
	if remoteAt != nil {
		r.RemoteReceivedAt = utc(*remoteAt)
	}
	r.FirstRefusedAt, r.RefusedAt = utc(r.FirstRefusedAt), utc(r.RefusedAt)
	return r, nil
}

// SaveRefusal records a refused foreign record (store.Refusals).
func (db *DB) SaveRefusal(ctx context.Context, r store.Refusal) error {
	if r.ProjectID == "" || r.PeerID == "" || r.Reason == "" {
		return errors.New("save refusal: project, peer and reason are required")
	}
	record := r.Record
	if r.Final {
		record = nil
	}
	var remoteAt *time.Time
	if !r.RemoteReceivedAt.IsZero() {
		t := r.RemoteReceivedAt.UTC()
		remoteAt = &t
	}
	tag, err := db.pool.Exec(ctx, upsertRefusal, r.ProjectID, r.PeerID, r.ReceivedSeq, r.EventID, r.Reason, r.Final, record, remoteAt)
	if err != nil {
		return mapErr("save refusal", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("save refusal: %w", store.ErrNotFound)
	}
	return nil
}

// DeleteRefusal forgets a refusal (store.Refusals).
func (db *DB) DeleteRefusal(ctx context.Context, projectID, peerID string, seq int64) error {
	_, err := db.pool.Exec(ctx, deleteRefusal, projectID, peerID, seq)
	return mapErr("delete refusal", err)
}

// PendingRefusals lists refusals that may pass (store.Refusals).
func (db *DB) PendingRefusals(ctx context.Context, projectID, peerID string, afterSeq int64, limit int) ([]store.Refusal, error) {
	rows, err := db.pool.Query(ctx, selectPending, projectID, peerID, afterSeq, min(max(limit, 1), 200))
	if err != nil {
		return nil, mapErr("pending refusals", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.Refusal, error) { return scanRefusal(row) })
	return out, mapErr("pending refusals", err)
}

// SummarizeRefusals counts refusals (store.Refusals).
func (db *DB) SummarizeRefusals(ctx context.Context, projectID, peerID string) (store.RefusalSummary, error) {
	rows, err := db.pool.Query(ctx, countRefusals, projectID, peerID)
	if err != nil {
		return store.RefusalSummary{}, mapErr("summarize refusals", err)
	}
	counts, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.RefusalCount, error) {
		var c store.RefusalCount
		err := row.Scan(&c.Reason, &c.Final, &c.Count)
		return c, err
	})
	if err != nil {
		return store.RefusalSummary{}, mapErr("summarize refusals", err)
	}
	sum := store.RefusalSummary{Counts: counts}
	if len(counts) > 0 {
		latest, err := scanRefusal(db.pool.QueryRow(ctx, selectLatestRef, projectID, peerID))
		if err != nil {
			return store.RefusalSummary{}, mapErr("summarize refusals", err)
		}
		latest.Record = nil
		sum.Latest = &latest
	}
	return sum, nil
}
