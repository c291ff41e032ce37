package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/internal/shared"
)

// The embedded hub's subscriptions and pending verifications
// (store.WebSub, migration 0007). Leases end by the database clock.
const (
	subscriptionColumns = `id, project_id, topic, repository_id, thread_id, format, callback, secret, token_id,
		lease_seconds, expires_at, state, created_at, verified_at`

	// upsertSubscription creates the (project, topic, callback)
	// subscription or renews it in place, keeping its id and created_at.
	upsertSubscription = `INSERT INTO websub_subscriptions AS s (` + subscriptionColumns + `)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, ` + nowMS + ` + $10::bigint * interval '1 second', 'active', ` + nowMS + `, ` + nowMS + `)
		ON CONFLICT (project_id, topic, callback) DO UPDATE
		SET secret = excluded.secret, token_id = excluded.token_id, lease_seconds = excluded.lease_seconds,
		    expires_at = excluded.expires_at, state = 'active', verified_at = excluded.verified_at,
		    repository_id = excluded.repository_id, thread_id = excluded.thread_id, format = excluded.format
		RETURNING ` + subscriptionColumns

	// startWebSubCursor puts a new subscription's courier cursor at the
	// project's head unless the target already has one.
	startWebSubCursor = `INSERT INTO courier_cursors (courier, project_id, target, received_seq, updated_at)
		SELECT '` + store.CourierWebSub + `', id, $2, last_seq, ` + nowMS + ` FROM projects WHERE id = $1
		ON CONFLICT (courier, project_id, target) DO NOTHING`

	deleteWebSubCursor = `DELETE FROM courier_cursors WHERE courier = '` + store.CourierWebSub + `' AND project_id = $1 AND target = $2`

	deleteSubscriptionByKey = `DELETE FROM websub_subscriptions WHERE project_id = $1 AND topic = $2 AND callback = $3 RETURNING id`
	deleteSubscriptionByID  = `DELETE FROM websub_subscriptions WHERE project_id = $1 AND id = $2`
	setSubscriptionState    = `UPDATE websub_subscriptions SET state = $1 WHERE project_id = $2 AND id = $3`
	selectSubscription      = `SELECT ` + subscriptionColumns + ` FROM websub_subscriptions WHERE project_id = $1 AND id = $2`
	selectSubscriptions     = `SELECT ` + subscriptionColumns + ` FROM websub_subscriptions
		WHERE project_id = $1 AND expires_at > ` + nowMS + ` ORDER BY id`
	selectSubscribedProjects = `SELECT DISTINCT project_id FROM websub_subscriptions
		WHERE expires_at > ` + nowMS + ` ORDER BY project_id`

	verificationColumns = `id, project_id, mode, topic, repository_id, thread_id, format, callback, secret, token_id,
		lease_seconds, attempts, created_at`
	insertVerification = `INSERT INTO websub_verifications (` + verificationColumns + `)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 0, ` + nowMS + `)`
	selectPendingVerifications = `SELECT ` + verificationColumns + ` FROM websub_verifications
		ORDER BY created_at, id LIMIT $1`
	deleteVerification = `DELETE FROM websub_verifications WHERE id = $1`
	retryVerification  = `UPDATE websub_verifications SET attempts = attempts + 1 WHERE id = $1`
)

var webSubSQL = shared.WebSubSQL{
	Upsert: upsertSubscription, LeaseArgs: func(int64) []any { return nil }, // $10 is the lease too
	StartCursor: startWebSubCursor, DeleteCursor: deleteWebSubCursor,
	DeleteByKey: deleteSubscriptionByKey, DeleteByID: deleteSubscriptionByID, SetState: setSubscriptionState,
	Select: selectSubscription, Live: selectSubscriptions, SubscribedProjects: selectSubscribedProjects,
	InsertVerification: insertVerification, Pending: selectPendingVerifications,
	DeleteVerification: deleteVerification, RetryVerification: retryVerification,
	CountStates: countSubscriptionStates, Revoked: selectRevokedSubscriptions, ByToken: selectTokenSubscriptions,
	PublicProjectIDs: selectPublicProjectIDs, DeleteLapsed: deleteLapsedVerifications,
	Counts: countWebSub,
}

func (db *DB) websub() shared.WebSub { return shared.WebSub{Engine: db.engine(), SQL: &webSubSQL} }

// AddVerification stores a pending verification. Errors:
// store.ErrNotFound (unknown project), store.ErrExists (id taken),
// store.ErrUnavailable.
func (db *DB) AddVerification(ctx context.Context, v store.Verification) error {
	if v.ID == "" {
		return fmt.Errorf("add verification: empty id")
	}
	// An unknown project is a foreign-key violation: ErrNotFound.
	return mapErr("add verification", db.websub().AddVerification(ctx, qr(db.pool), v))
}

// PendingVerifications returns at most limit pending verifications, oldest
// first. Errors: store.ErrUnavailable.
func (db *DB) PendingVerifications(ctx context.Context, limit int) ([]store.Verification, error) {
	return db.websub().PendingVerifications(ctx, limit)
}

// DeleteVerification removes a pending verification; an unknown id is not
// an error. Errors: store.ErrUnavailable.
func (db *DB) DeleteVerification(ctx context.Context, id string) error {
	return db.websub().DeleteVerification(ctx, id)
}

// RetryVerification counts a failed attempt. Errors: store.ErrUnavailable.
func (db *DB) RetryVerification(ctx context.Context, id string) error {
	return db.websub().RetryVerification(ctx, id)
}

// ActivateSubscription creates or renews the (project, topic, callback)
// subscription, starts a new one's cursor at the project's head and deletes
// the verification v.ID, in one transaction. See store.WebSub. Errors:
// store.ErrNotFound (unknown project), store.ErrUnavailable.
func (db *DB) ActivateSubscription(ctx context.Context, v store.Verification, newID string) (store.Subscription, error) {
	var sub store.Subscription
	err := db.inTx(ctx, "activate subscription", pgx.TxOptions{}, func(tx pgx.Tx) error {
		var err error // an unknown project is a foreign-key violation: ErrNotFound
		sub, err = db.websub().Activate(ctx, qr(tx), v, newID)
		return err
	})
	return sub, err
}

// DeleteSubscription removes the (project, topic, callback) subscription
// and its cursor, if any, and the verification verificationID. Errors:
// store.ErrUnavailable.
func (db *DB) DeleteSubscription(ctx context.Context, projectID, topic, callback, verificationID string) error {
	return db.inTx(ctx, "delete subscription", pgx.TxOptions{}, func(tx pgx.Tx) error {
		return db.websub().Delete(ctx, qr(tx), projectID, topic, callback, verificationID)
	})
}

// RemoveSubscription removes a subscription and its cursor by id; an
// unknown id is not an error. Errors: store.ErrUnavailable.
func (db *DB) RemoveSubscription(ctx context.Context, projectID, id string) error {
	return db.inTx(ctx, "remove subscription", pgx.TxOptions{}, func(tx pgx.Tx) error {
		return db.websub().Remove(ctx, qr(tx), projectID, id)
	})
}

// SetSubscriptionState sets a subscription's state. Errors:
// store.ErrNotFound, store.ErrUnavailable.
func (db *DB) SetSubscriptionState(ctx context.Context, projectID, id, state string) error {
	return db.websub().SetState(ctx, projectID, id, state)
}

// Subscription returns one subscription, expired or not. Errors:
// store.ErrNotFound, store.ErrUnavailable.
func (db *DB) Subscription(ctx context.Context, projectID, id string) (store.Subscription, error) {
	return db.websub().Subscription(ctx, projectID, id)
}

// Subscriptions returns the project's subscriptions whose lease has not
// ended by the database clock, sorted by id. Errors: store.ErrUnavailable.
func (db *DB) Subscriptions(ctx context.Context, projectID string) ([]store.Subscription, error) {
	return db.websub().Subscriptions(ctx, projectID)
}

// SubscribedProjects returns the projects with a live subscription, sorted.
// Errors: store.ErrUnavailable.
func (db *DB) SubscribedProjects(ctx context.Context) ([]string, error) {
	return db.websub().SubscribedProjects(ctx)
}
