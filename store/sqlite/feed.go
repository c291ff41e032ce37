package sqlite

import (
	"context"

	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/store"
)

const (
	selectProjectIDs = `SELECT id FROM projects WHERE id > ? ORDER BY id LIMIT ?`

	// selectFeedAfter reads the immutable part of records for couriers;
	// it walks the (project_id, received_seq) primary key.
	selectFeedAfter = `SELECT event_id, repository_id, thread_id, kind, canonical, received_seq, received_at
		FROM events WHERE project_id = ? AND received_seq > ? ORDER BY received_seq LIMIT ?`
)

// ProjectIDs pages project ids in ascending order (store.Feed).
func (db *DB) ProjectIDs(ctx context.Context, afterID string, limit int) ([]string, error) {
	rows, err := db.rd.QueryContext(ctx, selectProjectIDs, afterID, limit)
	if err != nil {
		return nil, mapErr("project ids", err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, mapErr("project ids", err)
		}
		ids = append(ids, id)
	}
	return ids, mapErr("project ids", rows.Err())
}

// RecordsAfter reads a project's records across repositories (store.Feed).
func (db *DB) RecordsAfter(ctx context.Context, projectID string, after int64, limit int) ([]store.Record, error) {
	rows, err := db.rd.QueryContext(ctx, selectFeedAfter, projectID, after, limit)
	if err != nil {
		return nil, mapErr("records after", err)
	}
	defer rows.Close()
	var out []store.Record
	for rows.Next() {
		rec := store.Record{ProjectID: projectID}
		var kind, at string
		if err := rows.Scan(&rec.EventID, &rec.RepositoryID, &rec.ThreadID, &kind, &rec.Event, &rec.ReceivedSeq, &at); err != nil {
			return nil, mapErr("records after", err)
		}
		rec.Kind = correspondenceKind(kind)
		rec.ReceivedAt = parseTime(at)
		out = append(out, rec)
	}
	return out, mapErr("records after", rows.Err())
}

func correspondenceKind(k string) correspondence.Kind { return correspondence.Kind(k) }
