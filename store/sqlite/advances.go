package sqlite

import "github.com/acrelay/acrelay/store"

var _ store.Advances = (*DB)(nil)

// SubscribeAdvances implements store.Advances: every append this process
// commits is published, after its commit, to every subscription. (One
// process owns an SQLite store, so in-process publication is complete.)
func (db *DB) SubscribeAdvances() *store.AdvanceSubscription {
	return db.advances.SubscribeAdvances()
}
