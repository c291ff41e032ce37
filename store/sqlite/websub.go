package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/acrelay/acrelay/store"
)

// The embedded hub's subscriptions and pending verifications
// (store.WebSub, migration 0009). Leases end by the database clock.
const (
	subscriptionColumns = `id, project_id, topic, repository_id, thread_id, format, callback, secret, token_id,
		lease_seconds, expires_at, state, created_at, verified_at`

	// upsertSubscription creates the (project, topic, callback)
	// subscription or renews it in place, keeping its id and created_at.
	// ?11 is an SQLite time modifier such as '+3600 seconds'.
	upsertSubscription = `INSERT INTO websub_subscriptions (` + subscriptionColumns + `)
		VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ?11), 'active', ` + nowMS + `, ` + nowMS + `)
		ON CONFLICT (project_id, topic, callback) DO UPDATE
		SET secret = excluded.secret, token_id = excluded.token_id, lease_seconds = excluded.lease_seconds,
		    expires_at = excluded.expires_at, state = 'active', verified_at = excluded.verified_at,
		    repository_id = excluded.repository_id, thread_id = excluded.thread_id, format = excluded.format
		RETURNING ` + subscriptionColumns

	// startWebSubCursor puts a new subscription's courier cursor at the
	// project's head unless the target already has one.
	startWebSubCursor = `INSERT INTO courier_cursors (courier, project_id, target, received_seq, updated_at)
		SELECT '` + store.CourierWebSub + `', id, ?2, last_seq, ` + nowMS + ` FROM projects WHERE id = ?1
		ON CONFLICT (courier, project_id, target) DO NOTHING`

	deleteWebSubCursor = `DELETE FROM courier_cursors WHERE courier = '` + store.CourierWebSub + `' AND project_id = ? AND target = ?`

	deleteSubscriptionByKey = `DELETE FROM websub_subscriptions WHERE project_id = ? AND topic = ? AND callback = ? RETURNING id`
	deleteSubscriptionByID  = `DELETE FROM websub_subscriptions WHERE project_id = ? AND id = ?`
	setSubscriptionState    = `UPDATE websub_subscriptions SET state = ? WHERE project_id = ? AND id = ?`
	selectSubscription      = `SELECT ` + subscriptionColumns + ` FROM websub_subscriptions WHERE project_id = ? AND id = ?`
	selectSubscriptions     = `SELECT ` + subscriptionColumns + ` FROM websub_subscriptions
		WHERE project_id = ? AND expires_at > ` + nowMS + ` ORDER BY id`
	selectSubscribedProjects = `SELECT DISTINCT project_id FROM websub_subscriptions
		WHERE expires_at > ` + nowMS + ` ORDER BY project_id`

	verificationColumns = `id, project_id, mode, topic, repository_id, thread_id, format, callback, secret, token_id,
		lease_seconds, attempts, created_at`
	insertVerification = `INSERT INTO websub_verifications (` + verificationColumns + `)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ` + nowMS + `)`
	selectPendingVerifications = `SELECT ` + verificationColumns + ` FROM websub_verifications
		ORDER BY created_at, id LIMIT ?`
	deleteVerification = `DELETE FROM websub_verifications WHERE id = ?`
	retryVerification  = `UPDATE websub_verifications SET attempts = attempts + 1 WHERE id = ?`
)

func leaseModifier(seconds int64) string { return fmt.Sprintf("+%d seconds", max(seconds, 0)) }

func scanSubscription(row rowScanner) (store.Subscription, error) {
	var s store.Subscription
	var expires, created, verified string
	if err := row.Scan(&s.ID, &s.ProjectID, &s.Topic, &s.RepositoryID, &s.ThreadID, &s.Format, &s.Callback,
		&s.Secret, &s.TokenID, &s.LeaseSeconds, &expires, &s.State, &created, &verified); err != nil {
		return store.Subscription{}, err
	}
	s.ExpiresAt, s.CreatedAt, s.VerifiedAt = parseTime(expires), parseTime(created), parseTime(verified)
	return s, nil
}

func scanVerification(row rowScanner) (store.Verification, error) {
	var v store.Verification
	var created string
	if err := row.Scan(&v.ID, &v.ProjectID, &v.Mode, &v.Topic, &v.RepositoryID, &v.ThreadID, &v.Format, &v.Callback,
		&v.Secret, &v.TokenID, &v.LeaseSeconds, &v.Attempts, &created); err != nil {
		return store.Verification{}, err
	}
	v.CreatedAt = parseTime(created)
	return v, nil
}

// nonNil keeps a NOT NULL BLOB column from receiving NULL.
func nonNil(b []byte) []byte {
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
	return db.writeTx(ctx, "add verification", func(tx *sql.Tx) error {
		if err := mustExist(ctx, tx, projectExists, v.ProjectID); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, insertVerification, v.ID, v.ProjectID, v.Mode, v.Topic, v.RepositoryID, v.ThreadID,
			v.Format, v.Callback, nonNil(v.Secret), v.TokenID, v.LeaseSeconds)
		return err
	})
}

// PendingVerifications returns at most limit pending verifications, oldest
// first. Errors: store.ErrUnavailable.
func (db *DB) PendingVerifications(ctx context.Context, limit int) ([]store.Verification, error) {
	return listRows(ctx, db, "pending verifications", scanVerification, selectPendingVerifications, limit)
}

// DeleteVerification removes a pending verification; an unknown id is not
// an error. Errors: store.ErrUnavailable.
func (db *DB) DeleteVerification(ctx context.Context, id string) error {
	_, err := db.w.ExecContext(ctx, deleteVerification, id)
	return mapErr("delete verification", err)
}

// RetryVerification counts a failed attempt. Errors: store.ErrUnavailable.
func (db *DB) RetryVerification(ctx context.Context, id string) error {
	_, err := db.w.ExecContext(ctx, retryVerification, id)
	return mapErr("retry verification", err)
}

// ActivateSubscription creates or renews the (project, topic, callback)
// subscription, starts a new one's cursor at the project's head and deletes
// the verification v.ID, in one transaction. See store.WebSub. Errors:
// store.ErrNotFound (unknown project), store.ErrUnavailable.
func (db *DB) ActivateSubscription(ctx context.Context, v store.Verification, newID string) (store.Subscription, error) {
	var sub store.Subscription
	err := db.writeTx(ctx, "activate subscription", func(tx *sql.Tx) error {
		if err := mustExist(ctx, tx, projectExists, v.ProjectID); err != nil {
			return err
		}
		var err error
		sub, err = scanSubscription(tx.QueryRowContext(ctx, upsertSubscription, newID, v.ProjectID, v.Topic, v.RepositoryID,
			v.ThreadID, v.Format, v.Callback, nonNil(v.Secret), v.TokenID, v.LeaseSeconds, leaseModifier(v.LeaseSeconds)))
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, startWebSubCursor, v.ProjectID, sub.ID); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, deleteVerification, v.ID)
		return err
	})
	return sub, err
}

// DeleteSubscription removes the (project, topic, callback) subscription
// and its cursor, if any, and the verification verificationID. Errors:
// store.ErrUnavailable.
func (db *DB) DeleteSubscription(ctx context.Context, projectID, topic, callback, verificationID string) error {
	return db.writeTx(ctx, "delete subscription", func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, deleteSubscriptionByKey, projectID, topic, callback)
		if err != nil {
			return err
		}
		var ids []string
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			ids = append(ids, id)
		}
		if err := rows.Close(); err != nil {
			return err
		}
		for _, id := range ids {
			if _, err := tx.ExecContext(ctx, deleteWebSubCursor, projectID, id); err != nil {
				return err
			}
		}
		if verificationID != "" {
			_, err = tx.ExecContext(ctx, deleteVerification, verificationID)
		}
		return err
	})
}

// RemoveSubscription removes a subscription and its cursor by id; an
// unknown id is not an error. Errors: store.ErrUnavailable.
func (db *DB) RemoveSubscription(ctx context.Context, projectID, id string) error {
	return db.writeTx(ctx, "remove subscription", func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, deleteSubscriptionByID, projectID, id); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, deleteWebSubCursor, projectID, id)
		return err
	})
}

// SetSubscriptionState sets a subscription's state. Errors:
// store.ErrNotFound, store.ErrUnavailable.
func (db *DB) SetSubscriptionState(ctx context.Context, projectID, id, state string) error {
	if state != store.SubscriptionActive && state != store.SubscriptionFailing {
		return fmt.Errorf("set subscription state: %q is not a subscription state", state)
	}
	res, err := db.w.ExecContext(ctx, setSubscriptionState, state, projectID, id)
	if err != nil {
		return mapErr("set subscription state", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return mapErr("set subscription state", err)
	} else if n == 0 {
		return fmt.Errorf("set subscription state: %w", store.ErrNotFound)
	}
	return nil
}

// Subscription returns one subscription, expired or not. Errors:
// store.ErrNotFound, store.ErrUnavailable.
func (db *DB) Subscription(ctx context.Context, projectID, id string) (store.Subscription, error) {
	s, err := scanSubscription(db.rd.QueryRowContext(ctx, selectSubscription, projectID, id))
	return s, mapErr("subscription", err)
}

// Subscriptions returns the project's subscriptions whose lease has not
// ended by the database clock, sorted by id. Errors: store.ErrUnavailable.
func (db *DB) Subscriptions(ctx context.Context, projectID string) ([]store.Subscription, error) {
	return listRows(ctx, db, "subscriptions", scanSubscription, selectSubscriptions, projectID)
}

// SubscribedProjects returns the projects with a live subscription, sorted.
// Errors: store.ErrUnavailable.
func (db *DB) SubscribedProjects(ctx context.Context) ([]string, error) {
	return listRows(ctx, db, "subscribed projects", func(row rowScanner) (id string, err error) {
		return id, row.Scan(&id)
	}, selectSubscribedProjects)
}
