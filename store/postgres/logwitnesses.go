package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acrelay/acrelay/store"
)

// LogWitnesses (store.LogWitnesses): external witnesses' states per
// project and the logs this relay witnesses (migration 0019).

var _ store.LogWitnesses = (*DB)(nil)

const (
	logWitnessColumns     = `project_id, witness, known_size, cosigned_size, cosigned_at, last_error, error_at, updated_at`
	selectLogWitnessState = `SELECT ` + logWitnessColumns + ` FROM log_witness_states WHERE ($1 = '' OR project_id = $1) ORDER BY project_id, witness`
	upsertLogWitnessState = `INSERT INTO log_witness_states (` + logWitnessColumns + `)
		SELECT id, $2, $3, $4, $5, $6, $7, $8 FROM projects WHERE id = $1
		ON CONFLICT (project_id, witness) DO UPDATE SET known_size = excluded.known_size, cosigned_size = excluded.cosigned_size,
			cosigned_at = excluded.cosigned_at, last_error = excluded.last_error, error_at = excluded.error_at, updated_at = excluded.updated_at`

	selectWitnessedLog = `SELECT origin, tree_size, root, checkpoint, updated_at FROM witnessed_logs WHERE origin = $1`
	insertWitnessedLog = `INSERT INTO witnessed_logs (origin, tree_size, root, checkpoint, updated_at) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (origin) DO NOTHING`
	updateWitnessedLog = `UPDATE witnessed_logs SET tree_size = $2, root = $3, checkpoint = $4, updated_at = $5 WHERE origin = $1 AND tree_size = $6`
)

// optTime is t, or NULL for the zero time.
func optTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC().Truncate(time.Millisecond)
	return &u
}

func fromOptTime(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}

// LogWitnessStates lists external witnesses' states (store.LogWitnesses).
func (db *DB) LogWitnessStates(ctx context.Context, projectID string) ([]store.LogWitnessState, error) {
	rows, err := db.pool.Query(ctx, selectLogWitnessState, projectID)
	if err != nil {
		return nil, mapErr("log witness states", err)
	}
	defer rows.Close()
	var out []store.LogWitnessState
	for rows.Next() {
		var s store.LogWitnessState
		var cosignedAt, errorAt *time.Time
		if err := rows.Scan(&s.ProjectID, &s.Witness, &s.KnownSize, &s.CosignedSize, &cosignedAt, &s.LastError, &errorAt, &s.UpdatedAt); err != nil {
			return nil, mapErr("log witness states", err)
		}
		s.CosignedAt, s.ErrorAt, s.UpdatedAt = fromOptTime(cosignedAt), fromOptTime(errorAt), utc(s.UpdatedAt)
		out = append(out, s)
	}
	return out, mapErr("log witness states", rows.Err())
}

// SaveLogWitnessState stores one witness's state of a project
// (store.LogWitnesses).
func (db *DB) SaveLogWitnessState(ctx context.Context, s store.LogWitnessState) error {
	tag, err := db.pool.Exec(ctx, upsertLogWitnessState, s.ProjectID, s.Witness, s.KnownSize, s.CosignedSize, optTime(s.CosignedAt),
		s.LastError, optTime(s.ErrorAt), time.Now().UTC().Truncate(time.Millisecond))
	if err != nil {
		return mapErr("save log witness state", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("save log witness state: project: %w", store.ErrNotFound)
	}
	return nil
}

// WitnessedLog reads the latest checkpoint cosigned for origin
// (store.LogWitnesses).
func (db *DB) WitnessedLog(ctx context.Context, origin string) (store.WitnessedLog, error) {
	var l store.WitnessedLog
	var root []byte
	err := db.pool.QueryRow(ctx, selectWitnessedLog, origin).Scan(&l.Origin, &l.Size, &root, &l.Checkpoint, &l.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.WitnessedLog{}, fmt.Errorf("witnessed log: %w", store.ErrNotFound)
	}
	if err != nil {
		return store.WitnessedLog{}, mapErr("witnessed log", err)
	}
	copy(l.Root[:], root)
	l.UpdatedAt = utc(l.UpdatedAt)
	return l, nil
}

// SaveWitnessedLog stores l while the stored size is oldSize
// (store.LogWitnesses): one statement each, so the check and the write
// are atomic under concurrent processes.
func (db *DB) SaveWitnessedLog(ctx context.Context, l store.WitnessedLog, oldSize int64) (bool, error) {
	if l.Size < oldSize {
		return false, nil
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	if oldSize == 0 {
		tag, err := db.pool.Exec(ctx, insertWitnessedLog, l.Origin, l.Size, l.Root[:], l.Checkpoint, now)
		if err != nil {
			return false, mapErr("save witnessed log", err)
		}
		if tag.RowsAffected() == 1 {
			return true, nil
		}
	}
	tag, err := db.pool.Exec(ctx, updateWitnessedLog, l.Origin, l.Size, l.Root[:], l.Checkpoint, now, oldSize)
	if err != nil {
		return false, mapErr("save witnessed log", err)
	}
	return tag.RowsAffected() == 1, nil
}
