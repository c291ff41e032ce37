package sqlite

import (
	"context"

	"github.com/acrelay/acrelay/store"
)

var _ store.Advances = (*DB)(nil)

// SubscribeAdvances implements store.Advances: every append this process
// commits is published, after its commit, to every subscription. (One
// process owns an SQLite store, so in-process publication is complete.)
func (db *DB) SubscribeAdvances() *store.AdvanceSubscription {
	return db.advances.SubscribeAdvances()
}

// WakePeer implements store.PeerWakes: the wake reaches this store's own
// subscriptions at once (one process owns an SQLite store). It never
// fails.
func (db *DB) WakePeer(_ context.Context, projectID, peerID string) error {
	db.wakes.Publish(store.PeerWake{ProjectID: projectID, PeerID: peerID})
	return nil
}

// SubscribePeerWakes implements store.PeerWakes.
func (db *DB) SubscribePeerWakes() *store.PeerWakeSubscription {
	return db.wakes.SubscribePeerWakes()
}
