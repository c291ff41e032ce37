package postgres

import (
	"context"

	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/internal/shared"
)

// PeerSubscriptions (store.PeerSubscriptions): a peer link's WebSub
// subscriber state, one row per link (migration 0015).

var _ store.PeerSubscriptions = (*DB)(nil)

const (
	peerSubColumns   = `project_id, peer_id, topic, request_id, mode, secret, requested_at, failed, state, verified, lease_seconds, verified_at, reason`
	selectPeerSub    = `SELECT ` + peerSubColumns + ` FROM federation_subscriptions WHERE peer_id = $1 AND project_id = $2`
	upsertPeerSubSQL = `INSERT INTO federation_subscriptions (` + peerSubColumns + `)
		SELECT project_id, peer_id, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11 FROM federation_peers WHERE project_id = $12 AND peer_id = $13
		ON CONFLICT (peer_id) DO UPDATE SET topic = excluded.topic, request_id = excluded.request_id, mode = excluded.mode,
			secret = excluded.secret, requested_at = excluded.requested_at, failed = excluded.failed, state = excluded.state,
			verified = excluded.verified, lease_seconds = excluded.lease_seconds, verified_at = excluded.verified_at, reason = excluded.reason`
	replacePeerSubSQL = `UPDATE federation_subscriptions SET topic = $1, request_id = $2, mode = $3, secret = $4, requested_at = $5, failed = $6,
		state = $7, verified = $8, lease_seconds = $9, verified_at = $10, reason = $11 WHERE peer_id = $12 AND project_id = $13 AND request_id = $14`
)

var peerSubSQL = shared.PeerSubSQL{Select: selectPeerSub, Upsert: upsertPeerSubSQL, Replace: replacePeerSubSQL}

func (db *DB) peerSubs() shared.PeerSubs {
	return shared.PeerSubs{Engine: db.engine(), SQL: &peerSubSQL}
}

// PeerSubscription reads a link's subscriber state (store.PeerSubscriptions).
func (db *DB) PeerSubscription(ctx context.Context, projectID, peerID string) (store.PeerSubscription, error) {
	return db.peerSubs().Get(ctx, projectID, peerID)
}

// SavePeerSubscription stores a link's subscriber state (store.PeerSubscriptions).
func (db *DB) SavePeerSubscription(ctx context.Context, s store.PeerSubscription) error {
	return db.peerSubs().Save(ctx, s)
}

// ReplacePeerSubscription stores a link's subscriber state while its
// request is requestID (store.PeerSubscriptions).
func (db *DB) ReplacePeerSubscription(ctx context.Context, s store.PeerSubscription, requestID string) (bool, error) {
	return db.peerSubs().Replace(ctx, s, requestID)
}
