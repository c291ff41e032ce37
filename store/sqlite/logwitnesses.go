package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/acrelay/acrelay/store"
)

// LogWitnesses (store.LogWitnesses): external witnesses' states per
// project and the logs this relay witnesses (migration 0021).

var _ store.LogWitnesses = (*DB)(nil)

const (
	logWitnessColumns     = `project_id, witness, known_size, cosigned_size, cosigned_at, last_error, error_at, updated_at`
	selectLogWitnessState = `SELECT ` + logWitnessColumns + ` FROM log_witness_states WHERE (? = '' OR project_id = ?) ORDER BY project_id, witness`
	upsertLogWitnessState = `INSERT INTO log_witness_states (` + logWitnessColumns + `)
		SELECT id, ?, ?, ?, ?, ?, ?, ? FROM projects WHERE id = ?
		ON CONFLICT (project_id, witness) DO UPDATE SET known_size = excluded.known_size, cosigned_size = excluded.cosigned_size,
			cosigned_at = excluded.cosigned_at, last_error = excluded.last_error, error_at = excluded.error_at, updated_at = excluded.updated_at`

	selectWitnessedLog = `SELECT origin, tree_size, root, checkpoint, updated_at FROM witnessed_logs WHERE origin = ?`
	insertWitnessedLog = `INSERT INTO witnessed_logs (origin, tree_size, root, checkpoint, updated_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (origin) DO NOTHING`
	updateWitnessedLog = `UPDATE witnessed_logs SET tree_size = ?, root = ?, checkpoint = ?, updated_at = ? WHERE origin = ? AND tree_size = ?`
)

// optTime formats t, "" for the zero time.
func optTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return formatTime(t)
}

func parseOptTime(s string) time.Time {
	if s == "" {
		return time.Time{}
	}
	return parseTime(s)
}

// LogWitnessStates lists external witnesses' states (store.LogWitnesses).
func (db *DB) LogWitnessStates(ctx context.Context, projectID string) ([]store.LogWitnessState, error) {
	return listRows(ctx, db, "log witness states", func(row rowScanner) (store.LogWitnessState, error) {
		var s store.LogWitnessState
		var cosignedAt, errorAt, updatedAt string
		if err := row.Scan(&s.ProjectID, &s.Witness, &s.KnownSize, &s.CosignedSize, &cosignedAt, &s.LastError, &errorAt, &updatedAt); err != nil {
			return store.LogWitnessState{}, err
		}
		s.CosignedAt, s.ErrorAt, s.UpdatedAt = parseOptTime(cosignedAt), parseOptTime(errorAt), parseTime(updatedAt)
		return s, nil
	}, selectLogWitnessState, projectID, projectID)
}

// SaveLogWitnessState stores one witness's state of a project
// (store.LogWitnesses).
func (db *DB) SaveLogWitnessState(ctx context.Context, s store.LogWitnessState) error {
	r, err := db.w.ExecContext(ctx, upsertLogWitnessState, s.Witness, s.KnownSize, s.CosignedSize, optTime(s.CosignedAt), s.LastError,
		optTime(s.ErrorAt), formatTime(time.Now()), s.ProjectID)
	if err != nil {
		return mapErr("save log witness state", err)
	}
	if n, err := r.RowsAffected(); err != nil {
		return mapErr("save log witness state", err)
	} else if n == 0 {
		return fmt.Errorf("save log witness state: project: %w", store.ErrNotFound)
	}
	return nil
}

// WitnessedLog reads the latest checkpoint cosigned for origin
// (store.LogWitnesses).
func (db *DB) WitnessedLog(ctx context.Context, origin string) (store.WitnessedLog, error) {
	var l store.WitnessedLog
	var root []byte
	var at string
	err := db.w.QueryRowContext(ctx, selectWitnessedLog, origin).Scan(&l.Origin, &l.Size, &root, &l.Checkpoint, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return store.WitnessedLog{}, fmt.Errorf("witnessed log: %w", store.ErrNotFound)
	}
	if err != nil {
		return store.WitnessedLog{}, mapErr("witnessed log", err)
	}
	copy(l.Root[:], root)
	l.UpdatedAt = parseTime(at)
	return l, nil
}

// SaveWitnessedLog stores l while the stored size is oldSize
// (store.LogWitnesses).
func (db *DB) SaveWitnessedLog(ctx context.Context, l store.WitnessedLog, oldSize int64) (bool, error) {
	if l.Size < oldSize {
		return false, nil
	}
	now := formatTime(time.Now())
	var r sql.Result
	var err error
	if oldSize == 0 {
		r, err = db.w.ExecContext(ctx, insertWitnessedLog, l.Origin, l.Size, l.Root[:], l.Checkpoint, now)
		if err == nil {
			if n, _ := r.RowsAffected(); n == 1 {
				return true, nil
			}
		}
	}
	if err == nil {
		r, err = db.w.ExecContext(ctx, updateWitnessedLog, l.Size, l.Root[:], l.Checkpoint, now, l.Origin, oldSize)
	}
	if err != nil {
		return false, mapErr("save witnessed log", err)
	}
	n, err := r.RowsAffected()
	if err != nil {
		return false, mapErr("save witnessed log", err)
	}
	return n == 1, nil
}
