package storetest

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acrelay/acrelay/store"
)

func testCourierCursors(t *testing.T, s store.Store) {
	pid := must[store.Project](t, "project")(s.CreateProject(ctx, NewUUID())).ID
	other := must[store.Project](t, "project")(s.CreateProject(ctx, NewUUID())).ID
	cursor := func(courier, project, target string) int64 {
		t.Helper()
		return must[int64](t, "cursor")(s.CourierCursor(ctx, courier, project, target))
	}
	advance := func(courier, project, target string, seq int64) {
		t.Helper()
		if err := s.AdvanceCursor(ctx, courier, project, target, seq); err != nil {
			t.Fatalf("advance %s %s to %d: %v", courier, target, seq, err)
		}
	}
	if got := cursor("websub", pid, "https://a.example/cb"); got != 0 {
		t.Fatalf("unset cursor = %d, want 0", got)
	}
	for _, step := range []struct{ to, want int64 }{{5, 5}, {3, 5}, {5, 5}, {9, 9}, {0, 9}, {10, 10}} {
		advance("websub", pid, "https://a.example/cb", step.to)
		if got := cursor("websub", pid, "https://a.example/cb"); got != step.want {
			t.Fatalf("after advancing to %d: cursor %d, want %d", step.to, got, step.want)
		}
	}
	// Cursors are independent per courier, project and target.
	advance("websub", pid, "https://b.example/cb", 2)
	advance("matrix", pid, "https://a.example/cb", 7)
	advance("websub", other, "https://a.example/cb", 1)
	for _, tc := range []struct {
		courier, project, target string
		want                     int64
	}{
		{"websub", pid, "https://a.example/cb", 10},
		{"websub", pid, "https://b.example/cb", 2},
		{"matrix", pid, "https://a.example/cb", 7},
		{"websub", other, "https://a.example/cb", 1},
		{"matrix", other, "https://a.example/cb", 0},
	} {
		if got := cursor(tc.courier, tc.project, tc.target); got != tc.want {
			t.Errorf("%s %s %s: cursor %d, want %d", tc.courier, tc.project, tc.target, got, tc.want)
		}
	}
	wantErr(t, "advance in unknown project", s.AdvanceCursor(ctx, "websub", NewUUID(), "x", 1), store.ErrNotFound)
	if err := s.AdvanceCursor(ctx, "websub", pid, "https://a.example/cb", -1); err == nil {
		t.Fatal("negative cursor accepted")
	}
	if got := cursor("websub", pid, "https://a.example/cb"); got != 10 {
		t.Fatalf("after refused advances: cursor %d, want 10", got)
	}
}

func testCourierLeases(t *testing.T, s store.Store) {
	pid := must[store.Project](t, "project")(s.CreateProject(ctx, NewUUID())).ID
	acquire := func(courier, holder string, ttl time.Duration, want bool) {
		t.Helper()
		got, err := s.AcquireLease(ctx, courier, pid, holder, ttl)
		if err != nil || got != want {
			t.Fatalf("%s acquires %s: %v %v, want %v", holder, courier, got, err, want)
		}
	}
	release := func(courier, holder string) {
		t.Helper()
		if err := s.ReleaseLease(ctx, courier, pid, holder); err != nil {
			t.Fatalf("%s releases %s: %v", holder, courier, err)
		}
	}
	acquire("websub", "relay-a", time.Minute, true)
	acquire("websub", "relay-b", time.Minute, false)
	acquire("websub", "relay-a", time.Minute, true) // renewal
	acquire("matrix", "relay-b", time.Minute, true) // another courier, another lease
	release("websub", "relay-b")                    // not b's: nothing happens
	acquire("websub", "relay-b", time.Minute, false)
	release("websub", "relay-a")
	acquire("websub", "relay-b", time.Minute, true)
	acquire("websub", "relay-a", time.Minute, false)

	// A lease is taken over once expired by the database clock, not before.
	acquire("federation", "relay-a", 150*time.Millisecond, true)
	acquire("federation", "relay-b", time.Minute, false)
	time.Sleep(300 * time.Millisecond)
	acquire("federation", "relay-b", time.Minute, true)
	acquire("federation", "relay-a", time.Minute, false)
	// A renewal extends: a's short lease renewed for a minute survives.
	acquire("atom", "relay-a", 150*time.Millisecond, true)
	acquire("atom", "relay-a", time.Minute, true)
	time.Sleep(300 * time.Millisecond)
	acquire("atom", "relay-b", time.Minute, false)

	_, err := s.AcquireLease(ctx, "websub", NewUUID(), "relay-a", time.Minute)
	wantErr(t, "lease in unknown project", err, store.ErrNotFound)
	if _, err := s.AcquireLease(ctx, "websub", pid, "relay-a", 0); err == nil {
		t.Fatal("zero ttl accepted")
	}

	// Eight processes race for one free lease: exactly one wins.
	var wins atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Go(func() {
			ok, err := s.AcquireLease(ctx, "race", pid, string(rune('a'+i)), time.Minute)
			if err != nil {
				errs <- err
			}
			if ok {
				wins.Add(1)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := wins.Load(); n != 1 {
		t.Fatalf("%d holders won one lease", n)
	}
}
