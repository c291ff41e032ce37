package postgres

import (
	"context"
	"database/sql"
	"io/fs"
	"log/slog"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
	"github.com/pressly/goose/v3"

	"github.com/acrelay/acrelay/internal/pgtest"
)

// TestMigration0013KeepsSubmissions: Matrix submissions stored before
// migration 0013 keep their state: an answered one becomes final as
// replied, a pending one is due at once with no attempts counted.
func TestMigration0013KeepsSubmissions(t *testing.T) {
	ctx := context.Background()
	url := pgtest.FreshDatabase(t)
	db, err := Open(ctx, url, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	raw, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	sub, _ := fs.Sub(migrations, "migrations")
	p, err := goose.NewProvider(goose.DialectPostgres, raw, sub, goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.DownTo(ctx, 12); err != nil {
		t.Fatalf("down to 12: %v", err)
	}
	if _, err := raw.Exec(`INSERT INTO matrix_submissions (matrix_event_id, room_id, sender, event, outcome, reply_event_id, done, received_at) VALUES
		('$answered', '!r:x', '@u:x', '{}', '{"ok":true}', '$reply', true, '2026-01-02T03:04:05.678Z'),
		('$pending', '!r:x', '@u:x', '{}', NULL, '', false, '2026-01-02T03:04:06.000Z')`); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatalf("up: %v", err)
	}
	raw.Close()
	db, err = Open(ctx, url, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	a, err := db.MatrixSubmission(ctx, "$answered")
	if err != nil {
		t.Fatal(err)
	}
	want := time.Date(2026, 1, 2, 3, 4, 5, 678e6, time.UTC)
	if a.Final != "replied" || a.ReplyEventID != "$reply" || !a.FinishedAt.Equal(want) || a.Attempts != 0 {
		t.Errorf("answered after 0013 = %+v", a)
	}
	claimed, err := db.ClaimMatrixSubmissions(ctx, 10, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(claimed) != 1 || claimed[0].MatrixEventID != "$pending" || claimed[0].Attempts != 1 || claimed[0].Final != "" {
		t.Errorf("claimed after 0013 = %+v, want the pending one at its first attempt", claimed)
	}
}
