package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acrelay/acrelay/store"
)

// Handoff contracts (store.Handoffs, spec/handoff-contract-1.md): a head
// row per contract in handoffs and append-only rows in handoff_versions,
// written in one transaction under the project's stream lock, so two
// writers of one project never race (the second sees the first's commit).
const (
	selectHandoffByKey = `SELECT h.handoff_id, v.contract FROM handoffs h
		JOIN handoff_versions v ON v.project_id = h.project_id AND v.handoff_id = h.handoff_id AND v.version = 1
		WHERE h.project_id = $1 AND h.idempotency_key = $2`

	handoffExists = `SELECT EXISTS (SELECT 1 FROM handoffs WHERE project_id = $1 AND handoff_id = $2)`

	insertHandoff = `INSERT INTO handoffs (project_id, handoff_id, idempotency_key, current_version, state, assignee_id, created_at)
		VALUES ($1, $2, $3, 1, $4, $5, ` + nowMS + `) RETURNING created_at`

	// insertFirstVersion stores version 1 with the head's created_at ($6):
	// version 1's time is the contract's creation time.
	insertFirstVersion = `INSERT INTO handoff_versions (project_id, handoff_id, version, contract, state, assignee_id, created_at)
		VALUES ($1, $2, 1, $3, $4, $5, $6)`

	insertHandoffVersion = `INSERT INTO handoff_versions (project_id, handoff_id, version, contract, state, assignee_id, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, ` + nowMS + `) RETURNING created_at`

	selectHandoffHead = `SELECT current_version, idempotency_key FROM handoffs WHERE project_id = $1 AND handoff_id = $2`

	updateHandoffHead = `UPDATE handoffs SET current_version = $1, state = $2, assignee_id = $3
		WHERE project_id = $4 AND handoff_id = $5 AND current_version = $6`

	handoffColumns = `h.project_id, h.handoff_id, h.idempotency_key, v.version, v.contract, v.state, v.assignee_id, v.created_at`

	selectHandoffCurrent = `SELECT ` + handoffColumns + ` FROM handoffs h
		JOIN handoff_versions v ON v.project_id = h.project_id AND v.handoff_id = h.handoff_id AND v.version = h.current_version
		WHERE h.project_id = $1 AND h.handoff_id = $2`

	selectHandoffVersions = `SELECT ` + handoffColumns + ` FROM handoffs h
		JOIN handoff_versions v ON v.project_id = h.project_id AND v.handoff_id = h.handoff_id
		WHERE h.project_id = $1 AND h.handoff_id = $2 AND v.version > $3
		ORDER BY v.version LIMIT $4`

	selectHandoffCursor = `SELECT created_at FROM handoffs WHERE project_id = $1 AND handoff_id = $2`

	// insertHandoffRef indexes a handoff event's body.handoff_id; queued
	// in Append's batch right after the event row, whose seq it reads.
	insertHandoffRef = `INSERT INTO handoff_refs (project_id, handoff_id, received_seq, event_id)
		SELECT project_id, $2, received_seq, event_id FROM events WHERE project_id = $1 AND event_id = $3`

	selectHandoffRefs = `SELECT event_id FROM handoff_refs WHERE project_id = $1 AND handoff_id = $2
		ORDER BY received_seq LIMIT $3`
)

// CreateHandoff stores version 1 of a new contract, or answers an
// idempotent replay with the current version. See store.Handoffs. Errors:
// store.ErrIdempotencyKeyReused, store.ErrHandoffExists,
// store.ErrNotFound (unknown project), store.ErrUnavailable.
func (db *DB) CreateHandoff(ctx context.Context, v store.HandoffVersion) (store.HandoffVersion, bool, error) {
	if v.Version != 1 {
		return store.HandoffVersion{}, false, fmt.Errorf("create handoff: version %d, want 1", v.Version)
	}
	var out store.HandoffVersion
	var created bool
	err := db.inTx(ctx, "create handoff", readCommitted, func(tx pgx.Tx) error {
		created = false
		if err := lockStream(ctx, tx, v.ProjectID); err != nil {
			return err
		}
		var exists bool
		if err := tx.QueryRow(ctx, projectExists, v.ProjectID).Scan(&exists); err != nil {
			return err
		}
		if !exists {
			return store.ErrNotFound
		}
		var id string
		var first []byte
		err := tx.QueryRow(ctx, selectHandoffByKey, v.ProjectID, v.IdempotencyKey).Scan(&id, &first)
		switch {
		case err == nil:
			if !bytes.Equal(first, v.Contract) {
				return store.ErrIdempotencyKeyReused
			}
			out, err = scanHandoff(tx.QueryRow(ctx, selectHandoffCurrent, v.ProjectID, id))
			return err
		case !errors.Is(err, pgx.ErrNoRows):
			return err
		}
		if err := tx.QueryRow(ctx, handoffExists, v.ProjectID, v.HandoffID).Scan(&exists); err != nil {
			return err
		}
		if exists {
			return store.ErrHandoffExists
		}
		var at time.Time
		if err := tx.QueryRow(ctx, insertHandoff, v.ProjectID, v.HandoffID, v.IdempotencyKey, v.State, v.AssigneeID).Scan(&at); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, insertFirstVersion, v.ProjectID, v.HandoffID, v.Contract, v.State, v.AssigneeID, at); err != nil {
			return err
		}
		out, created = v, true
		out.Contract = bytes.Clone(v.Contract)
		out.CreatedAt = utc(at)
		return nil
	})
	if err != nil {
		return store.HandoffVersion{}, false, err
	}
	return out, created, nil
}

// AppendHandoffVersion stores the next version. See store.Handoffs.
// Errors: store.ErrVersionConflict, store.ErrNotFound, store.ErrUnavailable.
func (db *DB) AppendHandoffVersion(ctx context.Context, v store.HandoffVersion) (store.HandoffVersion, error) {
	out := v
	err := db.inTx(ctx, "append handoff version", readCommitted, func(tx pgx.Tx) error {
		if err := lockStream(ctx, tx, v.ProjectID); err != nil {
			return err
		}
		var current int64
		if err := tx.QueryRow(ctx, selectHandoffHead, v.ProjectID, v.HandoffID).Scan(&current, &out.IdempotencyKey); err != nil {
			return err // pgx.ErrNoRows maps to store.ErrNotFound
		}
		if v.Version != current+1 {
			return store.ErrVersionConflict
		}
		var at time.Time
		if err := tx.QueryRow(ctx, insertHandoffVersion, v.ProjectID, v.HandoffID, v.Version, v.Contract, v.State, v.AssigneeID).Scan(&at); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, updateHandoffHead, v.Version, v.State, v.AssigneeID, v.ProjectID, v.HandoffID, current); err != nil {
			return err
		}
		out.Contract = bytes.Clone(v.Contract)
		out.CreatedAt = utc(at)
		return nil
	})
	if err != nil {
		return store.HandoffVersion{}, err
	}
	return out, nil
}

// Handoff returns the current version. Errors: store.ErrNotFound,
// store.ErrUnavailable.
func (db *DB) Handoff(ctx context.Context, projectID, handoffID string) (store.HandoffVersion, error) {
	v, err := scanHandoff(db.pool.QueryRow(ctx, selectHandoffCurrent, projectID, handoffID))
	return v, mapErr("handoff", err)
}

// HandoffVersions pages one contract's versions in ascending order.
// Errors: store.ErrNotFound, store.ErrUnavailable.
func (db *DB) HandoffVersions(ctx context.Context, projectID, handoffID string, afterVersion int64, limit int) ([]store.HandoffVersion, bool, error) {
	if limit < 1 || limit > 200 {
		return nil, false, fmt.Errorf("handoff versions: limit %d outside 1–200", limit)
	}
	vs, err := db.queryHandoffs(ctx, selectHandoffVersions, projectID, handoffID, afterVersion, limit+1)
	if err != nil {
		return nil, false, mapErr("handoff versions", err)
	}
	if len(vs) == 0 {
		var exists bool
		if err := db.pool.QueryRow(ctx, handoffExists, projectID, handoffID).Scan(&exists); err != nil {
			return nil, false, mapErr("handoff versions", err)
		}
		if !exists {
			return nil, false, fmt.Errorf("handoff versions: %w", store.ErrNotFound)
		}
	}
	return vs[:min(len(vs), limit)], len(vs) > limit, nil
}

// Handoffs pages current versions newest first. Errors: store.ErrNotFound
// (q.After unknown in the project), store.ErrUnavailable.
func (db *DB) Handoffs(ctx context.Context, q store.HandoffQuery) (store.HandoffPage, error) {
	if q.Limit < 1 || q.Limit > 200 {
		return store.HandoffPage{}, fmt.Errorf("handoffs: limit %d outside 1–200", q.Limit)
	}
	var afterAt time.Time
	if q.After != "" {
		if err := db.pool.QueryRow(ctx, selectHandoffCursor, q.ProjectID, q.After).Scan(&afterAt); err != nil {
			return store.HandoffPage{}, mapErr("handoffs: after", err)
		}
	}
	query, args := handoffListQuery(q, afterAt)
	vs, err := db.queryHandoffs(ctx, query, args...)
	if err != nil {
		return store.HandoffPage{}, mapErr("handoffs", err)
	}
	return store.HandoffPage{Versions: vs[:min(len(vs), q.Limit)], HasMore: len(vs) > q.Limit}, nil
}

// handoffListQuery builds the one dynamic query of the store: the filters
// of q that are set, and the page cursor (afterAt, q.After) as a row-value
// comparison served by the handoffs_* indexes, asking for Limit+1 rows.
func handoffListQuery(q store.HandoffQuery, afterAt time.Time) (string, []any) {
	var b strings.Builder
	b.WriteString(`SELECT ` + handoffColumns + ` FROM handoffs h
		JOIN handoff_versions v ON v.project_id = h.project_id AND v.handoff_id = h.handoff_id AND v.version = h.current_version
		WHERE h.project_id = $1`)
	args := []any{q.ProjectID}
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if q.State != "" {
		b.WriteString(` AND h.state = ` + arg(q.State))
	}
	if q.AssigneeID != "" {
		b.WriteString(` AND h.assignee_id = ` + arg(q.AssigneeID))
	}
	if q.After != "" {
		at := arg(afterAt)
		b.WriteString(` AND (h.created_at, h.handoff_id) < (` + at + `, ` + arg(q.After) + `)`)
	}
	b.WriteString(` ORDER BY h.created_at DESC, h.handoff_id DESC LIMIT ` + arg(q.Limit+1))
	return b.String(), args
}

// HandoffEvents lists the ids of handoff events naming handoffID. Errors:
// store.ErrUnavailable.
func (db *DB) HandoffEvents(ctx context.Context, projectID, handoffID string) ([]string, bool, error) {
	rows, err := db.pool.Query(ctx, selectHandoffRefs, projectID, handoffID, store.MaxHandoffEvents+1)
	if err != nil {
		return nil, false, mapErr("handoff events", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, false, mapErr("handoff events", err)
	}
	if ids == nil {
		ids = []string{}
	}
	return ids[:min(len(ids), store.MaxHandoffEvents)], len(ids) > store.MaxHandoffEvents, nil
}

func (db *DB) queryHandoffs(ctx context.Context, query string, args ...any) ([]store.HandoffVersion, error) {
	rows, err := db.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.HandoffVersion, error) {
		return scanHandoff(row)
	})
}

func scanHandoff(row pgx.Row) (store.HandoffVersion, error) {
	var v store.HandoffVersion
	if err := row.Scan(&v.ProjectID, &v.HandoffID, &v.IdempotencyKey, &v.Version, &v.Contract, &v.State, &v.AssigneeID, &v.CreatedAt); err != nil {
		return store.HandoffVersion{}, err
	}
	v.CreatedAt = utc(v.CreatedAt)
	return v, nil
}
