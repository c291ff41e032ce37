package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/acrelay/acrelay/store"
)

// PeerSubscriptions (store.PeerSubscriptions): a peer link's WebSub
// subscriber state, one row per link (migration 0015).

var _ store.PeerSubscriptions = (*DB)(nil)

const (
	peerSubColumns   = `project_id, peer_id, topic, request_id, mode, secret, requested_at, failed, state, verified, lease_seconds, verified_at, reason`
	selectPeerSub    = `SELECT ` + peerSubColumns + ` FROM federation_subscriptions WHERE peer_id = $1 AND project_id = $2`
	upsertPeerSubSQL = `INSERT INTO federation_subscriptions (` + peerSubColumns + `)
		SELECT project_id, peer_id, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13 FROM federation_peers WHERE peer_id = $1 AND project_id = $2
		ON CONFLICT (peer_id) DO UPDATE SET topic = excluded.topic, request_id = excluded.request_id, mode = excluded.mode,
			secret = excluded.secret, requested_at = excluded.requested_at, failed = excluded.failed, state = excluded.state,
			verified = excluded.verified, lease_seconds = excluded.lease_seconds, verified_at = excluded.verified_at, reason = excluded.reason`
	replacePeerSubSQL = `UPDATE federation_subscriptions SET topic = $3, request_id = $4, mode = $5, secret = $6, requested_at = $7, failed = $8,
		state = $9, verified = $10, lease_seconds = $11, verified_at = $12, reason = $13 WHERE peer_id = $1 AND project_id = $2 AND request_id = $14`
)

func peerSubArgs(s store.PeerSubscription) []any {
	var verifiedAt *time.Time
	if !s.VerifiedAt.IsZero() {
		v := s.VerifiedAt.UTC()
		verifiedAt = &v
	}
	return []any{s.PeerID, s.ProjectID, s.Topic, s.RequestID, s.Mode, s.Secret, s.RequestedAt.UTC(), s.Failed, s.State, s.Verified,
		int64(s.Lease / time.Second), verifiedAt, s.Reason}
}

// PeerSubscription reads a link's subscriber state (store.PeerSubscriptions).
func (db *DB) PeerSubscription(ctx context.Context, projectID, peerID string) (store.PeerSubscription, error) {
	var s store.PeerSubscription
	var verifiedAt *time.Time
	var lease int64
	err := db.pool.QueryRow(ctx, selectPeerSub, peerID, projectID).Scan(&s.ProjectID, &s.PeerID, &s.Topic, &s.RequestID, &s.Mode,
		&s.Secret, &s.RequestedAt, &s.Failed, &s.State, &s.Verified, &lease, &verifiedAt, &s.Reason)
	if err != nil {
		return store.PeerSubscription{}, mapErr("peer subscription", err)
	}
	s.RequestedAt, s.Lease = utc(s.RequestedAt), time.Duration(lease)*time.Second
	if verifiedAt != nil {
		s.VerifiedAt = utc(*verifiedAt)
	}
	return s, nil
}

// SavePeerSubscription stores a link's subscriber state (store.PeerSubscriptions).
func (db *DB) SavePeerSubscription(ctx context.Context, s store.PeerSubscription) error {
	tag, err := db.pool.Exec(ctx, upsertPeerSubSQL, peerSubArgs(s)...)
	if err != nil {
		return mapErr("save peer subscription", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("save peer subscription: %w", store.ErrNotFound)
	}
	return nil
}

// ReplacePeerSubscription stores a link's subscriber state while its
// request is requestID (store.PeerSubscriptions).
func (db *DB) ReplacePeerSubscription(ctx context.Context, s store.PeerSubscription, requestID string) (bool, error) {
	tag, err := db.pool.Exec(ctx, replacePeerSubSQL, append(peerSubArgs(s), requestID)...)
	if err != nil {
		return false, mapErr("replace peer subscription", err)
	}
	return tag.RowsAffected() == 1, nil
}
