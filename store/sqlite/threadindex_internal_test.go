package sqlite

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/storetest"
)

type thrRow struct {
	repo, thread string
	seq          int64
}

func thrOpen(t *testing.T, path string, o Options) *DB {
	t.Helper()
	db, err := OpenWith(context.Background(), path, slog.New(slog.DiscardHandler), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// thrInvariant checks migration 0005's invariant: every event up to its
// project's mark is in thread_events, and no thread_events row lacks its
// event.
func thrInvariant(t *testing.T, db *DB) {
	t.Helper()
	var missing, orphan, above int
	if err := db.w.QueryRow(`SELECT count(*) FROM events e JOIN projects p ON p.id = e.project_id
		WHERE e.received_seq <= p.thread_indexed_seq AND NOT EXISTS (SELECT 1 FROM thread_events x
		WHERE x.project_id = e.project_id AND x.repository_id = e.repository_id AND x.thread_id = e.thread_id AND x.received_seq = e.received_seq)`).Scan(&missing); err != nil {
		t.Fatal(err)
	}
	if err := db.w.QueryRow(`SELECT count(*) FROM thread_events x WHERE NOT EXISTS (SELECT 1 FROM events e
		WHERE x.project_id = e.project_id AND x.repository_id = e.repository_id AND x.thread_id = e.thread_id AND x.received_seq = e.received_seq)`).Scan(&orphan); err != nil {
		t.Fatal(err)
	}
	if err := db.w.QueryRow(`SELECT count(*) FROM thread_events x JOIN projects p ON p.id = x.project_id WHERE x.received_seq > p.thread_indexed_seq`).Scan(&above); err != nil {
		t.Fatal(err)
	}
	if missing != 0 || orphan != 0 {
		t.Fatalf("invariant: %d events under the mark missing, %d orphans, %d above", missing, orphan, above)
	}
	if above != 0 {
		t.Logf("note: %d thread_events rows above the mark", above)
	}
}

func thrBrute(t *testing.T, db *DB, pid string) []thrRow {
	t.Helper()
	rows, err := db.w.Query(`SELECT repository_id, thread_id, received_seq FROM events WHERE project_id = ? ORDER BY received_seq`, pid)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var all []thrRow
	for rows.Next() {
		var r thrRow
		if err := rows.Scan(&r.repo, &r.thread, &r.seq); err != nil {
			t.Fatal(err)
		}
		all = append(all, r)
	}
	return all
}

func thrCheckReads(t *testing.T, db *DB, pid string, all []thrRow, repos, threads []string) {
	t.Helper()
	ctx := context.Background()
	for _, repo := range repos {
		for _, thread := range threads {
			var want []int64
			for _, r := range all {
				if r.repo == repo && r.thread == thread {
					want = append(want, r.seq)
				}
			}
			for after := int64(-1); after <= int64(len(all))+1; after += 1 + int64(len(all)/40) {
				for _, limit := range []int{1, 2, 3, 5, 200} {
					page, err := db.Events(ctx, store.EventQuery{ProjectID: pid, RepositoryID: repo, ThreadID: thread, After: after, Limit: limit})
					if err != nil {
						t.Fatal(err)
					}
					var got []int64
					for _, r := range page.Records {
						got = append(got, r.ReceivedSeq)
					}
					var exp []int64
					for _, s := range want {
						if s > after {
							exp = append(exp, s)
						}
					}
					more := len(exp) > limit
					exp = exp[:min(limit, len(exp))]
					if !slices.Equal(got, exp) || page.HasMore != more {
						t.Fatalf("%s/%s after %d limit %d: got %v %v want %v %v", repo, thread, after, limit, got, page.HasMore, exp, more)
					}
				}
			}
			v, err := db.VoiceSnapshot(ctx, store.VoiceQuery{ProjectID: pid, RepositoryID: repo, ThreadID: thread})
			if err != nil {
				t.Fatal(err)
			}
			var got []int64
			for _, r := range v.Recent {
				got = append(got, r.ReceivedSeq)
			}
			exp := slices.Clone(want)
			slices.Reverse(exp)
			exp = exp[:min(len(exp), store.VoiceRecent)]
			if !slices.Equal(got, exp) || v.RecentTruncated != (len(want) > store.VoiceRecent) {
				t.Fatalf("voice %s/%s: %v (trunc %v), want %v", repo, thread, got, v.RecentTruncated, exp)
			}
		}
	}
}

// TestThreadIndexMultiStore: three stores on one file (the index taken
// every 3 and every 5 appends, and one transaction per event with every
// 2) append concurrently to two projects while two readers page through
// threads. Every concurrent page is a prefix of the final answer; at the
// end the invariant holds and every store's thread pages and voice
// windows equal the filtered log. (From a review helper.)
func TestThreadIndexMultiStore(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "m.db")
	a := thrOpen(t, path, Options{ThreadIndexEvery: 3})
	b := thrOpen(t, path, Options{ThreadIndexEvery: 5})
	c := thrOpen(t, path, Options{ThreadIndexEvery: 2, MaxBatch: 1})
	dbs := []*DB{a, b, c}
	repos := []string{"repo-1", "repo-2"}
	threads := []string{"t-a", "t-b", "t-c", "t-rare"}
	var pids []string
	for range 2 {
		p, err := a.CreateProject(ctx, storetest.NewUUID())
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, p.ID)
	}
	type evc struct {
		ev *correspondence.Event
		c  []byte
	}
	const perG = 30
	var work [][]evc
	for g := range 6 {
		pid := pids[g%2]
		s := storetest.NewSigner(t, pid).Register(t, dbs[g%3])
		var list []evc
		for i := range perG {
			th := threads[rand.IntN(3)]
			if rand.IntN(20) == 0 {
				th = "t-rare"
			}
			ev, c := s.Event(t, storetest.Spec{RepositoryID: repos[rand.IntN(2)], ThreadID: th, Summary: fmt.Sprint(g, i)})
			list = append(list, evc{ev, c})
		}
		work = append(work, list)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 1000)
	for g, list := range work {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i, e := range list {
				db := dbs[(g+i)%3]
				if _, err := db.Append(ctx, e.ev, e.c); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	// concurrent readers: every page must be a prefix of the final answer
	type obs struct {
		pid, repo, thread string
		after             int64
		got               []int64
	}
	var obsMu sync.Mutex
	var seen []obs
	stop := make(chan struct{})
	var rwg sync.WaitGroup
	for r := range 2 {
		rwg.Add(1)
		go func() {
			defer rwg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				pid := pids[rand.IntN(2)]
				repo, thread := repos[rand.IntN(2)], threads[rand.IntN(4)]
				after := int64(rand.IntN(100))
				page, err := dbs[r].Events(ctx, store.EventQuery{ProjectID: pid, RepositoryID: repo, ThreadID: thread, After: after, Limit: 5})
				if err != nil {
					errs <- err
					return
				}
				var got []int64
				for _, rec := range page.Records {
					got = append(got, rec.ReceivedSeq)
				}
				obsMu.Lock()
				seen = append(seen, obs{pid, repo, thread, after, got})
				obsMu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(stop)
	rwg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	thrInvariant(t, a)
	for _, pid := range pids {
		all := thrBrute(t, a, pid)
		if len(all) != 3*perG {
			t.Fatalf("project has %d events", len(all))
		}
		var mark int64
		a.w.QueryRow(`SELECT thread_indexed_seq FROM projects WHERE id = ?`, pid).Scan(&mark)
		t.Logf("project %s: %d events, mark %d", pid[:8], len(all), mark)
		for _, db := range dbs {
			thrCheckReads(t, db, pid, all, repos, threads)
		}
	}
	for _, o := range seen {
		all := thrBrute(t, a, o.pid)
		var exp []int64
		for _, r := range all {
			if r.repo == o.repo && r.thread == o.thread && r.seq > o.after {
				exp = append(exp, r.seq)
			}
		}
		exp = exp[:min(5, len(exp))]
		if len(o.got) > len(exp) || !slices.Equal(o.got, exp[:len(o.got)]) {
			t.Fatalf("concurrent read %+v, final %v", o, exp)
		}
	}
	t.Logf("%d concurrent reads checked", len(seen))
}

// TestThreadIndexReplay: batches replayed because a job fails after its
// insert, crossing the index threshold, then a reopen with another
// threshold: the invariant and the thread reads hold after each. (From a
// review helper.)
func TestThreadIndexReplay(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "r.db")
	db := thrOpen(t, path, Options{ThreadIndexEvery: 2})
	p, err := db.CreateProject(ctx, storetest.NewUUID())
	if err != nil {
		t.Fatal(err)
	}
	s := storetest.NewSigner(t, p.ID).Register(t, db)
	boom := fmt.Errorf("boom: %w", store.ErrUnavailable)
	for round := range 6 {
		var jobs []*job
		res := make([]store.AppendResult, 5)
		for i := range 5 {
			ev := newEvent(t, s, fmt.Sprint(round, i))
			ev.ev, ev.c = s.Event(t, storetest.Spec{ThreadID: []string{"x", "y"}[i%2], Summary: fmt.Sprint(round, i)})
			var after func(*txn) error
			if i == (round % 5) {
				after = func(*txn) error { return boom }
			}
			jobs = append(jobs, appendJobCtx(ctx, ev, &res[i], after))
		}
		runBatch(db, jobs...)
		for _, j := range jobs {
			<-j.Done()
		}
		thrInvariant(t, db)
		thrCheckReads(t, db, p.ID, thrBrute(t, db, p.ID), []string{"repo-1"}, []string{"x", "y"})
	}
	db.Close()
	db2 := thrOpen(t, path, Options{ThreadIndexEvery: 4})
	for i := range 7 {
		ev, c := s.Event(t, storetest.Spec{ThreadID: "x", Summary: fmt.Sprint("re", i)})
		if _, err := db2.Append(ctx, ev, c); err != nil {
			t.Fatal(err)
		}
		thrInvariant(t, db2)
		thrCheckReads(t, db2, p.ID, thrBrute(t, db2, p.ID), []string{"repo-1"}, []string{"x", "y"})
	}
}

// TestThreadReadsAcrossIndexAndTail: for every split of a project's events
// between thread_events and the tail (the index taken every 7 appends, so
// 0–6 events wait outside it), every thread-filtered page (each after and
// limit) and the voice window by thread equal what filtering the whole log
// gives.
func TestThreadReadsAcrossIndexAndTail(t *testing.T) {
	ctx := context.Background()
	db := thrOpen(t, filepath.Join(t.TempDir(), "t.db"), Options{ThreadIndexEvery: 7})
	p, err := db.CreateProject(ctx, storetest.NewUUID())
	if err != nil {
		t.Fatal(err)
	}
	sg := storetest.NewSigner(t, p.ID).Register(t, db)
	threads := []string{"t-a", "t-b", "t-c"}
	repos := []string{"repo-1", "repo-2"}
	for i := range 30 {
		ev, c := sg.Event(t, storetest.Spec{RepositoryID: repos[i%2], ThreadID: threads[(i/2)%3], SessionSeq: int64(i + 1)})
		if res, err := db.Append(ctx, ev, c); err != nil || !res.Created {
			t.Fatalf("append %d: %v", i, err)
		}
		thrCheckReads(t, db, p.ID, thrBrute(t, db, p.ID), repos, threads)
	}
}
