package sqlite

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/internal/groupcommit"
	"github.com/acrelay/acrelay/store/storetest"
)

// wantLog checks that repo-1 of the project holds exactly ids at
// received_seq 1, 2, …, and that Head is the last of them.
func wantLog(t *testing.T, db *DB, projectID string, ids []string) {
	t.Helper()
	page, err := db.Events(context.Background(), store.EventQuery{ProjectID: projectID, RepositoryID: "repo-1", Limit: 200})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for i, r := range page.Records {
		if r.ReceivedSeq != int64(i+1) {
			t.Fatalf("record %s at %d, want %d", r.EventID, r.ReceivedSeq, i+1)
		}
		got = append(got, r.EventID)
	}
	if !slices.Equal(got, ids) {
		t.Fatalf("stored %q, want %q", got, ids)
	}
	if seq, _, err := db.Head(context.Background(), projectID); err != nil || seq != int64(len(ids)) {
		t.Fatalf("head %d, %v; want %d", seq, err, len(ids))
	}
}

func openInternal(t *testing.T, path string) *DB {
	t.Helper()
	db, err := Open(context.Background(), path, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return db
}

// TestStaleReceiptCounterRecovers: the safety net under the remembered
// receipt counter. A row is stored behind the writer's back (a job that
// bumps the project's counter and inserts an event at the next
// received_seq, as an append by other code would), so the counter the
// writer remembers is one behind. The next append collides on
// (project_id, received_seq); its batch is rolled back, forgets its state
// and is replayed with each job in a savepoint, so the append re-reads the
// counter and takes the right receipt, with nothing of the failed attempt
// stored.
func TestStaleReceiptCounterRecovers(t *testing.T) {
	ctx := context.Background()
	db := openInternal(t, filepath.Join(t.TempDir(), "stale.db"))
	p, err := db.CreateProject(ctx, storetest.NewUUID())
	if err != nil {
		t.Fatal(err)
	}
	s := storetest.NewSigner(t, p.ID).Register(t, db)
	var ids []string
	for i := range 3 {
		ev, c := s.Event(t, storetest.Spec{})
		res, err := db.Append(ctx, ev, c)
		if err != nil || !res.Created || res.Record.ReceivedSeq != int64(i+1) {
			t.Fatalf("append %d: %+v, %v", i, res.Record, err)
		}
		ids = append(ids, ev.ID)
	}

	const intruder = "sha256:intruder"
	var remembered, taken int64 = -1, -1
	err = db.submit(ctx, "intrude", func(t *txn) error {
		if ps, ok := t.ws.projects[p.ID]; ok {
			remembered = ps.lastSeq
		}
		if err := t.queryRow(`UPDATE projects SET last_seq = last_seq + 1, last_received_at = `+nowMS+`
			WHERE id = ? RETURNING last_seq`, p.ID).Scan(&taken); err != nil {
			return err
		}
		_, err := t.exec(`INSERT INTO events (project_id, received_seq, event_id, received_at, repository_id,
			thread_id, kind, identity_id, device_id, session_id, session_seq, canonical)
			VALUES (?, ?, ?, `+nowMS+`, 'repo-1', 'thread-1', 'intent', 'someone', 'device', 'session', 1, x'7b7d')`,
			p.ID, taken, intruder)
		return err
	})
	if err != nil {
		t.Fatalf("insert behind the writer: %v", err)
	}
	if remembered != 3 || taken != 4 {
		t.Fatalf("writer remembered last_seq %d, the intruder took %d; want 3 and 4 (a warm, stale counter)", remembered, taken)
	}

	ev4, c4 := s.Event(t, storetest.Spec{Summary: "after the intruder"})
	res, err := db.Append(ctx, ev4, c4)
	if err != nil || !res.Created || res.Record.ReceivedSeq != 5 {
		t.Fatalf("append on a stale counter: created %v, received_seq %d, %v; want a new event at 5 (replayed with the counter re-read)", res.Created, res.Record.ReceivedSeq, err)
	}
	ev5, c5 := s.Event(t, storetest.Spec{})
	if res, err := db.Append(ctx, ev5, c5); err != nil || !res.Created || res.Record.ReceivedSeq != 6 {
		t.Fatalf("next append: created %v, received_seq %d, %v; want a new event at 6", res.Created, res.Record.ReceivedSeq, err)
	}
	ids = append(ids, intruder, ev4.ID, ev5.ID)

	wantLog(t, db, p.ID, ids)
	var check string
	if err := db.w.QueryRowContext(ctx, "PRAGMA integrity_check").Scan(&check); err != nil || check != "ok" {
		t.Fatalf("integrity_check %q, %v", check, err)
	}
}

// TestReceiptTime: received_at is the append's clock at millisecond
// precision in UTC, never before the project's previous receipt.
func TestReceiptTime(t *testing.T) {
	now := time.Date(2026, 7, 19, 12, 0, 0, 123_999_999, time.FixedZone("CEST", 2*3600))
	for _, tc := range []struct {
		name, last, want string
	}{
		{"first receipt", "", "2026-07-19T10:00:00.123Z"},
		{"clock ahead", "2026-07-19T09:59:59.999Z", "2026-07-19T10:00:00.123Z"},
		{"same millisecond", "2026-07-19T10:00:00.123Z", "2026-07-19T10:00:00.123Z"},
		{"clock behind the last receipt", "2026-07-19T10:00:01.500Z", "2026-07-19T10:00:01.500Z"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := receiptTime(now, tc.last); got != tc.want {
				t.Fatalf("receiptTime(%v, %q) = %q, want %q", now, tc.last, got, tc.want)
			}
		})
	}
}

// TestRolledBackJobStagesNothing: what a job changed in the remembered
// state is dropped when the job is rolled back to its savepoint, even
// when it fails with a refusal (which keeps the rest of the state). Here
// a job stores an event through appendTx and then refuses; the next job
// of the same batch and the next batch take the receipt it gave up, with
// no gap.
func TestRolledBackJobStagesNothing(t *testing.T) {
	ctx := context.Background()
	db := openInternal(t, filepath.Join(t.TempDir(), "staged.db"))
	p, err := db.CreateProject(ctx, storetest.NewUUID())
	if err != nil {
		t.Fatal(err)
	}
	s := storetest.NewSigner(t, p.ID).Register(t, db)
	var ids []string
	for range 2 {
		ev, c := s.Event(t, storetest.Spec{})
		if res, err := db.Append(ctx, ev, c); err != nil || !res.Created {
			t.Fatalf("append: %+v, %v", res, err)
		}
		ids = append(ids, ev.ID)
	}
	// A new sender too: its first append stages "seen active".
	s2 := storetest.NewSigner(t, p.ID).Register(t, db)
	newJob := func(run func(t *txn) error) *job {
		return groupcommit.NewJob(ctx, run)
	}
	appendJob := func(ev *eventAndBytes, created *store.AppendResult) *job {
		return newJob(func(t *txn) error {
			in, err := newAppendInput(ev.ev, ev.c)
			if err != nil {
				return err
			}
			*created, err = appendTx(t, in)
			return err
		})
	}
	undone := newEvent(t, s2, "rolled back")
	var undoneRes, nextRes store.AppendResult
	inner := appendJob(undone, &undoneRes)
	refused := newJob(func(t *txn) error {
		if err := inner.Run(t); err != nil {
			return err
		}
		return fmt.Errorf("refused after the insert: %w", store.ErrNotFound)
	})
	next := newEvent(t, s, "same batch")
	// Run both jobs in one batch, as the writer goroutine would (it is
	// idle: nothing is queued, and wmu keeps it out).
	db.wmu.Lock()
	second := appendJob(next, &nextRes)
	b := db.beginBatch()
	b.gc.Take(refused)
	b.gc.Take(second)
	b.commit()
	db.wmu.Unlock()
	if err := <-second.Done(); err != nil {
		t.Fatalf("next job of the batch: %v", err)
	}
	if err := <-refused.Done(); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("refusing job: %v", err)
	}
	if !undoneRes.Created || undoneRes.Record.ReceivedSeq != 3 {
		t.Fatalf("the refusing job's append: %+v; want created at 3 before its rollback", undoneRes.Record)
	}
	ids = append(ids, next.ev.ID)
	if nextRes.Record.ReceivedSeq != 3 || !nextRes.Created {
		t.Fatalf("next job of the batch: created %v at %d; want created at 3", nextRes.Created, nextRes.Record.ReceivedSeq)
	}
	// The next batch: the rolled-back event is new, at 4.
	res, err := db.Append(ctx, undone.ev, undone.c)
	if err != nil || !res.Created || res.Record.ReceivedSeq != 4 {
		t.Fatalf("rolled-back event appended again: created %v at %d, %v; want created at 4", res.Created, res.Record.ReceivedSeq, err)
	}
	ids = append(ids, undone.ev.ID)
	wantLog(t, db, p.ID, ids)
}

// TestBatchReplaysWithSavepoints: jobs run without savepoints until one
// fails; the batch is then rolled back and replayed with each job in its
// own savepoint, so the failing job's writes (it failed after its insert)
// are undone while the jobs before and after it commit with consecutive
// receipts, and each job gets its own answer.
func TestBatchReplaysWithSavepoints(t *testing.T) {
	ctx := context.Background()
	db, s, pid := setupWriterTest(t)
	p := store.Project{ID: pid}
	appendJob := func(ev *eventAndBytes, res *store.AppendResult, after error) *job {
		return appendJobCtx(ctx, ev, res, func(*txn) error { return after })
	}
	first, bad, last := newEvent(t, s, "first"), newEvent(t, s, "fails after its insert"), newEvent(t, s, "last")
	var firstRes, badRes, lastRes store.AppendResult
	boom := fmt.Errorf("boom: %w", store.ErrUnavailable)
	jobs := []*job{appendJob(first, &firstRes, nil), appendJob(bad, &badRes, boom), appendJob(last, &lastRes, nil)}

	db.wmu.Lock()
	b := db.beginBatch()
	b.gc.Take(jobs[0])
	if b.gc.Guarded() {
		t.Error("a batch whose jobs all succeed ran with savepoints")
	}
	b.gc.Take(jobs[1])
	if !b.gc.Guarded() {
		t.Error("a failed job did not turn the batch to savepoints")
	}
	b.gc.Take(jobs[2])
	b.commit()
	db.wmu.Unlock()

	if err := <-jobs[0].Done(); err != nil || firstRes.Record.ReceivedSeq != 1 {
		t.Errorf("first job: %v at %d; want success at 1", err, firstRes.Record.ReceivedSeq)
	}
	if err := <-jobs[1].Done(); !errors.Is(err, boom) {
		t.Errorf("failing job: %v; want its own error", err)
	}
	if err := <-jobs[2].Done(); err != nil || lastRes.Record.ReceivedSeq != 2 {
		t.Errorf("last job: %v at %d; want success at 2", err, lastRes.Record.ReceivedSeq)
	}
	wantLog(t, db, p.ID, []string{first.ev.ID, last.ev.ID})
	// The failed event is new to the next batch, which runs unguarded again.
	res, err := db.Append(ctx, bad.ev, bad.c)
	if err != nil || !res.Created || res.Record.ReceivedSeq != 3 {
		t.Fatalf("failed event appended again: created %v at %d, %v; want created at 3", res.Created, res.Record.ReceivedSeq, err)
	}
	wantLog(t, db, p.ID, []string{first.ev.ID, last.ev.ID, bad.ev.ID})
}

type eventAndBytes struct {
	ev *correspondence.Event
	c  []byte
}

func newEvent(t *testing.T, s *storetest.Signer, summary string) *eventAndBytes {
	t.Helper()
	ev, c := s.Event(t, storetest.Spec{Summary: summary})
	return &eventAndBytes{ev, c}
}

// TestTokenCacheAfterReset: a token revoked by another process must stop
// being served from the token cache even when the writer's state was just
// dropped (after a failed job or batch). Reset sets dataVersion to -1, and
// the next reading must count as a move (running the token invalidation):
// taken as a first reading, a revocation committed by another connection
// between the reset and that reading would never be noticed. (A bug found
// by this test and fixed in observe.)
func TestTokenCacheAfterReset(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "tokens.db")
	a := openInternal(t, path)
	b := openInternal(t, path)
	p, err := a.CreateProject(ctx, storetest.NewUUID())
	if err != nil {
		t.Fatal(err)
	}
	s := storetest.NewSigner(t, p.ID).Register(t, a)
	ev, c := s.Event(t, storetest.Spec{})
	if _, err := a.Append(ctx, ev, c); err != nil {
		t.Fatal(err)
	}
	tok := store.Token{ID: storetest.NewUUID(), ProjectID: p.ID, Scopes: []string{store.ScopeRead}, Hash: []byte("h")}
	if _, err := a.CreateToken(ctx, tok); err != nil {
		t.Fatal(err)
	}
	if got, err := a.GetToken(ctx, tok.ID); err != nil || got.Revoked {
		t.Fatalf("token: %+v, %v", got, err)
	}
	// A job failing with a driver error makes a's writer drop its state.
	if err := a.submit(ctx, "fail", func(t *txn) error {
		_, err := t.exec("SELECT * FROM no_such_table")
		return err
	}); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("failing job: %v", err)
	}
	// b revokes before a's writer reads data_version again (wmu pins that
	// order; in production it is the ≤50 ms until checkExternal, or longer
	// when a's batch failed on a lock b held).
	a.wmu.Lock()
	err = b.RevokeToken(ctx, tok.ID)
	a.wmu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Second)
	for {
		got, err := a.GetToken(ctx, tok.ID)
		if err == nil && got.Revoked {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("3 s after another process revoked it, a serves the token as %+v, %v", got, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestReplacedWriterConnectionForgets: data_version counts per connection.
// When database/sql replaces a broken writer connection, the new one's
// count could equal the old baseline, so a revocation committed by
// another process in between would go unnoticed; a connection without the
// writer mark counts as a move.
func TestReplacedWriterConnectionForgets(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "replaced.db")
	a := openInternal(t, path)
	p, err := a.CreateProject(ctx, storetest.NewUUID())
	if err != nil {
		t.Fatal(err)
	}
	s := storetest.NewSigner(t, p.ID).Register(t, a)
	for i := range 2 {
		ev, c := s.Event(t, storetest.Spec{})
		if res, err := a.Append(ctx, ev, c); err != nil || res.Record.ReceivedSeq != int64(i+1) {
			t.Fatalf("append %d: %+v %v", i, res.Record, err)
		}
	}
	b := openInternal(t, path)

	// Hold the writer while its connection is thrown away and the other
	// process revokes the key, so that A's first reading is on the new
	// connection, after the revocation.
	a.wmu.Lock()
	conn, err := a.w.Conn(ctx)
	if err != nil {
		a.wmu.Unlock()
		t.Fatal(err)
	}
	_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	conn.Close()
	if _, err := b.RevokeKey(ctx, p.ID, s.KeyID); err != nil {
		a.wmu.Unlock()
		t.Fatal(err)
	}
	a.wmu.Unlock()

	ev, c := s.Event(t, storetest.Spec{})
	if res, err := a.Append(ctx, ev, c); !errors.Is(err, store.ErrSenderNotActive) {
		t.Fatalf("append with a key revoked by another process: seq %d, %v; want ErrSenderNotActive", res.Record.ReceivedSeq, err)
	}
	if seq, _, err := a.Head(ctx, p.ID); err != nil || seq != 2 {
		t.Fatalf("head %d, %v; want 2", seq, err)
	}
}
