package shared

import (
	"context"
	"fmt"
	"time"

	"github.com/acrelay/acrelay/store"
)

// PeerSubSQL is one dialect's statements for a peer link's WebSub
// subscriber state (store.PeerSubscriptions), one row per link. The state
// columns are (topic, request_id, mode, secret, requested_at, failed,
// state, verified, lease_seconds, verified_at, reason).
type PeerSubSQL struct {
	// Select (peer, project) → project, peer, the state columns.
	Select string
	// Upsert (the state columns, project, peer) inserts or replaces the
	// row of an existing link; no row for an unknown link.
	Upsert string
	// Replace (the state columns, peer, project, request id) replaces the
	// row while its request is request id.
	Replace string
}

// PeerSubs is store.PeerSubscriptions over one dialect's SQL.
type PeerSubs struct {
	Engine
	SQL *PeerSubSQL
}

func (p PeerSubs) args(s store.PeerSubscription) []any {
	var secret any
	if s.Secret != nil {
		secret = s.Secret
	}
	return []any{s.Topic, s.RequestID, s.Mode, secret, p.TimeArg(s.RequestedAt), s.Failed, s.State, s.Verified,
		int64(s.Lease / time.Second), p.NullTimeArg(s.VerifiedAt), s.Reason}
}

// Get reads a link's subscriber state. Errors: store.ErrNotFound,
// store.ErrUnavailable.
func (p PeerSubs) Get(ctx context.Context, projectID, peerID string) (store.PeerSubscription, error) {
	var s store.PeerSubscription
	var requested, verified Time
	var lease int64
	err := p.Read.QueryRow(ctx, p.SQL.Select, peerID, projectID).Scan(&s.ProjectID, &s.PeerID, &s.Topic, &s.RequestID, &s.Mode,
		&s.Secret, &requested, &s.Failed, &s.State, &s.Verified, &lease, &verified, &s.Reason)
	if err != nil {
		return store.PeerSubscription{}, p.MapErr("peer subscription", err)
	}
	s.RequestedAt, s.VerifiedAt, s.Lease = requested.T, verified.T, time.Duration(lease)*time.Second
	return s, nil
}

// Save stores a link's subscriber state. Errors: store.ErrNotFound (no
// such link), store.ErrUnavailable.
func (p PeerSubs) Save(ctx context.Context, s store.PeerSubscription) error {
	n, err := p.ExecN(ctx, "save peer subscription", p.SQL.Upsert, append(p.args(s), s.ProjectID, s.PeerID)...)
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("save peer subscription: %w", store.ErrNotFound)
	}
	return nil
}

// Replace stores a link's subscriber state while its request is
// requestID, and reports whether it did. Errors: store.ErrUnavailable.
func (p PeerSubs) Replace(ctx context.Context, s store.PeerSubscription, requestID string) (bool, error) {
	n, err := p.ExecN(ctx, "replace peer subscription", p.SQL.Replace, append(p.args(s), s.PeerID, s.ProjectID, requestID)...)
	if err != nil {
		return false, err
	}
	return n == 1, nil
}
