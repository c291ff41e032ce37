package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/acrelay/acrelay/store"
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

	deleteWebSubCursors = `DELETE FROM courier_cursors WHERE courier = '` + store.CourierWebSub + `' AND project_id = $1 AND target = ANY($2::text[])`

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

func scanSubscription(row pgx.Row) (store.Subscription, error) {
	var s store.Subscription
	if err := row.Scan(&s.ID, &s.ProjectID, &s.Topic, &s.RepositoryID, &s.ThreadID, &s.Format, &s.Callback,
		&s.Secret, &s.TokenID, &s.LeaseSeconds, &s.ExpiresAt, &s.State, &s.CreatedAt, &s.VerifiedAt); err != nil {
		return store.Subscription{}, err
	}
	s.ExpiresAt, s.CreatedAt, s.VerifiedAt = utc(s.ExpiresAt), utc(s.CreatedAt), utc(s.VerifiedAt)
	return s, nil
}

func scanVerification(row pgx.Row) (store.Verification, error) {
	var v store.Verification
	if err := row.Scan(&v.ID, &v.ProjectID, &v.Mode, &v.Topic, &v.RepositoryID, &v.ThreadID, &v.Format, &v.Callback,
		&v.Secret, &v.TokenID, &v.LeaseSeconds, &v.Attempts, &v.CreatedAt); err != nil {
		return store.Verification{}, err
	}
	v.CreatedAt = utc(v.CreatedAt)
	return v, nil
}

// nonNilBytes keeps a NOT NULL bytea column from receiving NULL.
func nonNilBytes(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// AddVerification stores a pending verification. Errors:
// store.ErrNotFound (unknown project), store.ErrExists (id taken),
// store.ErrUnavailable.
func (db *DB) AddVerification(ctx context.Context, v store.Verification) error {
	if v.ID == "" {
		return fmt.Errorf("add verification: empty id")
	}
	_, err := db.pool.Exec(ctx, insertVerification, v.ID, v.ProjectID, v.Mode, v.Topic, v.RepositoryID, v.ThreadID,
		v.Format, v.Callback, nonNilBytes(v.Secret), v.TokenID, v.LeaseSeconds)
	return mapErr("add verification", err) // an unknown project is a foreign-key violation: ErrNotFound
}

// PendingVerifications returns at most limit pending verifications, oldest
// first. Errors: store.ErrUnavailable.
func (db *DB) PendingVerifications(ctx context.Context, limit int) ([]store.Verification, error) {
	rows, err := db.pool.Query(ctx, selectPendingVerifications, limit)
	if err != nil {
		return nil, mapErr("pending verifications", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Verification, error) { return scanVerification(r) })
	return out, mapErr("pending verifications", err)
}

// DeleteVerification removes a pending verification; an unknown id is not
// an error. Errors: store.ErrUnavailable.
func (db *DB) DeleteVerification(ctx context.Context, id string) error {
	_, err := db.pool.Exec(ctx, deleteVerification, id)
	return mapErr("delete verification", err)
}

// RetryVerification counts a failed attempt. Errors: store.ErrUnavailable.
func (db *DB) RetryVerification(ctx context.Context, id string) error {
	_, err := db.pool.Exec(ctx, retryVerification, id)
	return mapErr("retry verification", err)
}

// ActivateSubscription creates or renews the (project, topic, callback)
// subscription, starts a new one's cursor at the project's head and deletes
// the verification v.ID, in one transaction. See store.WebSub. Errors:
// store.ErrNotFound (unknown project), store.ErrUnavailable.
func (db *DB) ActivateSubscription(ctx context.Context, v store.Verification, newID string) (store.Subscription, error) {
	var sub store.Subscription
	err := db.inTx(ctx, "activate subscription", pgx.TxOptions{}, func(tx pgx.Tx) error {
		s, err := scanSubscription(tx.QueryRow(ctx, upsertSubscription, newID, v.ProjectID, v.Topic, v.RepositoryID,
			v.ThreadID, v.Format, v.Callback, nonNilBytes(v.Secret), v.TokenID, v.LeaseSeconds))
		if err != nil {
			return err // an unknown project is a foreign-key violation: ErrNotFound
		}
		if _, err := tx.Exec(ctx, startWebSubCursor, v.ProjectID, s.ID); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, deleteVerification, v.ID); err != nil {
			return err
		}
		sub = s
		return nil
	})
	return sub, err
}

// DeleteSubscription removes the (project, topic, callback) subscription
// and its cursor, if any, and the verification verificationID. Errors:
// store.ErrUnavailable.
func (db *DB) DeleteSubscription(ctx context.Context, projectID, topic, callback, verificationID string) error {
	return db.inTx(ctx, "delete subscription", pgx.TxOptions{}, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, deleteSubscriptionByKey, projectID, topic, callback)
		if err != nil {
			return err
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		if len(ids) > 0 {
			if _, err := tx.Exec(ctx, deleteWebSubCursors, projectID, ids); err != nil {
				return err
			}
		}
		if verificationID != "" {
			_, err = tx.Exec(ctx, deleteVerification, verificationID)
		}
		return err
	})
}

// RemoveSubscription removes a subscription and its cursor by id; an
// unknown id is not an error. Errors: store.ErrUnavailable.
func (db *DB) RemoveSubscription(ctx context.Context, projectID, id string) error {
	return db.inTx(ctx, "remove subscription", pgx.TxOptions{}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, deleteSubscriptionByID, projectID, id); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, deleteWebSubCursors, projectID, []string{id})
		return err
	})
}

// SetSubscriptionState sets a subscription's state. Errors:
// store.ErrNotFound, store.ErrUnavailable.
func (db *DB) SetSubscriptionState(ctx context.Context, projectID, id, state string) error {
	if state != store.SubscriptionActive && state != store.SubscriptionFailing {
		return fmt.Errorf("set subscription state: %q is not a subscription state", state)
	}
	tag, err := db.pool.Exec(ctx, setSubscriptionState, state, projectID, id)
	if err != nil {
		return mapErr("set subscription state", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("set subscription state: %w", store.ErrNotFound)
	}
	return nil
}

// Subscription returns one subscription, expired or not. Errors:
// store.ErrNotFound, store.ErrUnavailable.
func (db *DB) Subscription(ctx context.Context, projectID, id string) (store.Subscription, error) {
	s, err := scanSubscription(db.pool.QueryRow(ctx, selectSubscription, projectID, id))
	return s, mapErr("subscription", err)
}

// Subscriptions returns the project's subscriptions whose lease has not
// ended by the database clock, sorted by id. Errors: store.ErrUnavailable.
func (db *DB) Subscriptions(ctx context.Context, projectID string) ([]store.Subscription, error) {
	rows, err := db.pool.Query(ctx, selectSubscriptions, projectID)
	if err != nil {
		return nil, mapErr("subscriptions", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Subscription, error) { return scanSubscription(r) })
	return out, mapErr("subscriptions", err)
}

// SubscribedProjects returns the projects with a live subscription, sorted.
// Errors: store.ErrUnavailable.
func (db *DB) SubscribedProjects(ctx context.Context) ([]string, error) {
	rows, err := db.pool.Query(ctx, selectSubscribedProjects)
	if err != nil {
		return nil, mapErr("subscribed projects", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return out, mapErr("subscribed projects", err)
}
