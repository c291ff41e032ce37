package sqlite

// Edge cases of the group committer's replay (writer.go, batch): every job
// is answered exactly once, and nothing of a failed job stays stored.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/internal/groupcommit"
	"github.com/acrelay/acrelay/store/internal/groupcommit/gctest"
	"github.com/acrelay/acrelay/store/storetest"
)

func appendJobCtx(ctx context.Context, ev *eventAndBytes, res *store.AppendResult, after func(*txn) error) *job {
	return groupcommit.NewJob(ctx, func(t *txn) error {
		in, err := newAppendInput(ev.ev, ev.c)
		if err != nil {
			return err
		}
		if *res, err = appendTx(t, in); err != nil {
			return err
		}
		if after != nil {
			return after(t)
		}
		return nil
	})
}

func setupWriterTest(t *testing.T) (*DB, *storetest.Signer, string) {
	ctx := context.Background()
	db := openInternal(t, filepath.Join(t.TempDir(), "r.db"))
	p, err := db.CreateProject(ctx, storetest.NewUUID())
	if err != nil {
		t.Fatal(err)
	}
	return db, storetest.NewSigner(t, p.ID).Register(t, db), p.ID
}

// A job that succeeded unguarded, whose ctx then ends, is skipped by the
// replay: it is answered ctx's error and nothing of it is stored.
func TestReplaySkipsJobWhoseContextEnded(t *testing.T) {
	db, s, pid := setupWriterTest(t)
	cctx, cancel := context.WithCancel(context.Background())
	a, bad, c := newEvent(t, s, "a"), newEvent(t, s, "bad"), newEvent(t, s, "c")
	var ra, rb, rc store.AppendResult
	boom := fmt.Errorf("boom: %w", store.ErrUnavailable)
	ja := appendJobCtx(cctx, a, &ra, nil)
	jb := appendJobCtx(context.Background(), bad, &rb, func(*txn) error { return boom })
	jc := appendJobCtx(context.Background(), c, &rc, nil)
	db.wmu.Lock()
	b := db.beginBatch()
	b.gc.Take(ja)
	cancel()
	b.gc.Take(jb)
	b.gc.Take(jc)
	b.commit()
	db.wmu.Unlock()
	if err := gctest.Answer(t, ja); !errors.Is(err, context.Canceled) {
		t.Errorf("a: %v", err)
	}
	if err := gctest.Answer(t, jb); !errors.Is(err, boom) {
		t.Errorf("bad: %v", err)
	}
	if err := gctest.Answer(t, jc); err != nil || rc.Record.ReceivedSeq != 1 {
		t.Errorf("c: %v at %d", err, rc.Record.ReceivedSeq)
	}
	wantLog(t, db, pid, []string{c.ev.ID})
}

// A job that panics after writing, unguarded: replayed, it gets its own
// error and the others commit.
func TestReplayIsolatesPanicAfterWrite(t *testing.T) {
	db, s, pid := setupWriterTest(t)
	a, bad, c := newEvent(t, s, "a"), newEvent(t, s, "bad"), newEvent(t, s, "c")
	var ra, rb, rc store.AppendResult
	ja := appendJobCtx(context.Background(), a, &ra, nil)
	jb := appendJobCtx(context.Background(), bad, &rb, func(*txn) error { panic("kaboom") })
	jc := appendJobCtx(context.Background(), c, &rc, nil)
	runBatch(db, ja, jb, jc)
	if err := gctest.Answer(t, ja); err != nil {
		t.Errorf("a: %v", err)
	}
	if err := gctest.Answer(t, jb); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("bad: %v", err)
	}
	if err := gctest.Answer(t, jc); err != nil {
		t.Errorf("c: %v", err)
	}
	wantLog(t, db, pid, []string{a.ev.ID, c.ev.ID})
	// the state is right afterwards
	d := newEvent(t, s, "d")
	if res, err := db.Append(context.Background(), d.ev, d.c); err != nil || res.Record.ReceivedSeq != 3 {
		t.Fatalf("d: %v at %d", err, res.Record.ReceivedSeq)
	}
}

// BEGIN fails during the replay: every job is answered exactly once with
// ErrUnavailable, later jobs of the batch too, and nothing is stored.
func TestReplayBeginFails(t *testing.T) {
	db, s, pid := setupWriterTest(t)
	a, bad, c := newEvent(t, s, "a"), newEvent(t, s, "bad"), newEvent(t, s, "c")
	var ra, rb, rc store.AppendResult
	closed, _ := sql.Open("sqlite", ":memory:")
	closed.Close()
	orig := db.w
	boom := fmt.Errorf("boom: %w", store.ErrUnavailable)
	ja := appendJobCtx(context.Background(), a, &ra, nil)
	jb := appendJobCtx(context.Background(), bad, &rb, func(*txn) error { db.w = closed; return boom })
	jc := appendJobCtx(context.Background(), c, &rc, nil)
	db.wmu.Lock()
	b := db.beginBatch()
	b.gc.Take(ja)
	b.gc.Take(jb)
	db.w = orig
	b.gc.Take(jc)
	b.commit()
	db.wmu.Unlock()
	for i, j := range []*job{ja, jb, jc} {
		if err := gctest.Answer(t, j); !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("job %d: %v", i, err)
		}
	}
	wantLog(t, db, pid, nil)
	d := newEvent(t, s, "d")
	if res, err := db.Append(context.Background(), d.ev, d.c); err != nil || res.Record.ReceivedSeq != 1 {
		t.Fatalf("d: %v at %d", err, res.Record.ReceivedSeq)
	}
}

// The transaction breaks in the middle of the replay (a job ends it):
// fail answers the jobs replayed so far, the rest get the same answer.
func TestReplayTransactionBreaks(t *testing.T) {
	db, s, pid := setupWriterTest(t)
	evs := []*eventAndBytes{newEvent(t, s, "0"), newEvent(t, s, "1"), newEvent(t, s, "2"), newEvent(t, s, "3")}
	res := make([]store.AppendResult, 4)
	boom := fmt.Errorf("boom: %w", store.ErrUnavailable)
	runs := 0
	jobs := []*job{
		appendJobCtx(context.Background(), evs[0], &res[0], nil),
		appendJobCtx(context.Background(), evs[1], &res[1], func(t *txn) error {
			runs++
			if runs == 2 { // in the replay: end the transaction behind the batch's back
				_, err := t.exec("ROLLBACK")
				return err
			}
			return nil
		}),
		appendJobCtx(context.Background(), evs[2], &res[2], func(*txn) error { return boom }),
		appendJobCtx(context.Background(), evs[3], &res[3], nil),
	}
	runBatch(db, jobs...)
	for i, j := range jobs {
		err := gctest.Answer(t, j)
		t.Logf("job %d: %v", i, err)
		if err == nil {
			t.Errorf("job %d succeeded", i)
		}
	}
	wantLog(t, db, pid, nil)
}

// A refusal decided before the job wrote anything (a sender that is not
// registered) is answered without replaying the batch, and the jobs around
// it commit.
func TestRefusalBeforeWriteDoesNotReplay(t *testing.T) {
	db, s, pid := setupWriterTest(t)
	stranger := storetest.NewSigner(t, pid)
	a, bad, c := newEvent(t, s, "a"), newEvent(t, stranger, "bad"), newEvent(t, s, "c")
	var ra, rb, rc store.AppendResult
	ja := appendJobCtx(context.Background(), a, &ra, nil)
	jb := appendJobCtx(context.Background(), bad, &rb, nil)
	jc := appendJobCtx(context.Background(), c, &rc, nil)
	db.wmu.Lock()
	b := db.beginBatch()
	b.gc.Take(ja)
	b.gc.Take(jb)
	if b.gc.Guarded() {
		t.Error("a refusal before any write replayed the batch")
	}
	b.gc.Take(jc)
	b.commit()
	db.wmu.Unlock()
	if err := gctest.Answer(t, ja); err != nil || ra.Record.ReceivedSeq != 1 {
		t.Errorf("a: %v at %d", err, ra.Record.ReceivedSeq)
	}
	if err := gctest.Answer(t, jb); !errors.Is(err, store.ErrSenderNotActive) {
		t.Errorf("bad: %v, want ErrSenderNotActive", err)
	}
	if err := gctest.Answer(t, jc); err != nil || rc.Record.ReceivedSeq != 2 {
		t.Errorf("c: %v at %d", err, rc.Record.ReceivedSeq)
	}
	wantLog(t, db, pid, []string{a.ev.ID, c.ev.ID})
}

// A job that returns nil although one of its statements failed (SQLite may
// have rolled the transaction back under it) is answered ErrUnavailable,
// and nothing of it is stored; the job after it commits.
func TestSwallowedStatementFailure(t *testing.T) {
	db, s, pid := setupWriterTest(t)
	a, c := newEvent(t, s, "a"), newEvent(t, s, "c")
	var ra, rc store.AppendResult
	ja := appendJobCtx(context.Background(), a, &ra, func(t *txn) error {
		_, _ = t.exec("INSERT INTO no_such_table VALUES (1)") // fails; ignored
		return nil
	})
	jc := appendJobCtx(context.Background(), c, &rc, nil)
	runBatch(db, ja, jc)
	if err := gctest.Answer(t, ja); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("a: %v, want ErrUnavailable", err)
	}
	if err := gctest.Answer(t, jc); err != nil || rc.Record.ReceivedSeq != 1 {
		t.Errorf("c: %v at %d, want success at 1", err, rc.Record.ReceivedSeq)
	}
	wantLog(t, db, pid, []string{c.ev.ID})
}

// A refusal after the job wrote (the job interface allows it) replays the
// batch, so the refused job's writes are rolled back even when no other
// job follows it.
func TestRefusalAfterWriteIsRolledBack(t *testing.T) {
	db, s, pid := setupWriterTest(t)
	a := newEvent(t, s, "refused after its insert")
	var ra store.AppendResult
	ja := appendJobCtx(context.Background(), a, &ra, func(*txn) error {
		return fmt.Errorf("refused after the insert: %w", store.ErrNotFound)
	})
	db.wmu.Lock()
	b := db.beginBatch()
	b.gc.Take(ja)
	if !b.gc.Guarded() {
		t.Error("a refusal after a write did not replay the batch")
	}
	b.commit()
	db.wmu.Unlock()
	if err := gctest.Answer(t, ja); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a: %v, want its refusal", err)
	}
	wantLog(t, db, pid, nil)
}

// TestBatchProperty: for any mix of appends that succeed, refuse before
// or after writing, fail after writing, panic after writing, ignore a
// failed statement, or whose context has ended, one batch answers every
// job exactly once with its own outcome, stores exactly the successful
// appends in job order with consecutive receipts, and leaves the writer's
// remembered state right (the next append takes the next receipt).
func TestBatchProperty(t *testing.T) {
	ctx := context.Background()
	db := openInternal(t, filepath.Join(t.TempDir(), "property.db"))
	kinds := []string{"ok", "ok", "ok", "refuse-before", "refuse-after", "fail-after", "panic-after", "swallow", "ctx-done"}
	rapid.Check(t, func(rt *rapid.T) {
		p, err := db.CreateProject(ctx, storetest.NewUUID())
		if err != nil {
			rt.Fatal(err)
		}
		s := storetest.NewSigner(t, p.ID).Register(t, db)
		stranger := storetest.NewSigner(t, p.ID)
		plan := rapid.SliceOfN(rapid.SampledFrom(kinds), 1, 12).Draw(rt, "jobs")
		refused := fmt.Errorf("refused after the insert: %w", store.ErrNotFound)
		failed := fmt.Errorf("failed after the insert: %w", store.ErrUnavailable)
		ended, cancel := context.WithCancel(ctx)
		cancel()
		jobs := make([]*job, len(plan))
		results := make([]store.AppendResult, len(plan))
		var want []string
		for i, kind := range plan {
			signer, jctx := s, ctx
			var after func(*txn) error
			switch kind {
			case "refuse-before":
				signer = stranger
			case "refuse-after":
				after = func(*txn) error { return refused }
			case "fail-after":
				after = func(*txn) error { return failed }
			case "panic-after":
				after = func(*txn) error { panic("after the insert") }
			case "swallow":
				after = func(t *txn) error {
					_, _ = t.exec("INSERT INTO no_such_table VALUES (1)")
					return nil
				}
			case "ctx-done":
				jctx = ended
			}
			ev := newEvent(t, signer, fmt.Sprintf("job %d: %s", i, kind))
			jobs[i] = appendJobCtx(jctx, ev, &results[i], after)
			if kind == "ok" {
				want = append(want, ev.ev.ID)
			}
		}
		runBatch(db, jobs...)

		seq := int64(0)
		for i, kind := range plan {
			var err error
			select {
			case err = <-jobs[i].Done():
			default:
				rt.Fatalf("job %d (%s) was not answered", i, kind)
			}
			select {
			case e := <-jobs[i].Done():
				rt.Fatalf("job %d (%s) answered twice: %v", i, kind, e)
			default:
			}
			var ok bool
			switch kind {
			case "ok":
				seq++
				ok = err == nil && results[i].Record.ReceivedSeq == seq
			case "refuse-before":
				ok = errors.Is(err, store.ErrSenderNotActive)
			case "refuse-after":
				ok = errors.Is(err, store.ErrNotFound)
			case "fail-after":
				ok = errors.Is(err, failed)
			case "panic-after", "swallow":
				ok = errors.Is(err, store.ErrUnavailable)
			case "ctx-done":
				ok = errors.Is(err, context.Canceled)
			}
			if !ok {
				rt.Fatalf("job %d (%s): %v at %d", i, kind, err, results[i].Record.ReceivedSeq)
			}
		}
		page, err := db.Events(ctx, store.EventQuery{ProjectID: p.ID, RepositoryID: "repo-1", Limit: 100})
		if err != nil {
			rt.Fatal(err)
		}
		var got []string
		for i, r := range page.Records {
			if r.ReceivedSeq != int64(i+1) {
				rt.Fatalf("record %d at %d", i, r.ReceivedSeq)
			}
			got = append(got, r.EventID)
		}
		if !slices.Equal(got, want) {
			rt.Fatalf("stored %q, want %q", got, want)
		}
		next := newEvent(t, s, "next")
		res, err := db.Append(ctx, next.ev, next.c)
		if err != nil || res.Record.ReceivedSeq != int64(len(want)+1) {
			rt.Fatalf("next append: %v at %d, want %d", err, res.Record.ReceivedSeq, len(want)+1)
		}
	})
}

// runBatch runs jobs as one group-commit batch, as writeLoop does.
func runBatch(db *DB, jobs ...*job) {
	db.wmu.Lock()
	defer db.wmu.Unlock()
	b := db.beginBatch()
	for _, j := range jobs {
		b.gc.Take(j)
	}
	b.commit()
}
