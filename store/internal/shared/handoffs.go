package shared

import (
	"bytes"
	"context"
	"database/sql"
	"errors"

	"github.com/acrelay/acrelay/store"
)

// HandoffSQL is one dialect's statements for the handoff contracts
// (store.Handoffs, spec/handoff-contract-1.md): a head row per contract in
// handoffs and append-only rows in handoff_versions.
type HandoffSQL struct {
	// ByKey (project, idempotency key) → handoff_id, version 1's contract.
	ByKey string
	// Exists (project, handoff) is a SELECT 1 ….
	Exists string
	// Insert (project, handoff, key, state, assignee) inserts the head at
	// version 1 RETURNING created_at.
	Insert string
	// InsertFirst (project, handoff, contract, state, assignee, created_at)
	// inserts version 1 with the head's time.
	InsertFirst string
	// InsertVersion (project, handoff, version, contract, state, assignee)
	// RETURNING created_at.
	InsertVersion string
	// Head (project, handoff) → current_version, idempotency_key.
	Head string
	// UpdateHead (version, state, assignee, project, handoff, previous version).
	UpdateHead string
	// Current (project, handoff) and Versions (project, handoff, after
	// version, limit) select handoffColumns: project, handoff, key,
	// version, contract, state, assignee, created_at.
	Current, Versions string
	// Cursor (project, handoff) → the head's created_at.
	Cursor string
	// Refs (project, handoff, limit) → event ids in receipt order.
	Refs string
	// List builds the list query of q's filters, the page cursor (afterAt
	// as Cursor returned it, q.After) and q.Limit+1 rows.
	List func(q store.HandoffQuery, afterAt any) (string, []any)
}

// Handoffs is store.Handoffs over one dialect's SQL.
type Handoffs struct {
	Engine
	SQL *HandoffSQL
}

// Create stores version 1 of a new contract in tx, or answers an
// idempotent replay with the current version (created false). The
// dialect has checked the project exists. Errors:
// store.ErrIdempotencyKeyReused, store.ErrHandoffExists, the driver's.
func (h Handoffs) Create(ctx context.Context, tx Querier, v store.HandoffVersion) (store.HandoffVersion, bool, error) {
	var id string
	var first []byte
	err := tx.QueryRow(ctx, h.SQL.ByKey, v.ProjectID, v.IdempotencyKey).Scan(&id, &first)
	switch {
	case err == nil:
		if !bytes.Equal(first, v.Contract) {
			return store.HandoffVersion{}, false, store.ErrIdempotencyKeyReused
		}
		out, err := scanHandoff(tx.QueryRow(ctx, h.SQL.Current, v.ProjectID, id))
		return out, false, err
	case !errors.Is(err, sql.ErrNoRows):
		return store.HandoffVersion{}, false, err
	}
	if ok, err := Exists(ctx, tx, h.SQL.Exists, v.ProjectID, v.HandoffID); err != nil {
		return store.HandoffVersion{}, false, err
	} else if ok {
		return store.HandoffVersion{}, false, store.ErrHandoffExists
	}
	var at any
	if err := tx.QueryRow(ctx, h.SQL.Insert, v.ProjectID, v.HandoffID, v.IdempotencyKey, v.State, v.AssigneeID).Scan(&at); err != nil {
		return store.HandoffVersion{}, false, err
	}
	if _, err := tx.Exec(ctx, h.SQL.InsertFirst, v.ProjectID, v.HandoffID, v.Contract, v.State, v.AssigneeID, at); err != nil {
		return store.HandoffVersion{}, false, err
	}
	v.Contract = bytes.Clone(v.Contract)
	v.CreatedAt = TimeOf(at)
	return v, true, nil
}

// AppendVersion stores version v.Version in tx if the head is at the
// version before it. Errors: store.ErrVersionConflict,
// store.ErrNotFound (no such contract), the driver's.
func (h Handoffs) AppendVersion(ctx context.Context, tx Querier, v store.HandoffVersion) (store.HandoffVersion, error) {
	var current int64
	if err := tx.QueryRow(ctx, h.SQL.Head, v.ProjectID, v.HandoffID).Scan(&current, &v.IdempotencyKey); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return store.HandoffVersion{}, store.ErrNotFound
		}
		return store.HandoffVersion{}, err
	}
	if v.Version != current+1 {
		return store.HandoffVersion{}, store.ErrVersionConflict
	}
	var at Time
	if err := tx.QueryRow(ctx, h.SQL.InsertVersion, v.ProjectID, v.HandoffID, v.Version, v.Contract, v.State, v.AssigneeID).Scan(&at); err != nil {
		return store.HandoffVersion{}, err
	}
	if _, err := tx.Exec(ctx, h.SQL.UpdateHead, v.Version, v.State, v.AssigneeID, v.ProjectID, v.HandoffID, current); err != nil {
		return store.HandoffVersion{}, err
	}
	v.Contract = bytes.Clone(v.Contract)
	v.CreatedAt = at.T
	return v, nil
}

// Handoff returns the current version. Errors: store.ErrNotFound,
// store.ErrUnavailable.
func (h Handoffs) Handoff(ctx context.Context, projectID, handoffID string) (store.HandoffVersion, error) {
	v, err := scanHandoff(h.Read.QueryRow(ctx, h.SQL.Current, projectID, handoffID))
	return v, h.MapErr("handoff", err)
}

// Versions pages one contract's versions in ascending order. Errors:
// store.ErrNotFound, store.ErrUnavailable.
func (h Handoffs) Versions(ctx context.Context, projectID, handoffID string, afterVersion int64, limit int) ([]store.HandoffVersion, bool, error) {
	const op = "handoff versions"
	if err := CheckLimit(op, limit, 200); err != nil {
		return nil, false, err
	}
	vs, err := Collect(ctx, h.Read, scanHandoff, h.SQL.Versions, projectID, handoffID, afterVersion, limit+1)
	if err != nil {
		return nil, false, h.MapErr(op, err)
	}
	if len(vs) == 0 {
		if err := MustExist(ctx, h.Read, h.SQL.Exists, projectID, handoffID); err != nil {
			return nil, false, h.MapErr(op, err)
		}
	}
	vs, more := Page(vs, limit)
	return vs, more, nil
}

// List pages current versions newest first. Errors: store.ErrNotFound
// (q.After unknown in the project), store.ErrUnavailable.
func (h Handoffs) List(ctx context.Context, q store.HandoffQuery) (store.HandoffPage, error) {
	if err := CheckLimit("handoffs", q.Limit, 200); err != nil {
		return store.HandoffPage{}, err
	}
	var afterAt any
	if q.After != "" {
		if err := h.Read.QueryRow(ctx, h.SQL.Cursor, q.ProjectID, q.After).Scan(&afterAt); err != nil {
			return store.HandoffPage{}, h.MapErr("handoffs: after", err)
		}
	}
	query, args := h.SQL.List(q, afterAt)
	vs, err := Collect(ctx, h.Read, scanHandoff, query, args...)
	if err != nil {
		return store.HandoffPage{}, h.MapErr("handoffs", err)
	}
	vs, more := Page(vs, q.Limit)
	return store.HandoffPage{Versions: vs, HasMore: more}, nil
}

// Events lists the ids of handoff events naming handoffID, at most
// store.MaxHandoffEvents, and whether there are more. Errors:
// store.ErrUnavailable.
func (h Handoffs) Events(ctx context.Context, projectID, handoffID string) ([]string, bool, error) {
	ids, err := Collect(ctx, h.Read, ScanString,
		h.SQL.Refs, projectID, handoffID, store.MaxHandoffEvents+1)
	if err != nil {
		return nil, false, h.MapErr("handoff events", err)
	}
	if ids == nil {
		ids = []string{}
	}
	ids, more := Page(ids, store.MaxHandoffEvents)
	return ids, more, nil
}

func scanHandoff(r Row) (store.HandoffVersion, error) {
	var v store.HandoffVersion
	var at Time
	if err := r.Scan(&v.ProjectID, &v.HandoffID, &v.IdempotencyKey, &v.Version, &v.Contract, &v.State, &v.AssigneeID, &at); err != nil {
		return store.HandoffVersion{}, err
	}
	v.CreatedAt = at.T
	return v, nil
}
