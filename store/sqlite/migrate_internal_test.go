package sqlite

import (
	"context"
	"database/sql"
	"io/fs"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/pressly/goose/v3"

	"github.com/acrelay/acrelay/store/storetest"
)

// TestMigration0005FillsThreadEvents: a database that has events when
// migration 0005 runs gets every one of them in thread_events and its
// projects' marks at their last events; its down migration brings back
// events_thread.
func TestMigration0005FillsThreadEvents(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "m.db")
	db, err := OpenWith(ctx, path, slog.New(slog.DiscardHandler), Options{ThreadIndexEvery: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	pr, err := db.CreateProject(ctx, storetest.NewUUID())
	if err != nil {
		t.Fatal(err)
	}
	pid := pr.ID
	sg := storetest.NewSigner(t, pid).Register(t, db)
	for i := range 12 {
		ev, c := sg.Event(t, storetest.Spec{ThreadID: []string{"a", "b", "c"}[i%3], SessionSeq: int64(i + 1)})
		if _, err := db.Append(ctx, ev, c); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()

	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	sub, _ := fs.Sub(migrations, "migrations")
	p, err := goose.NewProvider(goose.DialectSQLite3, raw, sub, goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.DownTo(ctx, 4); err != nil {
		t.Fatalf("down to 4: %v", err)
	}
	var n int
	if err := raw.QueryRow(`SELECT count(*) FROM sqlite_schema WHERE name = 'events_thread'`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("events_thread after the down migration: %d, %v", n, err)
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatalf("up: %v", err)
	}
	var rows, missing, mark, last int
	if err := raw.QueryRow(`SELECT count(*) FROM thread_events`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if err := raw.QueryRow(`SELECT count(*) FROM events e WHERE NOT EXISTS (SELECT 1 FROM thread_events x
		WHERE x.project_id = e.project_id AND x.repository_id = e.repository_id AND x.thread_id = e.thread_id AND x.received_seq = e.received_seq)`).Scan(&missing); err != nil {
		t.Fatal(err)
	}
	if err := raw.QueryRow(`SELECT thread_indexed_seq, last_seq FROM projects WHERE id = ?`, pid).Scan(&mark, &last); err != nil {
		t.Fatal(err)
	}
	if rows != 12 || missing != 0 || mark != 12 || last != 12 {
		t.Fatalf("after 0005: %d rows in thread_events, %d events missing, mark %d, last_seq %d; want 12, 0, 12, 12", rows, missing, mark, last)
	}
	if err := raw.QueryRow(`SELECT count(*) FROM sqlite_schema WHERE name = 'events_thread'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("events_thread after 0005: %d, %v", n, err)
	}
}

// TestMigration0015KeepsSubmissions: Matrix submissions stored before
// migration 0015 keep their state: an answered one becomes final as
// replied, a pending one is due at once with no attempts counted.
func TestMigration0015KeepsSubmissions(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "m.db")
	db, err := OpenWith(ctx, path, slog.New(slog.DiscardHandler), Options{})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	sub, _ := fs.Sub(migrations, "migrations")
	p, err := goose.NewProvider(goose.DialectSQLite3, raw, sub, goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.DownTo(ctx, 14); err != nil {
		t.Fatalf("down to 14: %v", err)
	}
	if _, err := raw.Exec(`INSERT INTO matrix_submissions (matrix_event_id, room_id, sender, event, outcome, reply_event_id, done, received_at) VALUES
		('$answered', '!r:x', '@u:x', '{}', '{"ok":true}', '$reply', 1, '2026-01-02T03:04:05.678Z'),
		('$pending', '!r:x', '@u:x', '{}', NULL, '', 0, '2026-01-02T03:04:06.000Z')`); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatalf("up: %v", err)
	}
	raw.Close()
	db, err = OpenWith(ctx, path, slog.New(slog.DiscardHandler), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	a, err := db.MatrixSubmission(ctx, "$answered")
	if err != nil {
		t.Fatal(err)
	}
	if a.Final != "replied" || a.ReplyEventID != "$reply" || a.FinishedAt.Format(timeLayout) != "2026-01-02T03:04:05.678Z" || a.Attempts != 0 {
		t.Errorf("answered after 0015 = %+v", a)
	}
	claimed, err := db.ClaimMatrixSubmissions(ctx, 10, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(claimed) != 1 || claimed[0].MatrixEventID != "$pending" || claimed[0].Attempts != 1 || claimed[0].Final != "" {
		t.Errorf("claimed after 0015 = %+v, want the pending one at its first attempt", claimed)
	}
}
