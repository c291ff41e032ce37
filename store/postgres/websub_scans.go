package postgres

import (
	"context"
	"time"

	"github.com/acrelay/acrelay/store"
)

// The relay-wide WebSub scans (store.WebSubScans, migration 0015): one
// statement each.
const (
	countSubscriptionStates = `SELECT state, count(*) FROM websub_subscriptions
		WHERE expires_at > ` + nowMS + ` GROUP BY state`
	selectRevokedSubscriptions = `SELECT ` + subscriptionColumns + ` FROM websub_subscriptions
		WHERE token_id <> '' AND expires_at > ` + nowMS + `
		  AND NOT EXISTS (SELECT 1 FROM tokens t WHERE t.id = websub_subscriptions.token_id AND NOT t.revoked)
		ORDER BY project_id, id LIMIT $1`
	selectTokenSubscriptions = `SELECT ` + subscriptionColumns + ` FROM websub_subscriptions
		WHERE project_id = $1 AND token_id = $2 AND expires_at > ` + nowMS + ` ORDER BY id`
	selectPublicProjectIDs = `SELECT id FROM projects WHERE visibility = 'public' AND id > $1 ORDER BY id LIMIT $2`

	// deleteExpiredSubscriptions deletes one batch, oldest expiry first,
	// and the batch's cursors in the same statement; rows another
	// transaction holds (a renewal) are skipped, not waited for.
	deleteExpiredSubscriptions = `WITH gone AS (
		DELETE FROM websub_subscriptions WHERE id IN (
			SELECT id FROM websub_subscriptions WHERE expires_at < $1 ORDER BY expires_at, id LIMIT $2 FOR UPDATE SKIP LOCKED)
		RETURNING project_id, id),
	cursors AS (
		DELETE FROM courier_cursors c USING gone
		WHERE c.courier = '` + store.CourierWebSub + `' AND c.project_id = gone.project_id AND c.target = gone.id)
	SELECT count(*) FROM gone`
	deleteLapsedVerifications = `DELETE FROM websub_verifications WHERE id IN (
		SELECT id FROM websub_verifications WHERE created_at < $1 ORDER BY created_at, id LIMIT $2 FOR UPDATE SKIP LOCKED)`
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
// and their cursors in one statement. Errors: store.ErrUnavailable.
func (db *DB) DeleteExpiredSubscriptions(ctx context.Context, before time.Time, limit int) (int, error) {
	var n int
	err := db.pool.QueryRow(ctx, deleteExpiredSubscriptions, before, limit).Scan(&n)
	return n, mapErr("delete expired subscriptions", err)
}

// DeleteLapsedVerifications deletes one batch of pending verifications
// created before before. Errors: store.ErrUnavailable.
func (db *DB) DeleteLapsedVerifications(ctx context.Context, before time.Time, limit int) (int, error) {
	return db.websub().DeleteLapsedVerifications(ctx, before, limit)
}
