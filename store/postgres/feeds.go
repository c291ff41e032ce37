package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/internal/shared"
)

var (
	_ store.Visibility = (*DB)(nil)
	_ store.FeedTokens = (*DB)(nil)
	_ store.Archives   = (*DB)(nil)
)

// Visibility and feed tokens (migration 0006).
const (
	selectVisibility = `SELECT visibility FROM projects WHERE id = $1`
	updateVisibility = `UPDATE projects SET visibility = $1 WHERE id = $2`

	// insertFeedToken inserts no row for an unknown project (ErrNoRows:
	// store.ErrNotFound), as insertToken does.
	insertFeedToken = `INSERT INTO feed_tokens (id, project_id, repository_id, hash, created_by, revoked, created_at)
		SELECT $1, p.id, $3, $4::bytea, $5, $6::boolean, ` + nowMS + ` FROM projects p WHERE p.id = $2
		RETURNING created_at`
	selectFeedToken = `SELECT id, project_id, repository_id, hash, created_by, revoked, created_at
		FROM feed_tokens WHERE id = $1`
	revokeFeedToken = `UPDATE feed_tokens SET revoked = true WHERE project_id = $1 AND id = $2`
)

// RFC 5005 archives: positions within a selection, counted and skipped
// through events_repository or events_thread; the record columns are only
// computed for the rows returned.
const (
	countRepositoryRecords = `SELECT count(*) FROM events WHERE project_id = $1 AND repository_id = $2`
	countThreadRecords     = `SELECT count(*) FROM events WHERE project_id = $1 AND repository_id = $2 AND thread_id = $3`

	selectRepositoryRecordsAt = recordColumns + `
		WHERE e.project_id = $1 AND e.received_seq = ANY (ARRAY(
			SELECT received_seq FROM events WHERE project_id = $1 AND repository_id = $2
			ORDER BY received_seq LIMIT $4 OFFSET $3))
		ORDER BY e.received_seq`
	selectThreadRecordsAt = recordColumns + `
		WHERE e.project_id = $1 AND e.received_seq = ANY (ARRAY(
			SELECT received_seq FROM events WHERE project_id = $1 AND repository_id = $2 AND thread_id = $3
			ORDER BY received_seq LIMIT $5 OFFSET $4))
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
	var at time.Time
	err := db.pool.QueryRow(ctx, insertFeedToken, t.ID, t.ProjectID, t.RepositoryID, t.Hash, t.CreatedBy, t.Revoked).Scan(&at)
	if err != nil {
		return store.FeedToken{}, mapErr("create feed token", err)
	}
	t.CreatedAt = utc(at)
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
	var rows pgx.Rows
	var err error
	if sel.ThreadID == "" {
		rows, err = db.pool.Query(ctx, selectRepositoryRecordsAt, sel.ProjectID, sel.RepositoryID, offset, limit)
	} else {
		rows, err = db.pool.Query(ctx, selectThreadRecordsAt, sel.ProjectID, sel.RepositoryID, sel.ThreadID, offset, limit)
	}
	if err != nil {
		return nil, mapErr("records at", err)
	}
	recs, err := collectRecords(rows, sel.ProjectID)
	return recs, mapErr("records at", err)
}

var feedSQL = shared.FeedSQL{
	Visibility: selectVisibility, SetVisibility: updateVisibility,
	Token: selectFeedToken, RevokeToken: revokeFeedToken,
	CountRepository: countRepositoryRecords, CountThread: countThreadRecords,
}

func (db *DB) feeds() shared.Feeds { return shared.Feeds{Engine: db.engine(), SQL: &feedSQL} }
