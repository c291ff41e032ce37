package couriers_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acrelay/acrelay/couriers"
	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/sqlite"
	"github.com/acrelay/acrelay/store/storetest"
)

// recorder is a courier that records what it was handed; fail makes the
// next n deliveries fail.
type recorder struct {
	mu   sync.Mutex
	got  []string
	fail int
}

func (r *recorder) Name() string { return "recorder" }
func (r *recorder) Targets(context.Context, string) ([]string, error) {
	return []string{"a", "b"}, nil
}
func (r *recorder) Deliver(_ context.Context, projectID, target string, recs []store.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail > 0 {
		r.fail--
		return errors.New("receiver down")
	}
	for _, rec := range recs {
		r.got = append(r.got, target+":"+rec.EventID)
	}
	return nil
}

func (r *recorder) snapshot() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.got...)
}

func openStore(t *testing.T) *sqlite.DB {
	t.Helper()
	db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "acrelay.db"), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func appendN(t *testing.T, db *sqlite.DB, s *storetest.Signer, n int) []string {
	t.Helper()
	var ids []string
	for i := 0; i < n; i++ {
		ev, canonical := s.Event(t, storetest.Spec{RepositoryID: "repo-" + string(rune('a'+i%3))})
		if _, err := db.Append(context.Background(), ev, canonical); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, ev.ID)
	}
	return ids
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestRunnerDeliversEveryRecordToEveryTargetOnce(t *testing.T) {
	db := openStore(t)
	ctx := context.Background()
	p, _ := db.CreateProject(ctx, storetest.NewUUID())
	s := storetest.NewSigner(t, p.ID).Register(t, db)
	ids := appendN(t, db, s, 250) // more than one batch, three repositories

	rec := &recorder{fail: 1}
	r := couriers.NewRunner(db, rec, couriers.Options{Holder: "h1", LeaseTTL: time.Second, PollInterval: 20 * time.Millisecond,
		Batch: 100, RetryBackoff: 50 * time.Millisecond})
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = r.Run(rctx); close(done) }()
	waitFor(t, "500 deliveries", func() bool { return len(rec.snapshot()) == 500 })

	more := appendN(t, db, s, 5)
	r.Poke()
	waitFor(t, "the new records", func() bool { return len(rec.snapshot()) == 510 })
	cancel()
	<-done

	got := rec.snapshot()
	want := map[string]int{}
	for _, id := range append(ids, more...) {
		want["a:"+id], want["b:"+id] = 1, 1
	}
	for _, g := range got {
		want[g]--
	}
	for k, v := range want {
		if v != 0 {
			t.Fatalf("%s delivered %d times too few", k, v)
		}
	}
	// Receipt order per target.
	var seqA []string
	for _, g := range got {
		if strings.HasPrefix(g, "a:") {
			seqA = append(seqA, strings.TrimPrefix(g, "a:"))
		}
	}
	if strings.Join(seqA, ",") != strings.Join(append(ids, more...), ",") {
		t.Fatal("target a did not receive records in receipt order")
	}
	for _, target := range []string{"a", "b"} {
		cur, err := db.CourierCursor(ctx, "recorder", p.ID, target)
		if err != nil || cur != 255 {
			t.Fatalf("cursor %s = %d, %v; want 255", target, cur, err)
		}
	}
	// Run released its lease: another holder takes it at once.
	if ok, err := db.AcquireLease(ctx, "recorder", p.ID, "h2", time.Second); err != nil || !ok {
		t.Fatalf("lease not released on stop: %v %v", ok, err)
	}
}

func TestOnlyTheLeaseHolderDelivers(t *testing.T) {
	db := openStore(t)
	ctx := context.Background()
	p, _ := db.CreateProject(ctx, storetest.NewUUID())
	s := storetest.NewSigner(t, p.ID).Register(t, db)
	appendN(t, db, s, 20)

	// Another process holds the lease.
	if ok, err := db.AcquireLease(ctx, "recorder", p.ID, "other", time.Hour); err != nil || !ok {
		t.Fatal("could not take the lease")
	}
	rec := &recorder{}
	r := couriers.NewRunner(db, rec, couriers.Options{Holder: "me", LeaseTTL: time.Second, PollInterval: 10 * time.Millisecond})
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = r.Run(rctx); close(done) }()
	time.Sleep(200 * time.Millisecond)
	if n := len(rec.snapshot()); n != 0 {
		t.Fatalf("delivered %d records without the lease", n)
	}
	// The holder releases: this runner takes over from the durable cursor.
	if err := db.ReleaseLease(ctx, "recorder", p.ID, "other"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "takeover", func() bool { return len(rec.snapshot()) == 40 })
	cancel()
	<-done
}

func TestExportWritesRecordJSONLines(t *testing.T) {
	db := openStore(t)
	ctx := context.Background()
	p, _ := db.CreateProject(ctx, storetest.NewUUID())
	s := storetest.NewSigner(t, p.ID).Register(t, db)
	ids := appendN(t, db, s, 3)
	dir := t.TempDir()
	recs, err := db.RecordsAfter(ctx, p.ID, 0, 10)
	if err != nil || len(recs) != 3 {
		t.Fatalf("RecordsAfter: %d, %v", len(recs), err)
	}
	if err := (couriers.Export{Dir: dir}).Deliver(ctx, p.ID, "", recs); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, p.ID+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n"))
	if len(lines) != 3 {
		t.Fatalf("%d lines", len(lines))
	}
	for i, line := range lines {
		if !bytes.Equal(line, recs[i].ImmutableJSON()) || !bytes.Contains(line, []byte(ids[i])) {
			t.Errorf("line %d = %s", i, line)
		}
	}
	if err := (couriers.Export{Dir: dir}).Deliver(ctx, "../escape", "", recs); err == nil {
		t.Fatal("a non-UUID project id became a path")
	}
}
