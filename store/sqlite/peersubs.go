package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/acrelay/acrelay/store"
)

// PeerSubscriptions (store.PeerSubscriptions): a peer link's WebSub
// subscriber state, one row per link (migration 0017).

var _ store.PeerSubscriptions = (*DB)(nil)

const (
	peerSubColumns   = `project_id, peer_id, topic, request_id, mode, secret, requested_at, failed, state, verified, lease_seconds, verified_at, reason`
	selectPeerSub    = `SELECT ` + peerSubColumns + ` FROM federation_subscriptions WHERE peer_id = ? AND project_id = ?`
	upsertPeerSubSQL = `INSERT INTO federation_subscriptions (` + peerSubColumns + `)
		SELECT project_id, peer_id, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ? FROM federation_peers WHERE project_id = ? AND peer_id = ?
		ON CONFLICT (peer_id) DO UPDATE SET topic = excluded.topic, request_id = excluded.request_id, mode = excluded.mode,
			secret = excluded.secret, requested_at = excluded.requested_at, failed = excluded.failed, state = excluded.state,
			verified = excluded.verified, lease_seconds = excluded.lease_seconds, verified_at = excluded.verified_at, reason = excluded.reason`
	replacePeerSubSQL = `UPDATE federation_subscriptions SET topic = ?, request_id = ?, mode = ?, secret = ?, requested_at = ?, failed = ?,
		state = ?, verified = ?, lease_seconds = ?, verified_at = ?, reason = ? WHERE peer_id = ? AND project_id = ? AND request_id = ?`
)

func peerSubArgs(s store.PeerSubscription) []any {
	var secret any
	if s.Secret != nil {
		secret = s.Secret
	}
	return []any{s.Topic, s.RequestID, s.Mode, secret, formatTime(s.RequestedAt), s.Failed, s.State, s.Verified,
		int64(s.Lease / time.Second), nullTime(s.VerifiedAt), s.Reason}
}

// PeerSubscription reads a link's subscriber state (store.PeerSubscriptions).
func (db *DB) PeerSubscription(ctx context.Context, projectID, peerID string) (store.PeerSubscription, error) {
	var s store.PeerSubscription
	var requested string
	var verified sql.NullString
	var lease int64
	err := db.rd.QueryRowContext(ctx, selectPeerSub, peerID, projectID).Scan(&s.ProjectID, &s.PeerID, &s.Topic, &s.RequestID, &s.Mode,
		&s.Secret, &requested, &s.Failed, &s.State, &s.Verified, &lease, &verified, &s.Reason)
	if err != nil {
		return store.PeerSubscription{}, mapErr("peer subscription", err)
	}
	s.RequestedAt, s.VerifiedAt, s.Lease = parseTime(requested), parseNullTime(verified), time.Duration(lease)*time.Second
	return s, nil
}

// SavePeerSubscription stores a link's subscriber state (store.PeerSubscriptions).
func (db *DB) SavePeerSubscription(ctx context.Context, s store.PeerSubscription) error {
	r, err := db.w.ExecContext(ctx, upsertPeerSubSQL, append(peerSubArgs(s), s.ProjectID, s.PeerID)...)
	if err != nil {
		return mapErr("save peer subscription", err)
	}
	if n, err := r.RowsAffected(); err != nil || n == 0 {
		return fmt.Errorf("save peer subscription: %w", store.ErrNotFound)
	}
	return nil
}

// ReplacePeerSubscription stores a link's subscriber state while its
// request is requestID (store.PeerSubscriptions).
func (db *DB) ReplacePeerSubscription(ctx context.Context, s store.PeerSubscription, requestID string) (bool, error) {
	r, err := db.w.ExecContext(ctx, replacePeerSubSQL, append(peerSubArgs(s), s.PeerID, s.ProjectID, requestID)...)
	if err != nil {
		return false, mapErr("replace peer subscription", err)
	}
	n, err := r.RowsAffected()
	if err != nil {
		return false, mapErr("replace peer subscription", err)
	}
	return n == 1, nil
}
