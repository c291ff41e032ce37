package sqlite_test

import (
	"context"
	"slices"
	"testing"

	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/sqlite"
	"github.com/acrelay/acrelay/store/storetest"
)

// openEvery opens a store whose thread index (thread_events, migration
// 0005) takes a project's events in bulk once every of them wait outside
// it, so that thread-filtered reads mix the index and the unindexed tail.
func openEvery(every int) func(t *testing.T) store.Store {
	return func(t *testing.T) store.Store {
		t.Helper()
		return openOpts(t, sqlite.Options{ThreadIndexEvery: every})
	}
}

// TestStoreThreadIndexEvery runs the store conformance suite with the
// thread index filled every third append of a project, so that its
// thread-filtered reads meet both the index and the tail.
func TestStoreThreadIndexEvery(t *testing.T) {
	storetest.Run(t, openEvery(3))
}

// TestThreadReadsAcrossIndexAndTail: for every split of a project's events
// between thread_events and the tail (the index taken every 7 appends, so
// 0–6 events wait outside it), every thread-filtered page (each after and
// limit) and the voice window by thread equal what filtering the whole log
// gives.
func TestThreadReadsAcrossIndexAndTail(t *testing.T) {
	ctx := context.Background()
	db := openEvery(7)(t)
	pid := newProject(t, db)
	sg := storetest.NewSigner(t, pid).Register(t, db)
	threads := []string{"t-a", "t-b", "t-c"}
	repos := []string{"repo-1", "repo-2"}
	type row struct {
		repo, thread string
		seq          int64
	}
	var all []row
	check := func() {
		t.Helper()
		for _, repo := range repos {
			for _, thread := range threads {
				var want []int64
				for _, r := range all {
					if r.repo == repo && r.thread == thread {
						want = append(want, r.seq)
					}
				}
				for after := int64(0); after <= int64(len(all)); after++ {
					for _, limit := range []int{1, 2, 5, 200} {
						page, err := db.Events(ctx, store.EventQuery{ProjectID: pid, RepositoryID: repo, ThreadID: thread, After: after, Limit: limit})
						if err != nil {
							t.Fatal(err)
						}
						var got []int64
						for _, r := range page.Records {
							if r.ThreadID != thread || r.RepositoryID != repo {
								t.Fatalf("%s/%s: record of %s/%s", repo, thread, r.RepositoryID, r.ThreadID)
							}
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
							t.Fatalf("%s/%s after %d limit %d (%d events): got %v more=%v, want %v more=%v",
								repo, thread, after, limit, len(all), got, page.HasMore, exp, more)
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
				if !slices.Equal(got, exp) {
					t.Fatalf("voice %s/%s (%d events): recent %v, want %v", repo, thread, len(all), got, exp)
				}
			}
		}
	}
	for i := range 30 {
		r := row{repo: repos[i%2], thread: threads[(i/2)%3]}
		ev, c := sg.Event(t, storetest.Spec{RepositoryID: r.repo, ThreadID: r.thread, SessionSeq: int64(i + 1)})
		res := appendNew(t, db, ev, c)
		r.seq = res.Record.ReceivedSeq
		all = append(all, r)
		check()
	}
}
