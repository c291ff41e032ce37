package postgres_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acrelay/acrelay/store/postgres"
	"github.com/acrelay/acrelay/store/storetest"
)

// TestAcquireLeavesLiveLeasesUnlocked: asking for a lease another holder
// keeps live neither waits for nor locks its row. A transaction holds the
// row locked (as the holder's renewal does while it runs); the other
// holder's AcquireLeases returns at once with nothing taken, where an
// INSERT … ON CONFLICT DO UPDATE would queue behind the lock even though
// its WHERE is false.
func TestAcquireLeavesLiveLeasesUnlocked(t *testing.T) {
	url := freshDatabase(t)
	ctx := context.Background()
	db, err := postgres.Open(ctx, url, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	p, err := db.CreateProject(ctx, storetest.NewUUID())
	if err != nil {
		t.Fatal(err)
	}
	if ls, err := db.AcquireLeases(ctx, "websub", "relay-a", []string{p.ID}, time.Minute); err != nil || len(ls) != 1 {
		t.Fatalf("relay-a acquires: %v %v", ls, err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT 1 FROM courier_leases WHERE courier = 'websub' AND project_id = $1 FOR UPDATE`, p.ID); err != nil {
		t.Fatal(err)
	}
	actx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ls, err := db.AcquireLeases(actx, "websub", "relay-b", []string{p.ID}, time.Minute)
	if err != nil || len(ls) != 0 {
		t.Fatalf("relay-b's acquire of a live lease whose row is locked: %v %v, want no lease and no error (no wait)", ls, err)
	}
	// The keeper's own calls carry a server-side timeout: a renewal stuck
	// behind the lock ends with the context's deadline.
	rctx, cancel2 := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel2()
	start := time.Now()
	if _, err := db.RenewLeases(rctx, "websub", "relay-a", time.Minute); err == nil {
		t.Fatal("a renewal behind a held row lock succeeded")
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("the renewal behind the lock took %v", d)
	}
}
