package shared

import (
	"context"
	"fmt"
	"time"

	"github.com/acrelay/acrelay/store"
)

// WebSubSQL is one dialect's statements for the embedded hub's
// subscriptions and pending verifications (store.WebSub) and the
// relay-wide scans over them (store.WebSubScans). Subscription rows are
// subscriptionColumns (id, project, topic, repository, thread, format,
// callback, secret, token, lease_seconds, expires_at, state, created_at,
// verified_at), verification rows verificationColumns (id, project, mode,
// topic, repository, thread, format, callback, secret, token,
// lease_seconds, attempts, created_at).
type WebSubSQL struct {
	// Upsert (id, project, topic, repository, thread, format, callback,
	// secret, token, lease seconds, LeaseArgs…) creates or renews the
	// (project, topic, callback) subscription RETURNING its row.
	Upsert    string
	LeaseArgs func(seconds int64) []any
	// StartCursor (project, subscription id) puts a new subscription's
	// cursor at the project's head; DeleteCursor (project, id) removes it.
	StartCursor, DeleteCursor string
	// DeleteByKey (project, topic, callback) RETURNING id; DeleteByID
	// (project, id).
	DeleteByKey, DeleteByID string
	// SetState (state, project, id).
	SetState string
	// Select (project, id); Live (project): live rows by id;
	// SubscribedProjects: project ids with a live subscription.
	Select, Live, SubscribedProjects string
	// InsertVerification (the verification's columns up to
	// lease_seconds); Pending (limit); DeleteVerification and
	// RetryVerification (id).
	InsertVerification, Pending, DeleteVerification, RetryVerification string

	// The scans: CountStates → (state, count) of live rows; Revoked
	// (limit); ByToken (project, token); PublicProjectIDs (after, limit);
	// DeleteLapsed (before, limit).
	CountStates, Revoked, ByToken, PublicProjectIDs, DeleteLapsed string

	// Counts (project, topic, callback, callback host) → the counts of
	// store.WebSubCounts in its field order (store.WebSubLimits).
	Counts string
}

// WebSub is store.WebSub and most of store.WebSubScans over one dialect's SQL.
type WebSub struct {
	Engine
	SQL *WebSubSQL
}

// AddVerification inserts a pending verification with q (a transaction or
// Write); errors are the driver's.
func (w WebSub) AddVerification(ctx context.Context, q Querier, v store.Verification) error {
	_, err := q.Exec(ctx, w.SQL.InsertVerification, v.ID, v.ProjectID, v.Mode, v.Topic, v.RepositoryID, v.ThreadID,
		v.Format, v.Callback, nonNil(v.Secret), v.TokenID, v.LeaseSeconds)
	return err
}

// PendingVerifications returns at most limit pending verifications, oldest
// first. Errors: store.ErrUnavailable.
func (w WebSub) PendingVerifications(ctx context.Context, limit int) ([]store.Verification, error) {
	return List(ctx, w.Engine, "pending verifications", scanVerification, w.SQL.Pending, limit)
}

// DeleteVerification removes a pending verification; an unknown id is not
// an error. Errors: store.ErrUnavailable.
func (w WebSub) DeleteVerification(ctx context.Context, id string) error {
	_, err := w.ExecN(ctx, "delete verification", w.SQL.DeleteVerification, id)
	return err
}

// RetryVerification counts a failed attempt. Errors: store.ErrUnavailable.
func (w WebSub) RetryVerification(ctx context.Context, id string) error {
	_, err := w.ExecN(ctx, "retry verification", w.SQL.RetryVerification, id)
	return err
}

// Activate creates or renews the (project, topic, callback) subscription
// in tx, starts a new one's cursor at the project's head and deletes the
// verification v.ID. Errors are the driver's.
func (w WebSub) Activate(ctx context.Context, tx Querier, v store.Verification, newID string) (store.Subscription, error) {
	args := append([]any{newID, v.ProjectID, v.Topic, v.RepositoryID, v.ThreadID, v.Format, v.Callback,
		nonNil(v.Secret), v.TokenID, v.LeaseSeconds}, w.SQL.LeaseArgs(v.LeaseSeconds)...)
	sub, err := scanSubscription(tx.QueryRow(ctx, w.SQL.Upsert, args...))
	if err != nil {
		return store.Subscription{}, err
	}
	if _, err := tx.Exec(ctx, w.SQL.StartCursor, v.ProjectID, sub.ID); err != nil {
		return store.Subscription{}, err
	}
	if _, err := tx.Exec(ctx, w.SQL.DeleteVerification, v.ID); err != nil {
		return store.Subscription{}, err
	}
	return sub, nil
}

// Delete removes the (project, topic, callback) subscription and its
// cursor, if any, and the verification verificationID (unless empty), in
// tx. Errors are the driver's.
func (w WebSub) Delete(ctx context.Context, tx Querier, projectID, topic, callback, verificationID string) error {
	ids, err := Collect(ctx, tx, ScanString, w.SQL.DeleteByKey, projectID, topic, callback)
	if err != nil {
		return err
	}
	for _, id := range ids {
		if _, err := tx.Exec(ctx, w.SQL.DeleteCursor, projectID, id); err != nil {
			return err
		}
	}
	if verificationID != "" {
		_, err = tx.Exec(ctx, w.SQL.DeleteVerification, verificationID)
	}
	return err
}

// Remove removes a subscription and its cursor by id in tx. Errors are
// the driver's.
func (w WebSub) Remove(ctx context.Context, tx Querier, projectID, id string) error {
	if _, err := tx.Exec(ctx, w.SQL.DeleteByID, projectID, id); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, w.SQL.DeleteCursor, projectID, id)
	return err
}

// SetState sets a subscription's state. Errors: store.ErrNotFound,
// store.ErrUnavailable.
func (w WebSub) SetState(ctx context.Context, projectID, id, state string) error {
	const op = "set subscription state"
	if state != store.SubscriptionActive && state != store.SubscriptionFailing {
		return fmt.Errorf("%s: %q is not a subscription state", op, state)
	}
	return w.execOne(ctx, op, w.SQL.SetState, state, projectID, id)
}

// Subscription returns one subscription, expired or not. Errors:
// store.ErrNotFound, store.ErrUnavailable.
func (w WebSub) Subscription(ctx context.Context, projectID, id string) (store.Subscription, error) {
	s, err := scanSubscription(w.Read.QueryRow(ctx, w.SQL.Select, projectID, id))
	return s, w.MapErr("subscription", err)
}

// Subscriptions returns the project's live subscriptions by id. Errors:
// store.ErrUnavailable.
func (w WebSub) Subscriptions(ctx context.Context, projectID string) ([]store.Subscription, error) {
	return List(ctx, w.Engine, "subscriptions", scanSubscription, w.SQL.Live, projectID)
}

// SubscribedProjects returns the projects with a live subscription,
// sorted. Errors: store.ErrUnavailable.
func (w WebSub) SubscribedProjects(ctx context.Context) ([]string, error) {
	return List(ctx, w.Engine, "subscribed projects", ScanString, w.SQL.SubscribedProjects)
}

// CountStates counts the live subscriptions by state. Errors:
// store.ErrUnavailable.
func (w WebSub) CountStates(ctx context.Context) (map[string]int, error) {
	type count struct {
		state string
		n     int
	}
	counts, err := List(ctx, w.Engine, "count subscription states", func(r Row) (c count, err error) {
		return c, r.Scan(&c.state, &c.n)
	}, w.SQL.CountStates)
	if err != nil {
		return nil, err
	}
	out := make(map[string]int, len(counts))
	for _, c := range counts {
		out[c.state] = c.n
	}
	return out, nil
}

// Revoked returns live subscriptions whose token is revoked or gone.
// Errors: store.ErrUnavailable.
func (w WebSub) Revoked(ctx context.Context, limit int) ([]store.Subscription, error) {
	return List(ctx, w.Engine, "revoked subscriptions", scanSubscription, w.SQL.Revoked, limit)
}

// TokenSubscriptions returns the project's live subscriptions of one
// token. Errors: store.ErrUnavailable.
func (w WebSub) TokenSubscriptions(ctx context.Context, projectID, tokenID string) ([]store.Subscription, error) {
	return List(ctx, w.Engine, "token subscriptions", scanSubscription, w.SQL.ByToken, projectID, tokenID)
}

// PublicProjectIDs pages the public projects' ids. Errors:
// store.ErrUnavailable.
func (w WebSub) PublicProjectIDs(ctx context.Context, afterID string, limit int) ([]string, error) {
	return List(ctx, w.Engine, "public project ids", ScanString, w.SQL.PublicProjectIDs, afterID, limit)
}

// DeleteLapsedVerifications deletes one batch of pending verifications
// created before before. Errors: store.ErrUnavailable.
func (w WebSub) DeleteLapsedVerifications(ctx context.Context, before time.Time, limit int) (int, error) {
	return w.ExecN(ctx, "delete lapsed verifications", w.SQL.DeleteLapsed, w.TimeArg(before), limit)
}

// Counts returns the counts the hub's caps are checked against. See
// store.WebSubLimits. Errors: store.ErrUnavailable.
func (w WebSub) Counts(ctx context.Context, projectID, topic, callback string) (store.WebSubCounts, error) {
	var c store.WebSubCounts
	err := w.Read.QueryRow(ctx, w.SQL.Counts, projectID, topic, callback, store.CallbackHost(callback)).
		Scan(&c.Subscribed, &c.Topic, &c.Project, &c.Host, &c.HostPending)
	return c, w.MapErr("count websub", err)
}

// nonNil keeps a NOT NULL BLOB/bytea column from receiving NULL.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

func scanSubscription(r Row) (store.Subscription, error) {
	var s store.Subscription
	var expires, created, verified Time
	if err := r.Scan(&s.ID, &s.ProjectID, &s.Topic, &s.RepositoryID, &s.ThreadID, &s.Format, &s.Callback,
		&s.Secret, &s.TokenID, &s.LeaseSeconds, &expires, &s.State, &created, &verified); err != nil {
		return store.Subscription{}, err
	}
	s.ExpiresAt, s.CreatedAt, s.VerifiedAt = expires.T, created.T, verified.T
	return s, nil
}

func scanVerification(r Row) (store.Verification, error) {
	var v store.Verification
	var created Time
	if err := r.Scan(&v.ID, &v.ProjectID, &v.Mode, &v.Topic, &v.RepositoryID, &v.ThreadID, &v.Format, &v.Callback,
		&v.Secret, &v.TokenID, &v.LeaseSeconds, &v.Attempts, &created); err != nil {
		return store.Verification{}, err
	}
	v.CreatedAt = created.T
	return v, nil
}
