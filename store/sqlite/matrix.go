package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"time"

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
	selectMatrixBound = `SELECT EXISTS (SELECT 1 FROM matrix_bindings WHERE project_id = ? AND binding_id = ?)`
	selectMatrixSent  = `SELECT room_id, event_id, part, matrix_event_id FROM matrix_sent
		WHERE room_id = ?1 AND event_id IN (SELECT value FROM json_each(?2)) ORDER BY event_id, part`

	insertMatrixSubmission = `INSERT INTO matrix_submissions (matrix_event_id, room_id, sender, event, received_at, next_attempt_at)
		VALUES (?1, ?2, ?3, ?4, ` + nowMS + `, ` + nowMS + `) ON CONFLICT DO NOTHING`
	upsertMatrixSync = `INSERT INTO matrix_sync (sync_key, since) VALUES (?, ?)
		ON CONFLICT (sync_key) DO UPDATE SET since = excluded.since`
	selectMatrixSync        = `SELECT since FROM matrix_sync WHERE sync_key = ?`
	matrixSubmissionColumns = `matrix_event_id, room_id, sender, event, outcome, received_at,
		attempts, next_attempt_at, last_error, final, reply_event_id, finished_at`
	// claimMatrixSubmissions counts an attempt on the due ones and holds
	// them for ?2 (a "+S.mmm seconds" modifier) in one statement.
	claimMatrixSubmissions = `UPDATE matrix_submissions
		SET attempts = attempts + 1, next_attempt_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ?2)
		WHERE matrix_event_id IN (SELECT matrix_event_id FROM matrix_submissions
		    WHERE done = 0 AND next_attempt_at <= ` + nowMS + ` ORDER BY next_attempt_at, matrix_event_id LIMIT ?1)
		RETURNING ` + matrixSubmissionColumns
	selectMatrixSubmission = `SELECT ` + matrixSubmissionColumns + ` FROM matrix_submissions WHERE matrix_event_id = ?`
	retryMatrixSubmission  = `UPDATE matrix_submissions
		SET next_attempt_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ?2), last_error = ?3
		WHERE matrix_event_id = ?1 AND done = 0`
	giveUpMatrixSubmission = `UPDATE matrix_submissions
		SET done = 1, final = 'gave_up', last_error = ?2, finished_at = ` + nowMS + `
		WHERE matrix_event_id = ?1 AND done = 0`
	deleteFinishedMatrixSubmissions = `DELETE FROM matrix_submissions WHERE matrix_event_id IN (
		SELECT matrix_event_id FROM matrix_submissions WHERE done = 1 AND finished_at < ?1 ORDER BY finished_at LIMIT ?2)`
	setMatrixOutcome         = `UPDATE matrix_submissions SET outcome = ?2 WHERE matrix_event_id = ?1 AND outcome IS NULL`
	selectMatrixOutcome      = `SELECT outcome FROM matrix_submissions WHERE matrix_event_id = ?`
	completeMatrixSubmission = `UPDATE matrix_submissions SET done = 1, final = 'replied', reply_event_id = ?2, finished_at = ` + nowMS + `
		WHERE matrix_event_id = ?1`
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

// RecordMatrixSentBound stores s and reports whether the binding still
// exists, in one transaction. See store.Matrix.
func (db *DB) RecordMatrixSentBound(ctx context.Context, s store.MatrixSent, projectID, bindingID string) (bool, error) {
	var bound bool
	err := db.writeTx(ctx, "record matrix sent", func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, insertMatrixSent, s.RoomID, s.EventID, s.Part, s.MatrixEventID); err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, selectMatrixBound, projectID, bindingID).Scan(&bound)
	})
	return bound, err
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

// seconds is d as an SQLite date modifier ("+1.500 seconds").
func seconds(d time.Duration) string { return fmt.Sprintf("%+.3f seconds", d.Seconds()) }

func scanMatrixSubmissions(rows *sql.Rows, err error) ([]store.MatrixSubmission, error) {
	if err != nil {
		return nil, mapErr("matrix submissions", err)
	}
	defer rows.Close()
	var out []store.MatrixSubmission
	for rows.Next() {
		var s store.MatrixSubmission
		var at, next, fin string
		if err := rows.Scan(&s.MatrixEventID, &s.RoomID, &s.Sender, &s.Event, &s.Outcome, &at,
			&s.Attempts, &next, &s.LastError, &s.Final, &s.ReplyEventID, &fin); err != nil {
			return nil, mapErr("matrix submissions", err)
		}
		s.ReceivedAt, s.NextAttemptAt, s.FinishedAt = parseTime(at), parseTime(next), parseTime(fin)
		out = append(out, s)
	}
	return out, mapErr("matrix submissions", rows.Err())
}

// ClaimMatrixSubmissions takes due submissions and holds them. See
// store.Matrix.
func (db *DB) ClaimMatrixSubmissions(ctx context.Context, limit int, hold time.Duration) ([]store.MatrixSubmission, error) {
	var out []store.MatrixSubmission
	err := db.writeTx(ctx, "claim matrix submissions", func(tx *sql.Tx) error {
		var err error
		out, err = scanMatrixSubmissions(tx.QueryContext(ctx, claimMatrixSubmissions, limit, seconds(hold)))
		return err
	})
	if err != nil {
		return nil, err
	}
	sortSubmissions(out)
	return out, nil
}

// sortSubmissions orders claimed submissions as they were due (RETURNING
// keeps no order): by the time they were due, that is received_at for a
// first attempt, then by id.
func sortSubmissions(subs []store.MatrixSubmission) {
	sort.Slice(subs, func(i, j int) bool {
		if !subs[i].ReceivedAt.Equal(subs[j].ReceivedAt) {
			return subs[i].ReceivedAt.Before(subs[j].ReceivedAt)
		}
		return subs[i].MatrixEventID < subs[j].MatrixEventID
	})
}

// MatrixSubmission returns one submission. Errors: store.ErrNotFound.
func (db *DB) MatrixSubmission(ctx context.Context, matrixEventID string) (store.MatrixSubmission, error) {
	out, err := scanMatrixSubmissions(db.rd.QueryContext(ctx, selectMatrixSubmission, matrixEventID))
	if err != nil {
		return store.MatrixSubmission{}, err
	}
	if len(out) == 0 {
		return store.MatrixSubmission{}, fmt.Errorf("matrix submission: %w", store.ErrNotFound)
	}
	return out[0], nil
}

// RetryMatrixSubmission sets the next attempt. See store.Matrix.
func (db *DB) RetryMatrixSubmission(ctx context.Context, matrixEventID string, wait time.Duration, lastError string) error {
	return db.execOne(ctx, "retry matrix submission", retryMatrixSubmission, matrixEventID, seconds(wait), lastError)
}

// GiveUpMatrixSubmission makes a submission final unanswered. See
// store.Matrix.
func (db *DB) GiveUpMatrixSubmission(ctx context.Context, matrixEventID, lastError string) error {
	return db.execOne(ctx, "give up matrix submission", giveUpMatrixSubmission, matrixEventID, lastError)
}

// DeleteFinishedMatrixSubmissions deletes one batch of old final
// submissions. See store.Matrix.
func (db *DB) DeleteFinishedMatrixSubmissions(ctx context.Context, before time.Time, limit int) (int, error) {
	return db.execN(ctx, "delete finished matrix submissions", deleteFinishedMatrixSubmissions, formatTime(before), limit)
}

// execOne runs a write that must touch one row. Errors: store.ErrNotFound.
func (db *DB) execOne(ctx context.Context, op, q string, args ...any) error {
	n, err := db.execN(ctx, op, q, args...)
	if err == nil && n == 0 {
		err = fmt.Errorf("%s: %w", op, store.ErrNotFound)
	}
	return err
}

// execN runs a write and returns the rows it touched.
func (db *DB) execN(ctx context.Context, op, q string, args ...any) (int, error) {
	res, err := db.w.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, mapErr(op, err)
	}
	n, err := res.RowsAffected()
	return int(n), mapErr(op, err)
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
