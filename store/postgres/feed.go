package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/store"
)

// Feed (store.Feed): what couriers read.
const (
	selectProjectIDs = `SELECT id FROM projects WHERE id > $1 ORDER BY id LIMIT $2`

	// selectFeedAfter reads the immutable part of records; it walks the
	// (project_id, received_seq) primary key.
	selectFeedAfter = `SELECT event_id, repository_id, thread_id, kind, canonical, received_seq, received_at
		FROM events WHERE project_id = $1 AND received_seq > $2 ORDER BY received_seq LIMIT $3`
)

// ProjectIDs pages project ids in ascending byte order (store.Feed).
// Errors: store.ErrUnavailable.
func (db *DB) ProjectIDs(ctx context.Context, afterID string, limit int) ([]string, error) {
	rows, err := db.pool.Query(ctx, selectProjectIDs, afterID, limit)
	if err != nil {
		return nil, mapErr("project ids", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return ids, mapErr("project ids", err)
}

// RecordsAfter reads a project's records across repositories in receipt
// order, immutable fields only (store.Feed). Errors: store.ErrUnavailable.
func (db *DB) RecordsAfter(ctx context.Context, projectID string, after int64, limit int) ([]store.Record, error) {
	rows, err := db.pool.Query(ctx, selectFeedAfter, projectID, after, limit)
	if err != nil {
		return nil, mapErr("records after", err)
	}
	recs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.Record, error) {
		rec := store.Record{ProjectID: projectID}
		var kind string
		err := row.Scan(&rec.EventID, &rec.RepositoryID, &rec.ThreadID, &kind, &rec.Event, &rec.ReceivedSeq, &rec.ReceivedAt)
		rec.Kind = correspondence.Kind(kind)
		rec.ReceivedAt = utc(rec.ReceivedAt)
		return rec, err
	})
	return recs, mapErr("records after", err)
}
