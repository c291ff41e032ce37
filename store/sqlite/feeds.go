package sqlite

import (
	"context"
	"database/sql"

	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/internal/shared"
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
	return db.feeds().Visibility(ctx, projectID)
}

// SetProjectVisibility errors: store.ErrNotFound, store.ErrUnavailable; a
// value other than the two visibilities is refused before any write.
func (db *DB) SetProjectVisibility(ctx context.Context, projectID, visibility string) error {
	return db.feeds().SetVisibility(ctx, projectID, visibility)
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
	return db.feeds().Token(ctx, id)
}

// RevokeFeedToken errors: store.ErrNotFound (no such feed token in the
// project), store.ErrUnavailable.
func (db *DB) RevokeFeedToken(ctx context.Context, projectID, id string) error {
	return db.feeds().RevokeToken(ctx, projectID, id)
}

// CountRecords errors: store.ErrUnavailable.
func (db *DB) CountRecords(ctx context.Context, sel store.Selection) (int64, error) {
	return db.feeds().CountRecords(ctx, sel)
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

var feedSQL = shared.FeedSQL{
	Visibility: selectVisibility, SetVisibility: updateVisibility,
	Token: selectFeedToken, RevokeToken: revokeFeedToken,
	CountRepository: countRepositoryRecords, CountThread: countThreadRecords,
}

func (db *DB) feeds() shared.Feeds { return shared.Feeds{Engine: db.engine(), SQL: &feedSQL} }
