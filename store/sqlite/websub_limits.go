package sqlite

import (
	"context"

	"github.com/acrelay/acrelay/store"
)

var _ store.WebSubLimits = (*DB)(nil)

// countWebSub is store.WebSubLimits.CountWebSub in one statement (migration
// 0014's indexes): ?1 project, ?2 topic, ?3 callback, ?4 its callback host.
const countWebSub = `SELECT
	EXISTS (SELECT 1 FROM websub_subscriptions WHERE project_id = ?1 AND topic = ?2 AND callback = ?3 AND expires_at > ` + nowMS + `),
	(SELECT count(*) FROM websub_subscriptions WHERE project_id = ?1 AND topic = ?2 AND expires_at > ` + nowMS + `)
		+ (SELECT count(*) FROM websub_verifications WHERE project_id = ?1 AND topic = ?2 AND mode = 'subscribe'),
	(SELECT count(*) FROM websub_subscriptions WHERE project_id = ?1 AND expires_at > ` + nowMS + `)
		+ (SELECT count(*) FROM websub_verifications WHERE project_id = ?1 AND mode = 'subscribe'),
	(SELECT count(*) FROM websub_subscriptions WHERE callback_host = ?4 AND expires_at > ` + nowMS + `)
		+ (SELECT count(*) FROM websub_verifications WHERE callback_host = ?4 AND mode = 'subscribe'),
	(SELECT count(*) FROM websub_verifications WHERE callback_host = ?4)`

// CountWebSub returns the counts the hub's caps are checked against. See
// store.WebSubLimits. Errors: store.ErrUnavailable.
func (db *DB) CountWebSub(ctx context.Context, projectID, topic, callback string) (store.WebSubCounts, error) {
	return db.websub().Counts(ctx, projectID, topic, callback)
}
