package postgres_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/acrelay/acrelay/store/postgres"
	"github.com/acrelay/acrelay/store/storetest"
)

// countingObserver records what a store reports.
type countingObserver struct {
	mu      sync.Mutex
	ops     map[string]int
	appends int
	commits int
}

func (o *countingObserver) ObserveTx(op string, d time.Duration, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ops[op]++
}

func (o *countingObserver) ObserveGroupCommit(appends int, d time.Duration, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.appends += appends
	o.commits++
}

// TestObserver: every append is in exactly one observed group commit, the
// transactions are named by operation, and a migrated database has no
// pending migration.
func TestObserver(t *testing.T) {
	obs := &countingObserver{ops: map[string]int{}}
	db, err := postgres.OpenWith(context.Background(), freshDatabase(t), slog.New(slog.DiscardHandler), postgres.Options{Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ctx := context.Background()
	p, err := db.CreateProject(ctx, storetest.NewUUID())
	if err != nil {
		t.Fatal(err)
	}
	s := storetest.NewSigner(t, p.ID).Register(t, db)
	const n = 20
	var wg sync.WaitGroup
	for i := range n {
		e, canonical := s.Event(t, storetest.Spec{Summary: fmt.Sprintf("observed %d", i), SessionSeq: int64(i + 1)})
		wg.Go(func() {
			if _, err := db.Append(ctx, e, canonical); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if obs.appends != n || obs.commits < 1 || obs.commits > n {
		t.Fatalf("observed %d appends in %d commits, want %d in 1..%d", obs.appends, obs.commits, n, n)
	}
	if obs.ops["append"] < 1 {
		t.Fatalf("no append transaction observed: %v", obs.ops)
	}
	if pending, err := db.PendingMigrations(ctx); err != nil || pending != 0 {
		t.Fatalf("PendingMigrations = %d, %v; want 0", pending, err)
	}
}
