package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/acrelay/acrelay/store"
)

// Handoff contracts (store.Handoffs, spec/handoff-contract-1.md): a head
// row per contract in handoffs (current version, state, assignee) and
// append-only rows in handoff_versions, written in one transaction so the
// head always names the highest stored version.
const (
	selectHandoffByKey = `SELECT h.handoff_id, v.contract FROM handoffs h
		JOIN handoff_versions v ON v.project_id = h.project_id AND v.handoff_id = h.handoff_id AND v.version = 1
		WHERE h.project_id = ? AND h.idempotency_key = ?`

	handoffExists = `SELECT 1 FROM handoffs WHERE project_id = ? AND handoff_id = ?`

	insertHandoff = `INSERT INTO handoffs (project_id, handoff_id, idempotency_key, current_version, state, assignee_id, created_at)
		VALUES (?, ?, ?, 1, ?, ?, ` + nowMS + `) RETURNING created_at`

	// insertFirstHandoffVersion reuses the head's created_at, so a contract's
	// list position and its version 1 carry one time.
	insertFirstHandoffVersion = `INSERT INTO handoff_versions (project_id, handoff_id, version, contract, state, assignee_id, created_at)
		VALUES (?, ?, 1, ?, ?, ?, ?)`

	insertHandoffVersion = `INSERT INTO handoff_versions (project_id, handoff_id, version, contract, state, assignee_id, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ` + nowMS + `) RETURNING created_at`

	selectHandoffHead = `SELECT current_version, idempotency_key FROM handoffs WHERE project_id = ? AND handoff_id = ?`

	updateHandoffHead = `UPDATE handoffs SET current_version = ?, state = ?, assignee_id = ?
		WHERE project_id = ? AND handoff_id = ? AND current_version = ?`

	// handoffColumns are what scanHandoff reads, in its order.
	handoffColumns = `h.project_id, h.handoff_id, h.idempotency_key, v.version, v.contract, v.state, v.assignee_id, v.created_at`

	selectHandoffCurrent = `SELECT ` + handoffColumns + ` FROM handoffs h
		JOIN handoff_versions v ON v.project_id = h.project_id AND v.handoff_id = h.handoff_id AND v.version = h.current_version
		WHERE h.project_id = ? AND h.handoff_id = ?`

	selectHandoffVersions = `SELECT ` + handoffColumns + ` FROM handoffs h
		JOIN handoff_versions v ON v.project_id = h.project_id AND v.handoff_id = h.handoff_id
		WHERE h.project_id = ? AND h.handoff_id = ? AND v.version > ?
		ORDER BY v.version LIMIT ?`

	selectHandoffCursor = `SELECT created_at FROM handoffs WHERE project_id = ? AND handoff_id = ?`

	// insertHandoffRef indexes a handoff event's body.handoff_id (Append).
	insertHandoffRef = `INSERT INTO handoff_refs (project_id, handoff_id, received_seq, event_id) VALUES (?, ?, ?, ?)`

	selectHandoffRefs = `SELECT event_id FROM handoff_refs WHERE project_id = ? AND handoff_id = ?
		ORDER BY received_seq LIMIT ?`
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
	created := false
	err := db.writeTx(ctx, "create handoff", func(tx *sql.Tx) error {
		if err := mustExist(ctx, tx, projectExists, v.ProjectID); err != nil {
			return err
		}
		var id string
		var first []byte
		err := tx.QueryRowContext(ctx, selectHandoffByKey, v.ProjectID, v.IdempotencyKey).Scan(&id, &first)
		switch {
		case err == nil:
			if !bytes.Equal(first, v.Contract) {
				return store.ErrIdempotencyKeyReused
			}
			out, err = scanHandoff(tx.QueryRowContext(ctx, selectHandoffCurrent, v.ProjectID, id))
			return err
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		if err := mustExist(ctx, tx, handoffExists, v.ProjectID, v.HandoffID); err == nil {
			return store.ErrHandoffExists
		} else if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		var at string
		if err := tx.QueryRowContext(ctx, insertHandoff, v.ProjectID, v.HandoffID, v.IdempotencyKey, v.State, v.AssigneeID).Scan(&at); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, insertFirstHandoffVersion, v.ProjectID, v.HandoffID, v.Contract, v.State, v.AssigneeID, at); err != nil {
			return err
		}
		out, created = v, true
		out.Contract = bytes.Clone(v.Contract)
		out.CreatedAt = parseTime(at)
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
	err := db.writeTx(ctx, "append handoff version", func(tx *sql.Tx) error {
		var current int64
		if err := tx.QueryRowContext(ctx, selectHandoffHead, v.ProjectID, v.HandoffID).Scan(&current, &v.IdempotencyKey); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return store.ErrNotFound
			}
			return err
		}
		if v.Version != current+1 {
			return store.ErrVersionConflict
		}
		var at string
		if err := tx.QueryRowContext(ctx, insertHandoffVersion, v.ProjectID, v.HandoffID, v.Version, v.Contract, v.State, v.AssigneeID).Scan(&at); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, updateHandoffHead, v.Version, v.State, v.AssigneeID, v.ProjectID, v.HandoffID, current); err != nil {
			return err
		}
		v.Contract = bytes.Clone(v.Contract)
		v.CreatedAt = parseTime(at)
		return nil
	})
	if err != nil {
		return store.HandoffVersion{}, err
	}
	return v, nil
}

// Handoff returns the current version. Errors: store.ErrNotFound,
// store.ErrUnavailable.
func (db *DB) Handoff(ctx context.Context, projectID, handoffID string) (store.HandoffVersion, error) {
	v, err := scanHandoff(db.rd.QueryRowContext(ctx, selectHandoffCurrent, projectID, handoffID))
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
		var one int
		if err := db.rd.QueryRowContext(ctx, handoffExists, projectID, handoffID).Scan(&one); err != nil {
			return nil, false, mapErr("handoff versions", err)
		}
	}
	more := len(vs) > limit
	return vs[:min(len(vs), limit)], more, nil
}

// Handoffs pages current versions newest first. Errors: store.ErrNotFound
// (q.After unknown in the project), store.ErrUnavailable.
func (db *DB) Handoffs(ctx context.Context, q store.HandoffQuery) (store.HandoffPage, error) {
	if q.Limit < 1 || q.Limit > 200 {
		return store.HandoffPage{}, fmt.Errorf("handoffs: limit %d outside 1–200", q.Limit)
	}
	var afterAt string
	if q.After != "" {
		if err := db.rd.QueryRowContext(ctx, selectHandoffCursor, q.ProjectID, q.After).Scan(&afterAt); err != nil {
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

// handoffListQuery builds the one dynamic query of the store: the
// filters of q that are set, and the page cursor (afterAt, q.After) as a
// row-value comparison served by the handoffs_* indexes. It asks for
// Limit+1 rows so the caller can tell whether more exist.
func handoffListQuery(q store.HandoffQuery, afterAt string) (string, []any) {
	var b strings.Builder
	b.WriteString(`SELECT ` + handoffColumns + ` FROM handoffs h
		JOIN handoff_versions v ON v.project_id = h.project_id AND v.handoff_id = h.handoff_id AND v.version = h.current_version
		WHERE h.project_id = ?`)
	args := []any{q.ProjectID}
	if q.State != "" {
		b.WriteString(` AND h.state = ?`)
		args = append(args, q.State)
	}
	if q.AssigneeID != "" {
		b.WriteString(` AND h.assignee_id = ?`)
		args = append(args, q.AssigneeID)
	}
	if q.After != "" {
		b.WriteString(` AND (h.created_at, h.handoff_id) < (?, ?)`)
		args = append(args, afterAt, q.After)
	}
	b.WriteString(` ORDER BY h.created_at DESC, h.handoff_id DESC LIMIT ?`)
	args = append(args, q.Limit+1)
	return b.String(), args
}

// HandoffEvents lists the ids of handoff events naming handoffID. Errors:
// store.ErrUnavailable.
func (db *DB) HandoffEvents(ctx context.Context, projectID, handoffID string) ([]string, bool, error) {
	rows, err := db.rd.QueryContext(ctx, selectHandoffRefs, projectID, handoffID, store.MaxHandoffEvents+1)
	if err != nil {
		return nil, false, mapErr("handoff events", err)
	}
	defer rows.Close()
	ids := []string{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, false, mapErr("handoff events", err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, false, mapErr("handoff events", err)
	}
	return ids[:min(len(ids), store.MaxHandoffEvents)], len(ids) > store.MaxHandoffEvents, nil
}

// indexHandoffRef records a new handoff event's body.handoff_id inside
// its append (called by appendTx); the contract need not exist.
func indexHandoffRef(t *txn, projectID, handoffID string, seq int64, eventID string) error {
	_, err := t.exec(insertHandoffRef, projectID, handoffID, seq, eventID)
	return err
}

func (db *DB) queryHandoffs(ctx context.Context, query string, args ...any) ([]store.HandoffVersion, error) {
	rows, err := db.rd.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var vs []store.HandoffVersion
	for rows.Next() {
		v, err := scanHandoff(rows)
		if err != nil {
			return nil, err
		}
		vs = append(vs, v)
	}
	return vs, rows.Err()
}

func scanHandoff(s scanner) (store.HandoffVersion, error) {
	var v store.HandoffVersion
	var at string
	if err := s.Scan(&v.ProjectID, &v.HandoffID, &v.IdempotencyKey, &v.Version, &v.Contract, &v.State, &v.AssigneeID, &at); err != nil {
		return store.HandoffVersion{}, err
	}
	v.CreatedAt = parseTime(at)
	return v, nil
}
