package postgres

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/internal/shared"
)

// Handoff contracts (store.Handoffs, spec/handoff-contract-1.md): a head
// row per contract in handoffs and append-only rows in handoff_versions,
// written in one transaction under the project's stream lock, so two
// writers of one project never race (the second sees the first's commit).
const (
	selectHandoffByKey = `SELECT h.handoff_id, v.contract FROM handoffs h
		JOIN handoff_versions v ON v.project_id = h.project_id AND v.handoff_id = h.handoff_id AND v.version = 1
		WHERE h.project_id = $1 AND h.idempotency_key = $2`

	handoffExists = `SELECT 1 FROM handoffs WHERE project_id = $1 AND handoff_id = $2`

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

var handoffSQL = shared.HandoffSQL{
	ByKey: selectHandoffByKey, Exists: handoffExists, Insert: insertHandoff, InsertFirst: insertFirstVersion,
	InsertVersion: insertHandoffVersion, Head: selectHandoffHead, UpdateHead: updateHandoffHead,
	Current: selectHandoffCurrent, Versions: selectHandoffVersions, Cursor: selectHandoffCursor, Refs: selectHandoffRefs,
	List: handoffListQuery,
}

func (db *DB) handoffs() shared.Handoffs {
	return shared.Handoffs{Engine: db.engine(), SQL: &handoffSQL}
}

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
		var err error
		out, created, err = db.handoffs().Create(ctx, qr(tx), v)
		return err
	})
	if err != nil {
		return store.HandoffVersion{}, false, err
	}
	return out, created, nil
}

// AppendHandoffVersion stores the next version. See store.Handoffs.
// Errors: store.ErrVersionConflict, store.ErrNotFound, store.ErrUnavailable.
func (db *DB) AppendHandoffVersion(ctx context.Context, v store.HandoffVersion) (store.HandoffVersion, error) {
	var out store.HandoffVersion
	err := db.inTx(ctx, "append handoff version", readCommitted, func(tx pgx.Tx) error {
		if err := lockStream(ctx, tx, v.ProjectID); err != nil {
			return err
		}
		var err error
		out, err = db.handoffs().AppendVersion(ctx, qr(tx), v)
		return err
	})
	if err != nil {
		return store.HandoffVersion{}, err
	}
	return out, nil
}

// Handoff returns the current version. Errors: store.ErrNotFound,
// store.ErrUnavailable.
func (db *DB) Handoff(ctx context.Context, projectID, handoffID string) (store.HandoffVersion, error) {
	return db.handoffs().Handoff(ctx, projectID, handoffID)
}

// HandoffVersions pages one contract's versions in ascending order.
// Errors: store.ErrNotFound, store.ErrUnavailable.
func (db *DB) HandoffVersions(ctx context.Context, projectID, handoffID string, afterVersion int64, limit int) ([]store.HandoffVersion, bool, error) {
	return db.handoffs().Versions(ctx, projectID, handoffID, afterVersion, limit)
}

// Handoffs pages current versions newest first. Errors: store.ErrNotFound
// (q.After unknown in the project), store.ErrUnavailable.
func (db *DB) Handoffs(ctx context.Context, q store.HandoffQuery) (store.HandoffPage, error) {
	return db.handoffs().List(ctx, q)
}

// handoffListQuery builds the one dynamic query of the store: the filters
// of q that are set, and the page cursor (afterAt, q.After) as a row-value
// comparison served by the handoffs_* indexes, asking for Limit+1 rows.
func handoffListQuery(q store.HandoffQuery, afterAt any) (string, []any) {
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
	return db.handoffs().Events(ctx, projectID, handoffID)
}
