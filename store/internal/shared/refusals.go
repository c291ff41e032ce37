package shared

import (
	"context"
	"errors"
	"fmt"

	"github.com/acrelay/acrelay/store"
)

// RefusalSQL is one dialect's statements for peer links' refused foreign
// records (store.Refusals). Refusal rows are (project, peer, remote_seq,
// event_id, reason, final, record, remote_received_at, attempts,
// first_refused_at, refused_at).
type RefusalSQL struct {
	// Upsert (project, peer, remote seq, event id, reason, final, record,
	// remote_received_at) inserts a refusal for an existing link or
	// counts one more; no row for an unknown link.
	Upsert string
	// Delete (project, peer, remote seq).
	Delete string
	// Pending (project, peer, after seq, limit): refusal rows not final.
	Pending string
	// Count (project, peer) → (reason, final, count), all links when peer
	// is empty; Latest (project, peer) → the latest refusal row.
	Count, Latest string
}

// Refusals is store.Refusals over one dialect's SQL.
type Refusals struct {
	Engine
	SQL *RefusalSQL
}

// Save records a refused foreign record; a final one keeps no bytes.
// Errors: store.ErrNotFound (no such link), store.ErrUnavailable.
func (f Refusals) Save(ctx context.Context, r store.Refusal) error {
	if r.ProjectID == "" || r.PeerID == "" || r.Reason == "" {
		return errors.New("save refusal: project, peer and reason are required")
	}
	record := r.Record
	if r.Final {
		record = nil
	}
	n, err := f.ExecN(ctx, "save refusal", f.SQL.Upsert, r.ProjectID, r.PeerID, r.ReceivedSeq, r.EventID, r.Reason, r.Final,
		record, f.NullTimeArg(r.RemoteReceivedAt))
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("save refusal: %w", store.ErrNotFound)
	}
	return nil
}

// Delete forgets a refusal. Errors: store.ErrUnavailable.
func (f Refusals) Delete(ctx context.Context, projectID, peerID string, seq int64) error {
	_, err := f.ExecN(ctx, "delete refusal", f.SQL.Delete, projectID, peerID, seq)
	return err
}

// Pending lists the link's refusals that may pass, after afterSeq, at
// most limit (clamped to 1–200). Errors: store.ErrUnavailable.
func (f Refusals) Pending(ctx context.Context, projectID, peerID string, afterSeq int64, limit int) ([]store.Refusal, error) {
	return List(ctx, f.Engine, "pending refusals", scanRefusal, f.SQL.Pending, projectID, peerID, afterSeq, min(max(limit, 1), 200))
}

// Summarize counts refusals by reason and finality, with the latest one
// (without its bytes). Errors: store.ErrUnavailable.
func (f Refusals) Summarize(ctx context.Context, projectID, peerID string) (store.RefusalSummary, error) {
	const op = "summarize refusals"
	counts, err := List(ctx, f.Engine, op, func(row Row) (store.RefusalCount, error) {
		var c store.RefusalCount
		err := row.Scan(&c.Reason, &c.Final, &c.Count)
		return c, err
	}, f.SQL.Count, projectID, peerID)
	if err != nil {
		return store.RefusalSummary{}, err
	}
	sum := store.RefusalSummary{Counts: counts}
	if len(counts) > 0 {
		latest, err := scanRefusal(f.Read.QueryRow(ctx, f.SQL.Latest, projectID, peerID))
		if err != nil {
			return store.RefusalSummary{}, f.MapErr(op, err)
		}
		latest.Record = nil
		sum.Latest = &latest
	}
	return sum, nil
}

func scanRefusal(row Row) (store.Refusal, error) {
	var r store.Refusal
	var remoteAt, first, last Time
	if err := row.Scan(&r.ProjectID, &r.PeerID, &r.ReceivedSeq, &r.EventID, &r.Reason, &r.Final, &r.Record, &remoteAt,
		&r.Attempts, &first, &last); err != nil {
		return store.Refusal{}, err
	}
	r.RemoteReceivedAt, r.FirstRefusedAt, r.RefusedAt = remoteAt.T, first.T, last.T
	return r, nil
}
