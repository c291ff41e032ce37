package sequencer_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
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
