package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/internal/shared"
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

var handoffSQL = shared.HandoffSQL{
	ByKey: selectHandoffByKey, Exists: handoffExists, Insert: insertHandoff, InsertFirst: insertFirstHandoffVersion,
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
	err := db.writeTx(ctx, "create handoff", func(tx *sql.Tx) error {
		if err := mustExist(ctx, tx, projectExists, v.ProjectID); err != nil {
			return err
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
	err := db.writeTx(ctx, "append handoff version", func(tx *sql.Tx) error {
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

// handoffListQuery builds the one dynamic query of the store: the
// filters of q that are set, and the page cursor (afterAt, q.After) as a
// row-value comparison served by the handoffs_* indexes. It asks for
// Limit+1 rows so the caller can tell whether more exist.
func handoffListQuery(q store.HandoffQuery, afterAt any) (string, []any) {
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
	return db.handoffs().Events(ctx, projectID, handoffID)
}

// indexHandoffRef records a new handoff event's body.handoff_id inside
// its append (called by appendTx); the contract need not exist.
func indexHandoffRef(t *txn, projectID, handoffID string, seq int64, eventID string) error {
	_, err := t.exec(insertHandoffRef, projectID, handoffID, seq, eventID)
	return err
}
