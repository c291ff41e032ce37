package postgres

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acrelay/acrelay/store"
)

// The Matrix courier's state (store.Matrix; migration 0008_matrix.sql).
const (
	insertMatrixBinding = `INSERT INTO matrix_bindings (binding_id, project_id, repository_id, room_id, created_at)
		SELECT $1, p.id, $3, $4, ` + nowMS + ` FROM projects p WHERE p.id = $2
		RETURNING created_at`
	matrixBindingColumns     = `binding_id, project_id, repository_id, room_id, created_at`
	selectMatrixBindings     = `SELECT ` + matrixBindingColumns + ` FROM matrix_bindings WHERE project_id = $1 ORDER BY binding_id`
	selectMatrixBinding      = `SELECT ` + matrixBindingColumns + ` FROM matrix_bindings WHERE project_id = $1 AND binding_id = $2`
	selectMatrixRoomBindings = `SELECT ` + matrixBindingColumns + ` FROM matrix_bindings WHERE room_id = $1 ORDER BY binding_id`
	deleteMatrixBinding      = `DELETE FROM matrix_bindings WHERE project_id = $1 AND binding_id = $2`
	selectMatrixProjects     = `SELECT DISTINCT project_id FROM matrix_bindings ORDER BY project_id`

	insertMatrixSent = `INSERT INTO matrix_sent (room_id, event_id, part, matrix_event_id, sent_at)
		VALUES ($1, $2, $3, $4, ` + nowMS + `) ON CONFLICT DO NOTHING`
	// insertMatrixSentBound is insertMatrixSent answering whether the
	// binding $5/$6 still exists, in one statement.
	insertMatrixSentBound = `WITH ins AS (INSERT INTO matrix_sent (room_id, event_id, part, matrix_event_id, sent_at)
		    VALUES ($1, $2, $3, $4, ` + nowMS + `) ON CONFLICT DO NOTHING)
		SELECT EXISTS (SELECT 1 FROM matrix_bindings WHERE project_id = $5 AND binding_id = $6)`
	selectMatrixSent = `SELECT room_id, event_id, part, matrix_event_id FROM matrix_sent
		WHERE room_id = $1 AND event_id = ANY($2::text[]) ORDER BY event_id, part`

	insertMatrixSubmission = `INSERT INTO matrix_submissions (matrix_event_id, room_id, sender, event, received_at, next_attempt_at)
		VALUES ($1, $2, $3, $4, ` + nowMS + `, ` + nowMS + `) ON CONFLICT DO NOTHING`
	upsertMatrixSync = `INSERT INTO matrix_sync (sync_key, since) VALUES ($1, $2)
		ON CONFLICT (sync_key) DO UPDATE SET since = excluded.since`
	selectMatrixSync        = `SELECT since FROM matrix_sync WHERE sync_key = $1`
	matrixSubmissionColumns = `matrix_event_id, room_id, sender, event, outcome, received_at,
		attempts, next_attempt_at, last_error, final, reply_event_id, finished_at`
	// claimMatrixSubmissions counts an attempt on the due ones and holds
	// them for $2 ms; SKIP LOCKED lets concurrent claims of other
	// processes take other rows instead of waiting.
	claimMatrixSubmissions = `UPDATE matrix_submissions
		SET attempts = attempts + 1, next_attempt_at = ` + nowMS + ` + $2::bigint * interval '1 millisecond'
		WHERE matrix_event_id IN (SELECT matrix_event_id FROM matrix_submissions
		    WHERE NOT done AND next_attempt_at <= ` + nowMS + ` ORDER BY next_attempt_at, matrix_event_id LIMIT $1
		    FOR UPDATE SKIP LOCKED)
		RETURNING ` + matrixSubmissionColumns
	selectMatrixSubmission = `SELECT ` + matrixSubmissionColumns + ` FROM matrix_submissions WHERE matrix_event_id = $1`
	retryMatrixSubmission  = `UPDATE matrix_submissions
		SET next_attempt_at = ` + nowMS + ` + $2::bigint * interval '1 millisecond', last_error = $3
		WHERE matrix_event_id = $1 AND NOT done`
	giveUpMatrixSubmission = `UPDATE matrix_submissions
		SET done = true, final = 'gave_up', last_error = $2, finished_at = ` + nowMS + `
		WHERE matrix_event_id = $1 AND NOT done`
	deleteFinishedMatrixSubmissions = `DELETE FROM matrix_submissions WHERE matrix_event_id IN (
		SELECT matrix_event_id FROM matrix_submissions WHERE done AND finished_at < $1 ORDER BY finished_at LIMIT $2)`
	// setMatrixOutcome keeps a stored outcome and returns whichever is stored.
	setMatrixOutcome = `WITH upd AS (UPDATE matrix_submissions SET outcome = $2
		    WHERE matrix_event_id = $1 AND outcome IS NULL RETURNING outcome)
		SELECT outcome FROM upd UNION ALL
		SELECT outcome FROM matrix_submissions WHERE matrix_event_id = $1 AND outcome IS NOT NULL LIMIT 1`
	completeMatrixSubmission = `UPDATE matrix_submissions SET done = true, final = 'replied', reply_event_id = $2, finished_at = ` + nowMS + `
		WHERE matrix_event_id = $1`
)

// CreateMatrixBinding stores b. See store.Matrix.
func (db *DB) CreateMatrixBinding(ctx context.Context, b store.MatrixBinding) (store.MatrixBinding, error) {
	if err := db.pool.QueryRow(ctx, insertMatrixBinding, b.ID, b.ProjectID, b.RepositoryID, b.RoomID).Scan(&b.CreatedAt); err != nil {
		return store.MatrixBinding{}, mapErr("create matrix binding", err)
	}
	b.CreatedAt = utc(b.CreatedAt)
	return b, nil
}

func (db *DB) queryMatrixBindings(ctx context.Context, q string, args ...any) ([]store.MatrixBinding, error) {
	rows, err := db.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, mapErr("matrix bindings", err)
	}
	defer rows.Close()
	var out []store.MatrixBinding
	for rows.Next() {
		var b store.MatrixBinding
		if err := rows.Scan(&b.ID, &b.ProjectID, &b.RepositoryID, &b.RoomID, &b.CreatedAt); err != nil {
			return nil, mapErr("matrix bindings", err)
		}
		b.CreatedAt = utc(b.CreatedAt)
		out = append(out, b)
	}
	return out, mapErr("matrix bindings", rows.Err())
}

// MatrixBindings lists a project's bindings. See store.Matrix.
func (db *DB) MatrixBindings(ctx context.Context, projectID string) ([]store.MatrixBinding, error) {
	return db.queryMatrixBindings(ctx, selectMatrixBindings, projectID)
}

// MatrixRoomBindings lists a room's bindings. See store.Matrix.
func (db *DB) MatrixRoomBindings(ctx context.Context, roomID string) ([]store.MatrixBinding, error) {
	return db.queryMatrixBindings(ctx, selectMatrixRoomBindings, roomID)
}

// MatrixBinding returns one binding. Errors: store.ErrNotFound.
func (db *DB) MatrixBinding(ctx context.Context, projectID, id string) (store.MatrixBinding, error) {
	bs, err := db.queryMatrixBindings(ctx, selectMatrixBinding, projectID, id)
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
	tag, err := db.pool.Exec(ctx, deleteMatrixBinding, projectID, id)
	if err != nil {
		return mapErr("delete matrix binding", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("delete matrix binding: %w", store.ErrNotFound)
	}
	return nil
}

// MatrixBoundProjects lists the projects with bindings.
func (db *DB) MatrixBoundProjects(ctx context.Context) ([]string, error) {
	rows, err := db.pool.Query(ctx, selectMatrixProjects)
	if err != nil {
		return nil, mapErr("matrix projects", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return out, mapErr("matrix projects", err)
}

// RecordMatrixSent stores s, keeping an earlier record. See store.Matrix.
func (db *DB) RecordMatrixSent(ctx context.Context, s store.MatrixSent) error {
	_, err := db.pool.Exec(ctx, insertMatrixSent, s.RoomID, s.EventID, s.Part, s.MatrixEventID)
	return mapErr("record matrix sent", err)
}

// RecordMatrixSentBound stores s and reports whether the binding still
// exists, in one statement. See store.Matrix.
func (db *DB) RecordMatrixSentBound(ctx context.Context, s store.MatrixSent, projectID, bindingID string) (bool, error) {
	var bound bool
	err := db.pool.QueryRow(ctx, insertMatrixSentBound, s.RoomID, s.EventID, s.Part, s.MatrixEventID, projectID, bindingID).Scan(&bound)
	return bound, mapErr("record matrix sent", err)
}

// MatrixSentParts returns the stored parts of eventIDs. See store.Matrix.
func (db *DB) MatrixSentParts(ctx context.Context, roomID string, eventIDs []string) ([]store.MatrixSent, error) {
	if len(eventIDs) == 0 {
		return nil, nil
	}
	rows, err := db.pool.Query(ctx, selectMatrixSent, roomID, eventIDs)
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
	return db.inTx(ctx, "enqueue matrix submissions", pgx.TxOptions{}, func(tx pgx.Tx) error {
		for _, s := range subs {
			if _, err := tx.Exec(ctx, insertMatrixSubmission, s.MatrixEventID, s.RoomID, s.Sender, s.Event); err != nil {
				return err
			}
		}
		if syncKey != "" {
			if _, err := tx.Exec(ctx, upsertMatrixSync, syncKey, since); err != nil {
				return err
			}
		}
		return nil
	})
}

// MatrixSyncToken returns the stored sync token ("" when none).
func (db *DB) MatrixSyncToken(ctx context.Context, syncKey string) (string, error) {
	var since string
	err := db.pool.QueryRow(ctx, selectMatrixSync, syncKey).Scan(&since)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	return since, mapErr("matrix sync token", err)
}

func scanMatrixSubmissions(rows pgx.Rows, err error) ([]store.MatrixSubmission, error) {
	if err != nil {
		return nil, mapErr("matrix submissions", err)
	}
	defer rows.Close()
	var out []store.MatrixSubmission
	for rows.Next() {
		var s store.MatrixSubmission
		var fin *time.Time
		if err := rows.Scan(&s.MatrixEventID, &s.RoomID, &s.Sender, &s.Event, &s.Outcome, &s.ReceivedAt,
			&s.Attempts, &s.NextAttemptAt, &s.LastError, &s.Final, &s.ReplyEventID, &fin); err != nil {
			return nil, mapErr("matrix submissions", err)
		}
		s.ReceivedAt, s.NextAttemptAt = utc(s.ReceivedAt), utc(s.NextAttemptAt)
		if fin != nil {
			s.FinishedAt = utc(*fin)
		}
		out = append(out, s)
	}
	return out, mapErr("matrix submissions", rows.Err())
}

// ClaimMatrixSubmissions takes due submissions and holds them. See
// store.Matrix.
func (db *DB) ClaimMatrixSubmissions(ctx context.Context, limit int, hold time.Duration) ([]store.MatrixSubmission, error) {
	out, err := scanMatrixSubmissions(db.pool.Query(ctx, claimMatrixSubmissions, limit, hold.Milliseconds()))
	if err != nil {
		return nil, err
	}
	// RETURNING keeps no order: oldest first, as they were due.
	sort.Slice(out, func(i, j int) bool {
		if !out[i].ReceivedAt.Equal(out[j].ReceivedAt) {
			return out[i].ReceivedAt.Before(out[j].ReceivedAt)
		}
		return out[i].MatrixEventID < out[j].MatrixEventID
	})
	return out, nil
}

// MatrixSubmission returns one submission. Errors: store.ErrNotFound.
func (db *DB) MatrixSubmission(ctx context.Context, matrixEventID string) (store.MatrixSubmission, error) {
	out, err := scanMatrixSubmissions(db.pool.Query(ctx, selectMatrixSubmission, matrixEventID))
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
	return db.execOne(ctx, "retry matrix submission", retryMatrixSubmission, matrixEventID, wait.Milliseconds(), lastError)
}

// GiveUpMatrixSubmission makes a submission final unanswered. See
// store.Matrix.
func (db *DB) GiveUpMatrixSubmission(ctx context.Context, matrixEventID, lastError string) error {
	return db.execOne(ctx, "give up matrix submission", giveUpMatrixSubmission, matrixEventID, lastError)
}

// DeleteFinishedMatrixSubmissions deletes one batch of old final
// submissions. See store.Matrix.
func (db *DB) DeleteFinishedMatrixSubmissions(ctx context.Context, before time.Time, limit int) (int, error) {
	return db.execN(ctx, "delete finished matrix submissions", deleteFinishedMatrixSubmissions, before, limit)
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
	tag, err := db.pool.Exec(ctx, q, args...)
	if err != nil {
		return 0, mapErr(op, err)
	}
	return int(tag.RowsAffected()), nil
}

// SetMatrixSubmissionOutcome stores an outcome unless one is stored and
// returns the stored one. Errors: store.ErrNotFound.
func (db *DB) SetMatrixSubmissionOutcome(ctx context.Context, matrixEventID string, outcome []byte) ([]byte, error) {
	var got []byte
	if err := db.pool.QueryRow(ctx, setMatrixOutcome, matrixEventID, outcome).Scan(&got); err != nil {
		return nil, mapErr("matrix submission outcome", err)
	}
	return got, nil
}

// CompleteMatrixSubmission marks a submission answered. Errors:
// store.ErrNotFound.
func (db *DB) CompleteMatrixSubmission(ctx context.Context, matrixEventID, replyEventID string) error {
	tag, err := db.pool.Exec(ctx, completeMatrixSubmission, matrixEventID, replyEventID)
	if err != nil {
		return mapErr("complete matrix submission", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("complete matrix submission: %w", store.ErrNotFound)
	}
	return nil
}
