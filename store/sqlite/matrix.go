package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/acrelay/acrelay/store"
)

// The Matrix courier's state (store.Matrix; migration 0010_matrix.sql).
const (
	insertMatrixBinding = `INSERT INTO matrix_bindings (binding_id, project_id, repository_id, room_id, created_at)
		SELECT ?1, ?2, ?3, ?4, ` + nowMS + ` WHERE EXISTS (SELECT 1 FROM projects WHERE id = ?2)
		RETURNING created_at`
	matrixBindingColumns     = `binding_id, project_id, repository_id, room_id, created_at`
	selectMatrixBindings     = `SELECT ` + matrixBindingColumns + ` FROM matrix_bindings WHERE project_id = ? ORDER BY binding_id`
	selectMatrixBinding      = `SELECT ` + matrixBindingColumns + ` FROM matrix_bindings WHERE project_id = ? AND binding_id = ?`
	selectMatrixRoomBindings = `SELECT ` + matrixBindingColumns + ` FROM matrix_bindings WHERE room_id = ? ORDER BY binding_id`
	deleteMatrixBinding      = `DELETE FROM matrix_bindings WHERE project_id = ? AND binding_id = ?`
	selectMatrixProjects     = `SELECT DISTINCT project_id FROM matrix_bindings ORDER BY project_id`

	insertMatrixSent = `INSERT INTO matrix_sent (room_id, event_id, part, matrix_event_id, sent_at)
		VALUES (?, ?, ?, ?, ` + nowMS + `) ON CONFLICT DO NOTHING`
	selectMatrixSent = `SELECT room_id, event_id, part, matrix_event_id FROM matrix_sent
		WHERE room_id = ?1 AND event_id IN (SELECT value FROM json_each(?2)) ORDER BY event_id, part`

	insertMatrixSubmission = `INSERT INTO matrix_submissions (matrix_event_id, room_id, sender, event, received_at)
		VALUES (?, ?, ?, ?, ` + nowMS + `) ON CONFLICT DO NOTHING`
	upsertMatrixSync = `INSERT INTO matrix_sync (sync_key, since) VALUES (?, ?)
		ON CONFLICT (sync_key) DO UPDATE SET since = excluded.since`
	selectMatrixSync        = `SELECT since FROM matrix_sync WHERE sync_key = ?`
	selectMatrixSubmissions = `SELECT matrix_event_id, room_id, sender, event, outcome, received_at
		FROM matrix_submissions WHERE done = 0 ORDER BY received_at, matrix_event_id LIMIT ?`
	setMatrixOutcome         = `UPDATE matrix_submissions SET outcome = ?2 WHERE matrix_event_id = ?1 AND outcome IS NULL`
	selectMatrixOutcome      = `SELECT outcome FROM matrix_submissions WHERE matrix_event_id = ?`
	completeMatrixSubmission = `UPDATE matrix_submissions SET done = 1, reply_event_id = ?2 WHERE matrix_event_id = ?1`
)

// CreateMatrixBinding stores b. See store.Matrix.
func (db *DB) CreateMatrixBinding(ctx context.Context, b store.MatrixBinding) (store.MatrixBinding, error) {
	var at string
	err := db.writeTx(ctx, "create matrix binding", func(tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, insertMatrixBinding, b.ID, b.ProjectID, b.RepositoryID, b.RoomID).Scan(&at)
	})
	if err != nil {
		return store.MatrixBinding{}, err
	}
	b.CreatedAt = parseTime(at)
	return b, nil
}

func scanMatrixBindings(rows *sql.Rows, err error) ([]store.MatrixBinding, error) {
	if err != nil {
		return nil, mapErr("matrix bindings", err)
	}
	defer rows.Close()
	var out []store.MatrixBinding
	for rows.Next() {
		var b store.MatrixBinding
		var at string
		if err := rows.Scan(&b.ID, &b.ProjectID, &b.RepositoryID, &b.RoomID, &at); err != nil {
			return nil, mapErr("matrix bindings", err)
		}
		b.CreatedAt = parseTime(at)
		out = append(out, b)
	}
	return out, mapErr("matrix bindings", rows.Err())
}

// MatrixBindings lists a project's bindings. See store.Matrix.
func (db *DB) MatrixBindings(ctx context.Context, projectID string) ([]store.MatrixBinding, error) {
	return scanMatrixBindings(db.rd.QueryContext(ctx, selectMatrixBindings, projectID))
}

// MatrixRoomBindings lists a room's bindings. See store.Matrix.
func (db *DB) MatrixRoomBindings(ctx context.Context, roomID string) ([]store.MatrixBinding, error) {
	return scanMatrixBindings(db.rd.QueryContext(ctx, selectMatrixRoomBindings, roomID))
}

// MatrixBinding returns one binding. Errors: store.ErrNotFound.
func (db *DB) MatrixBinding(ctx context.Context, projectID, id string) (store.MatrixBinding, error) {
	bs, err := scanMatrixBindings(db.rd.QueryContext(ctx, selectMatrixBinding, projectID, id))
	if err != nil {
		return store.MatrixBinding{}, err
	}
	if len(bs) == 0 {
		return store.MatrixBinding{}, fmt.Errorf("matrix binding: %w", store.ErrNotFound)
	}
	return bs[0], nil
}

// DeleteMatrixBinding removes a binding. Errors: store.ErrNotFound.
func (db *DB) DeleteMatrixBinding(ctx context.Context, projectID, id string) error {
	res, err := db.w.ExecContext(ctx, deleteMatrixBinding, projectID, id)
	if err != nil {
		return mapErr("delete matrix binding", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("delete matrix binding: %w", store.ErrNotFound)
	}
	return nil
}

// MatrixBoundProjects lists the projects with bindings.
func (db *DB) MatrixBoundProjects(ctx context.Context) ([]string, error) {
	rows, err := db.rd.QueryContext(ctx, selectMatrixProjects)
	if err != nil {
		return nil, mapErr("matrix projects", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var p string
		if err := rows.Scan(&p); err != nil {
			return nil, mapErr("matrix projects", err)
		}
		out = append(out, p)
	}
	return out, mapErr("matrix projects", rows.Err())
}

// RecordMatrixSent stores s, keeping an earlier record. See store.Matrix.
func (db *DB) RecordMatrixSent(ctx context.Context, s store.MatrixSent) error {
	_, err := db.w.ExecContext(ctx, insertMatrixSent, s.RoomID, s.EventID, s.Part, s.MatrixEventID)
	return mapErr("record matrix sent", err)
}

// MatrixSentParts returns the stored parts of eventIDs. See store.Matrix.
func (db *DB) MatrixSentParts(ctx context.Context, roomID string, eventIDs []string) ([]store.MatrixSent, error) {
	if len(eventIDs) == 0 {
		return nil, nil
	}
	rows, err := db.rd.QueryContext(ctx, selectMatrixSent, roomID, jsonIDs(eventIDs))
	if err != nil {
		return nil, mapErr("matrix sent", err)
	}
	defer rows.Close()
	var out []store.MatrixSent
	for rows.Next() {
		var s store.MatrixSent
		if err := rows.Scan(&s.RoomID, &s.EventID, &s.Part, &s.MatrixEventID); err != nil {
			return nil, mapErr("matrix sent", err)
		}
		out = append(out, s)
	}
	return out, mapErr("matrix sent", rows.Err())
}

// EnqueueMatrixSubmissions stores new submissions and the sync token in
// one transaction. See store.Matrix.
func (db *DB) EnqueueMatrixSubmissions(ctx context.Context, subs []store.MatrixSubmission, syncKey, since string) error {
	if len(subs) == 0 && syncKey == "" {
		return nil
	}
	return db.writeTx(ctx, "enqueue matrix submissions", func(tx *sql.Tx) error {
		for _, s := range subs {
			if _, err := tx.ExecContext(ctx, insertMatrixSubmission, s.MatrixEventID, s.RoomID, s.Sender, s.Event); err != nil {
				return err
			}
		}
		if syncKey != "" {
			if _, err := tx.ExecContext(ctx, upsertMatrixSync, syncKey, since); err != nil {
				return err
			}
		}
		return nil
	})
}

// MatrixSyncToken returns the stored sync token ("" when none).
func (db *DB) MatrixSyncToken(ctx context.Context, syncKey string) (string, error) {
	var since string
	err := db.rd.QueryRowContext(ctx, selectMatrixSync, syncKey).Scan(&since)
	if err == sql.ErrNoRows {
		return "", nil
	}
	return since, mapErr("matrix sync token", err)
}

// PendingMatrixSubmissions lists unanswered submissions, oldest first.
func (db *DB) PendingMatrixSubmissions(ctx context.Context, limit int) ([]store.MatrixSubmission, error) {
	rows, err := db.rd.QueryContext(ctx, selectMatrixSubmissions, limit)
	if err != nil {
		return nil, mapErr("pending matrix submissions", err)
	}
	defer rows.Close()
	var out []store.MatrixSubmission
	for rows.Next() {
		var s store.MatrixSubmission
		var at string
		if err := rows.Scan(&s.MatrixEventID, &s.RoomID, &s.Sender, &s.Event, &s.Outcome, &at); err != nil {
			return nil, mapErr("pending matrix submissions", err)
		}
		s.ReceivedAt = parseTime(at)
		out = append(out, s)
	}
	return out, mapErr("pending matrix submissions", rows.Err())
}

// SetMatrixSubmissionOutcome stores an outcome unless one is stored and
// returns the stored one. Errors: store.ErrNotFound.
func (db *DB) SetMatrixSubmissionOutcome(ctx context.Context, matrixEventID string, outcome []byte) ([]byte, error) {
	var got []byte
	err := db.writeTx(ctx, "matrix submission outcome", func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, setMatrixOutcome, matrixEventID, outcome); err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, selectMatrixOutcome, matrixEventID).Scan(&got)
	})
	return got, err
}

// CompleteMatrixSubmission marks a submission answered. Errors:
// store.ErrNotFound.
func (db *DB) CompleteMatrixSubmission(ctx context.Context, matrixEventID, replyEventID string) error {
	res, err := db.w.ExecContext(ctx, completeMatrixSubmission, matrixEventID, replyEventID)
	if err != nil {
		return mapErr("complete matrix submission", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("complete matrix submission: %w", store.ErrNotFound)
	}
	return nil
}
