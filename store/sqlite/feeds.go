package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/acrelay/acrelay/store"
)

var (
	_ store.Visibility = (*DB)(nil)
	_ store.FeedTokens = (*DB)(nil)
	_ store.Archives   = (*DB)(nil)
)

// Visibility and feed tokens (migration 0008).
const (
	selectVisibility = `SELECT visibility FROM projects WHERE id = ?`
	updateVisibility = `UPDATE projects SET visibility = ? WHERE id = ?`

	insertFeedToken = `INSERT INTO feed_tokens (id, project_id, repository_id, hash, created_by, revoked, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ` + nowMS + `) RETURNING created_at`
	selectFeedToken = `SELECT id, project_id, repository_id, hash, created_by, revoked, created_at
		FROM feed_tokens WHERE id = ?`
	revokeFeedToken = `UPDATE feed_tokens SET revoked = 1 WHERE project_id = ? AND id = ?`
)

// RFC 5005 archives: positions within a selection, counted through
// events_repository, or for a thread through thread_events plus the
// not-yet-indexed tail of events (migration 0005; UNION, since
// thread_events may already hold some of the tail).
const (
	threadSeqs = `SELECT received_seq FROM thread_events
			WHERE project_id = ?1 AND repository_id = ?2 AND thread_id = ?3
		UNION
		SELECT received_seq FROM events
			WHERE project_id = ?1 AND received_seq > (SELECT thread_indexed_seq FROM projects WHERE id = ?1)
			AND repository_id = ?2 AND thread_id = ?3`

	countRepositoryRecords = `SELECT count(*) FROM events WHERE project_id = ? AND repository_id = ?`
	countThreadRecords     = `SELECT count(*) FROM (` + threadSeqs + `)`

	selectRepositoryRecordsAt = recordColumns + `
		WHERE e.project_id = ?1 AND e.received_seq IN (
			SELECT received_seq FROM events WHERE project_id = ?1 AND repository_id = ?2
			ORDER BY received_seq LIMIT ?4 OFFSET ?3)
		ORDER BY e.received_seq`
	selectThreadRecordsAt = recordColumns + `
		WHERE e.project_id = ?1 AND e.received_seq IN (
			SELECT received_seq FROM (` + threadSeqs + `)
			ORDER BY received_seq LIMIT ?5 OFFSET ?4)
		ORDER BY e.received_seq`
)

// ProjectVisibility returns store.VisibilityPrivate or
// store.VisibilityPublic. Errors: store.ErrNotFound, store.ErrUnavailable.
func (db *DB) ProjectVisibility(ctx context.Context, projectID string) (string, error) {
	var v string
	if err := db.rd.QueryRowContext(ctx, selectVisibility, projectID).Scan(&v); err != nil {
		return "", mapErr("project visibility", err)
	}
	return v, nil
}

// SetProjectVisibility errors: store.ErrNotFound, store.ErrUnavailable; a
// value other than the two visibilities is refused before any write.
func (db *DB) SetProjectVisibility(ctx context.Context, projectID, visibility string) error {
	if visibility != store.VisibilityPrivate && visibility != store.VisibilityPublic {
		return fmt.Errorf("set project visibility: %q is not private or public", visibility)
	}
	res, err := db.w.ExecContext(ctx, updateVisibility, visibility, projectID)
	if err != nil {
		return mapErr("set project visibility", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return mapErr("set project visibility", err)
	} else if n == 0 {
		return fmt.Errorf("set project visibility: %w", store.ErrNotFound)
	}
	return nil
}

// CreateFeedToken stores t (its hash only). Errors: store.ErrExists,
// store.ErrNotFound (unknown project), store.ErrUnavailable.
func (db *DB) CreateFeedToken(ctx context.Context, t store.FeedToken) (store.FeedToken, error) {
	var at string
	err := db.writeTx(ctx, "create feed token", func(tx *sql.Tx) error {
		if err := mustExist(ctx, tx, projectExists, t.ProjectID); err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, insertFeedToken, t.ID, t.ProjectID, t.RepositoryID, t.Hash, t.CreatedBy, t.Revoked).Scan(&at)
	})
	if err != nil {
		return store.FeedToken{}, err
	}
	t.CreatedAt = parseTime(at)
	return t, nil
}

// FeedToken errors: store.ErrNotFound, store.ErrUnavailable.
func (db *DB) FeedToken(ctx context.Context, id string) (store.FeedToken, error) {
	var t store.FeedToken
	var at string
	err := db.rd.QueryRowContext(ctx, selectFeedToken, id).Scan(&t.ID, &t.ProjectID, &t.RepositoryID, &t.Hash, &t.CreatedBy, &t.Revoked, &at)
	if err != nil {
		return store.FeedToken{}, mapErr("feed token", err)
	}
	t.CreatedAt = parseTime(at)
	return t, nil
}

// RevokeFeedToken errors: store.ErrNotFound (no such feed token in the
// project), store.ErrUnavailable.
func (db *DB) RevokeFeedToken(ctx context.Context, projectID, id string) error {
	res, err := db.w.ExecContext(ctx, revokeFeedToken, projectID, id)
	if err != nil {
		return mapErr("revoke feed token", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return mapErr("revoke feed token", err)
	} else if n == 0 {
		return fmt.Errorf("revoke feed token: %w", store.ErrNotFound)
	}
	return nil
}

// CountRecords errors: store.ErrUnavailable.
func (db *DB) CountRecords(ctx context.Context, sel store.Selection) (int64, error) {
	var n int64
	var err error
	if sel.ThreadID == "" {
		err = db.rd.QueryRowContext(ctx, countRepositoryRecords, sel.ProjectID, sel.RepositoryID).Scan(&n)
	} else {
		err = db.rd.QueryRowContext(ctx, countThreadRecords, sel.ProjectID, sel.RepositoryID, sel.ThreadID).Scan(&n)
	}
	return n, mapErr("count records", err)
}

// RecordsAt errors: store.ErrUnavailable. A limit outside
// 1–store.ArchiveSize+1 is clamped.
func (db *DB) RecordsAt(ctx context.Context, sel store.Selection, offset int64, limit int) ([]store.Record, error) {
	limit = min(max(limit, 1), store.ArchiveSize+1)
	offset = max(offset, 0)
	var rows *sql.Rows
	var err error
	if sel.ThreadID == "" {
		rows, err = db.rd.QueryContext(ctx, selectRepositoryRecordsAt, sel.ProjectID, sel.RepositoryID, offset, limit)
	} else {
		rows, err = db.rd.QueryContext(ctx, selectThreadRecordsAt, sel.ProjectID, sel.RepositoryID, sel.ThreadID, offset, limit)
	}
	if err != nil {
		return nil, mapErr("records at", err)
	}
	defer rows.Close()
	var out []store.Record
	for rows.Next() {
		rec, err := scanRecord(rows, sel.ProjectID)
		if err != nil {
			return nil, mapErr("records at", err)
		}
		out = append(out, rec)
	}
	return out, mapErr("records at", rows.Err())
}
