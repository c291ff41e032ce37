package sqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/acrelay/acrelay/store"
)

// The relay-wide WebSub scans (store.WebSubScans, migration 0016): one
// statement each.
const (
	countSubscriptionStates = `SELECT state, count(*) FROM websub_subscriptions
		WHERE expires_at > ` + nowMS + ` GROUP BY state`
	selectRevokedSubscriptions = `SELECT ` + subscriptionColumns + ` FROM websub_subscriptions
		WHERE token_id <> '' AND expires_at > ` + nowMS + `
		  AND NOT EXISTS (SELECT 1 FROM tokens t WHERE t.id = websub_subscriptions.token_id AND t.revoked = 0)
		ORDER BY project_id, id LIMIT ?`
	selectTokenSubscriptions = `SELECT ` + subscriptionColumns + ` FROM websub_subscriptions
		WHERE project_id = ? AND token_id = ? AND expires_at > ` + nowMS + ` ORDER BY id`
	selectPublicProjectIDs = `SELECT id FROM projects WHERE visibility = 'public' AND id > ? ORDER BY id LIMIT ?`

	// expiredBatch is one batch of expired subscriptions, oldest first:
	// the same rows for both deletes of one write transaction.
	expiredBatch         = `SELECT project_id, id FROM websub_subscriptions WHERE expires_at < ?1 ORDER BY expires_at, id LIMIT ?2`
	deleteExpiredCursors = `DELETE FROM courier_cursors WHERE courier = '` + store.CourierWebSub + `'
		AND (project_id, target) IN (` + expiredBatch + `)`
	deleteExpiredSubscriptions = `DELETE FROM websub_subscriptions WHERE (project_id, id) IN (` + expiredBatch + `)`
	deleteLapsedVerifications  = `DELETE FROM websub_verifications WHERE id IN (
		SELECT id FROM websub_verifications WHERE created_at < ? ORDER BY created_at, id LIMIT ?)`
)

// CountSubscriptionStates counts the live subscriptions by state.
// Errors: store.ErrUnavailable.
func (db *DB) CountSubscriptionStates(ctx context.Context) (map[string]int, error) {
	return db.websub().CountStates(ctx)
}

// RevokedSubscriptions returns live subscriptions whose token is revoked
// or gone. Errors: store.ErrUnavailable.
func (db *DB) RevokedSubscriptions(ctx context.Context, limit int) ([]store.Subscription, error) {
	return db.websub().Revoked(ctx, limit)
}

// TokenSubscriptions returns the project's live subscriptions of one
// token. Errors: store.ErrUnavailable.
func (db *DB) TokenSubscriptions(ctx context.Context, projectID, tokenID string) ([]store.Subscription, error) {
	return db.websub().TokenSubscriptions(ctx, projectID, tokenID)
}

// PublicProjectIDs pages the public projects' ids. Errors:
// store.ErrUnavailable.
func (db *DB) PublicProjectIDs(ctx context.Context, afterID string, limit int) ([]string, error) {
	return db.websub().PublicProjectIDs(ctx, afterID, limit)
}

// DeleteExpiredSubscriptions deletes one batch of expired subscriptions
// and their cursors in one transaction. Errors: store.ErrUnavailable.
func (db *DB) DeleteExpiredSubscriptions(ctx context.Context, before time.Time, limit int) (int, error) {
	var n int64
	err := db.writeTx(ctx, "delete expired subscriptions", func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, deleteExpiredCursors, formatTime(before), limit); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, deleteExpiredSubscriptions, formatTime(before), limit)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return int(n), err
}

// DeleteLapsedVerifications deletes one batch of pending verifications
// created before before. Errors: store.ErrUnavailable.
func (db *DB) DeleteLapsedVerifications(ctx context.Context, before time.Time, limit int) (int, error) {
	return db.websub().DeleteLapsedVerifications(ctx, before, limit)
}
