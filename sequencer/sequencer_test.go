package sequencer_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	xtlog "golang.org/x/mod/sumdb/tlog"

	"github.com/acrelay/acrelay/internal/teststore"
	"github.com/acrelay/acrelay/sequencer"
	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/storetest"
	"github.com/acrelay/acrelay/tlog"
)

var ctx = context.Background()

func newKey(t testing.TB) tlog.LogKey {
	t.Helper()
	skey, _, err := tlog.NewLogKey("relay.test")
	if err != nil {
		t.Fatal(err)
	}
	k, err := tlog.OpenLogKey(skey)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// appendN stores n events in project p and returns their records.
func appendN(t *testing.T, s store.Store, sg *storetest.Signer, n int) []store.Record {
	t.Helper()
	var out []store.Record
	for range n {
		ev, c := sg.Event(t, storetest.Spec{})
		res, err := s.Append(ctx, ev, c)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, res.Record)
	}
	return out
}

// wantTree checks the project's head against x/mod's tree hash of every
// stored record's immutable bytes, and its checkpoint against the key.
func wantTree(t *testing.T, s store.Store, key tlog.LogKey, p string, size int64) {
	t.Helper()
	head, err := s.TreeHead(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := s.RecordsAfter(ctx, p, 0, int(size)+1)
	if err != nil {
		t.Fatal(err)
	}
	if head.Size != size || int64(len(recs)) != size {
		t.Fatalf("tree size %d, %d records; want %d", head.Size, len(recs), size)
	}
	var hs []xtlog.Hash
	r := xtlog.HashReaderFunc(func(ix []int64) ([]xtlog.Hash, error) {
		out := make([]xtlog.Hash, len(ix))
		for i, x := range ix {
			out[i] = hs[x]
		}
		return out, nil
	})
	for i, rec := range recs {
		h, err := xtlog.StoredHashes(int64(i), rec.ImmutableJSON(), r)
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h...)
	}
	root, err := xtlog.TreeHash(size, r)
	if err != nil {
		t.Fatal(err)
	}
	if head.Root != root {
		t.Fatalf("root %x, want %x", head.Root, root)
	}
	c, _, err := tlog.OpenCheckpoint(head.Checkpoint, key.Verifier, "relay.test/"+p)
	if err != nil || c.Size != size || c.Root != root {
		t.Fatalf("checkpoint %+v, %v", c, err)
	}
}

func TestIntegrateInPages(t *testing.T) {
	teststore.Engines(t, func(t *testing.T, open teststore.Open) {
		s := open(t)
		p := storetest.NewUUID()
		if _, err := s.CreateProject(ctx, p); err != nil {
			t.Fatal(err)
		}
		sg := storetest.NewSigner(t, p).Register(t, s)
		key := newKey(t)
		var steps []int
		seq := sequencer.New(s, sequencer.Options{PublicURL: "https://relay.test/", Key: key, PageSize: 7,
			OnIntegrate: func(pid string, n int, lags []time.Duration) {
				if pid != p || len(lags) != n {
					t.Errorf("OnIntegrate(%s, %d, %d lags)", pid, n, len(lags))
				}
				steps = append(steps, n)
			}})
		head, err := seq.Integrate(ctx, p)
		if err != nil || head.Size != 0 || len(steps) != 0 {
			t.Fatalf("empty project: %+v, %v, steps %v", head, err, steps)
		}
		appendN(t, s, sg, 23)
		head, err = seq.Integrate(ctx, p)
		if err != nil || head.Size != 23 || fmt.Sprint(steps) != "[7 7 7 2]" {
			t.Fatalf("23 records: size %d, %v, steps %v", head.Size, err, steps)
		}
		wantTree(t, s, key, p, 23)
		appendN(t, s, sg, 1)
		if head, err = seq.Integrate(ctx, p); err != nil || head.Size != 24 {
			t.Fatalf("one more: %d, %v", head.Size, err)
		}
		wantTree(t, s, key, p, 24)

		// Two sequencers racing on one project leave one correct tree.
		appendN(t, s, sg, 40)
		other := sequencer.New(s, sequencer.Options{PublicURL: "https://relay.test", Key: key, PageSize: 3})
		var wg sync.WaitGroup
		for _, q := range []*sequencer.Sequencer{seq, other} {
			wg.Go(func() {
				if _, err := q.Integrate(ctx, p); err != nil {
					t.Errorf("racing integrate: %v", err)
				}
			})
		}
		wg.Wait()
		wantTree(t, s, key, p, 64)
	})
}

func TestRunWakesOnAdvances(t *testing.T) {
	teststore.Engines(t, func(t *testing.T, open teststore.Open) {
		s := open(t)
		key := newKey(t)
		// A project with records before the sequencer starts is
		// integrated by the start-up scan; one appended later by a wake.
		var pids []string
		var signers []*storetest.Signer
		for range 2 {
			p := storetest.NewUUID()
			if _, err := s.CreateProject(ctx, p); err != nil {
				t.Fatal(err)
			}
			pids = append(pids, p)
			signers = append(signers, storetest.NewSigner(t, p).Register(t, s))
		}
		appendN(t, s, signers[0], 5)
		integrated := make(chan report, 100)
		seq := sequencer.New(s, sequencer.Options{PublicURL: "https://relay.test", Key: key,
			OnIntegrate: func(pid string, n int, _ []time.Duration) { integrated <- report{pid, n} }})
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- seq.Run(rctx) }()
		waitFor(t, integrated, pids[0], 5)
		appendN(t, s, signers[1], 3)
		waitFor(t, integrated, pids[1], 3)
		appendN(t, s, signers[0], 2)
		waitFor(t, integrated, pids[0], 2)
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run: %v", err)
		}
		wantTree(t, s, key, pids[0], 7)
		wantTree(t, s, key, pids[1], 3)
	})
}

type report struct {
	project string
	leaves  int
}

// waitFor reads integration reports until want leaves of project were
// integrated (the sequencer may take an append burst in several steps;
// a report of another project, or past want, fails; a generous deadline
// only ends a hung test).
func waitFor(t *testing.T, c <-chan report, project string, want int) {
	t.Helper()
	got := 0
	for got < want {
		select {
		case r := <-c:
			if r.project != project || got+r.leaves > want {
				t.Fatalf("integrated %+v after %d of %s, want %d", r, got, project, want)
			}
			got += r.leaves
		case <-time.After(30 * time.Second):
			t.Fatal(errors.New("no integration within 30 s"))
		}
	}
}

// integration is one OnIntegrate call and the (fake) time it came.
type integration struct {
	at     time.Time
	leaves int
}

func (i integration) String() string {
	return fmt.Sprintf("%d at %s", i.leaves, i.at.Format("15:04:05.000"))
}

func sameIntegrations(a, b []integration) bool {
	return slices.EqualFunc(a, b, func(x, y integration) bool { return x.at.Equal(y.at) && x.leaves == y.leaves })
}

// runOnFakeTime starts s's Run in the bubble and returns the integrations
// of project p so far (read after synctest.Wait) and a stop function.
func runOnFakeTime(t *testing.T, st sequencer.Store, opt sequencer.Options, p string) (got func() []integration, stop func()) {
	t.Helper()
	var mu sync.Mutex
	var steps []integration
	opt.OnIntegrate = func(pid string, n int, _ []time.Duration) {
		if pid != p {
			t.Errorf("integrated %d leaves of %s, want only %s", n, pid, p)
		}
		mu.Lock()
		steps = append(steps, integration{time.Now(), n})
		mu.Unlock()
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- sequencer.New(st, opt).Run(rctx) }()
	stop = func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}
	got = func() []integration {
		mu.Lock()
		defer mu.Unlock()
		return append([]integration(nil), steps...)
	}
	return got, stop
}

// TestRunPacesPasses, on fake time (testing/synctest): appends arriving
// every 50 ms are integrated once per Pace, each pass taking every
// advance since the one before, so no record waits longer than Pace for
// its checkpoint and a busy project costs one step per Pace, not one per
// append. The passes come exactly at the pace's ends. (SQLite, opened in
// the bubble; the PostgreSQL store's LISTEN never lets fake time move.)
func TestRunPacesPasses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := teststore.SQLite(t)
		key := newKey(t)
		p := storetest.NewUUID()
		if _, err := s.CreateProject(ctx, p); err != nil {
			t.Fatal(err)
		}
		sg := storetest.NewSigner(t, p).Register(t, s)
		appendN(t, s, sg, 3)
		const pace = 250 * time.Millisecond
		t0 := time.Now()
		got, stop := runOnFakeTime(t, s, sequencer.Options{PublicURL: "https://relay.test", Key: key, Pace: pace}, p)
		defer stop()
		synctest.Wait()
		if steps := got(); !sameIntegrations(steps, []integration{{t0, 3}}) {
			t.Fatalf("start-up: integrations %v, want the 3 stored records at once", steps)
		}
		// 20 appends, at 25 ms + 50 ms × k: five in each of the next four paces.
		time.Sleep(25 * time.Millisecond) // fake time
		for range 20 {
			appendN(t, s, sg, 1)
			time.Sleep(50 * time.Millisecond) // fake time
		}
		synctest.Wait()
		want := []integration{{t0, 3}}
		for k := 1; k <= 4; k++ {
			want = append(want, integration{t0.Add(time.Duration(k) * pace), 5})
		}
		if steps := got(); !sameIntegrations(steps, want) {
			t.Fatalf("integrations (time, leaves)\n got %v\nwant %v", steps, want)
		}
		wantTree(t, s, key, p, 23)
	})
}

// failingTree is a real store whose IntegrateTree fails while fail is
// above zero, counting down: an integration step the database refuses.
type failingTree struct {
	store.Store
	mu       sync.Mutex
	fail     int
	attempts []time.Time
}

func (f *failingTree) IntegrateTree(ctx context.Context, projectID string, oldSize int64, tiles []xtlog.Tile, data [][]byte, head store.TreeHead) error {
	f.mu.Lock()
	f.attempts = append(f.attempts, time.Now())
	failing := f.fail > 0
	f.fail--
	f.mu.Unlock()
	if failing {
		return fmt.Errorf("integrate tree: %w", store.ErrUnavailable)
	}
	return f.Store.IntegrateTree(ctx, projectID, oldSize, tiles, data, head)
}

// TestRunRetriesAFailedProjectEverySecond, on fake time: a project whose
// step fails is tried again a second later, without any advance to wake
// the sequencer, until the step is stored.
func TestRunRetriesAFailedProjectEverySecond(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &failingTree{Store: teststore.SQLite(t), fail: 2}
		key := newKey(t)
		p := storetest.NewUUID()
		if _, err := s.CreateProject(ctx, p); err != nil {
			t.Fatal(err)
		}
		sg := storetest.NewSigner(t, p).Register(t, s)
		appendN(t, s, sg, 4)
		t0 := time.Now()
		got, stop := runOnFakeTime(t, s, sequencer.Options{PublicURL: "https://relay.test", Key: key}, p)
		defer stop()
		time.Sleep(10 * time.Second) // fake time
		want := []time.Time{t0, t0.Add(time.Second), t0.Add(2 * time.Second)}
		s.mu.Lock()
		attempts := s.attempts
		s.mu.Unlock()
		if !slices.EqualFunc(attempts, want, time.Time.Equal) {
			t.Fatalf("integration attempts at %v, want %v (then none: the third is stored)", attempts, want)
		}
		if steps := got(); !sameIntegrations(steps, []integration{{want[2], 4}}) {
			t.Fatalf("integrations %v, want the 4 records at the third attempt", steps)
		}
		wantTree(t, s, key, p, 4)
	})
}
