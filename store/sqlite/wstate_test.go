package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/sqlite"
	"github.com/acrelay/acrelay/store/storetest"
)

// Tests of what the group committer remembers (wstate, tokenCache): each
// one warms the caches first, then changes the rows behind them (a
// revocation, another connection, a fork) and checks the store still
// answers from what is really stored.

// openAt opens the store file at path; Close runs in Cleanup.
func openAt(t *testing.T, path string) *sqlite.DB {
	t.Helper()
	db, err := sqlite.Open(context.Background(), path, discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("close %s: %v", filepath.Base(path), err)
		}
	})
	return db
}

// openPair opens two stores on one file: b stands for another process
// (say an admin command) writing the database a serves.
func openPair(t *testing.T) (a, b *sqlite.DB) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "acrelay.db")
	return openAt(t, path), openAt(t, path)
}

func newProject(t *testing.T, db store.Store) string {
	t.Helper()
	p, err := db.CreateProject(context.Background(), storetest.NewUUID())
	if err != nil {
		t.Fatal(err)
	}
	return p.ID
}

// appendNew appends an event that must be new and returns its result.
func appendNew(t *testing.T, db store.Store, ev *correspondence.Event, c []byte) store.AppendResult {
	t.Helper()
	res, err := db.Append(context.Background(), ev, c)
	if err != nil {
		t.Fatalf("append %s (session_seq %d): %v", ev.ID, ev.SessionSeq, err)
	}
	if !res.Created {
		t.Fatalf("append %s: Created false, want a new event", ev.ID)
	}
	return res
}

// wantWarnings fails unless res carries exactly one session_fork warning
// naming ids (in sorted order), or no warning at all when ids is empty.
func wantWarnings(t *testing.T, what string, res store.AppendResult, ids ...string) {
	t.Helper()
	if len(ids) == 0 {
		if len(res.Warnings) != 0 {
			t.Fatalf("%s: warnings %+v, want none", what, res.Warnings)
		}
		return
	}
	want := slices.Sorted(slices.Values(ids))
	if len(res.Warnings) != 1 || res.Warnings[0].Code != store.WarnSessionFork || !slices.Equal(res.Warnings[0].EventIDs, want) {
		t.Fatalf("%s: warnings %+v, want one %s naming %q", what, res.Warnings, store.WarnSessionFork, want)
	}
}

// wantHead fails unless the project's head is seq.
func wantHead(t *testing.T, db store.Store, projectID string, seq int64) time.Time {
	t.Helper()
	got, at, err := db.Head(context.Background(), projectID)
	if err != nil || got != seq {
		t.Fatalf("head %d (%v), want %d", got, err, seq)
	}
	return at
}

// allRecords reads every record of the repository, page by page.
func allRecords(t *testing.T, db store.Store, projectID, repositoryID string) []store.Record {
	t.Helper()
	var out []store.Record
	after := int64(0)
	for {
		page, err := db.Events(context.Background(), store.EventQuery{ProjectID: projectID, RepositoryID: repositoryID, After: after, Limit: 200})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, page.Records...)
		if !page.HasMore {
			return out
		}
		after = page.Records[len(page.Records)-1].ReceivedSeq
	}
}

// eventually polls cond every few milliseconds until it holds or within
// passes; then it fails with cond's last description.
func eventually(t *testing.T, within time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ok, desc := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", within, desc)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// stopSending revokes the signer's key or deactivates its identity
// through reg.
type stopSending struct {
	name string
	stop func(ctx context.Context, reg store.Registry, s *storetest.Signer) error
}

var stopCases = []stopSending{
	{"revoke key", func(ctx context.Context, reg store.Registry, s *storetest.Signer) error {
		k, err := reg.RevokeKey(ctx, s.ProjectID, s.KeyID)
		if err == nil && k.Status != store.StatusRevoked {
			err = fmt.Errorf("key status %q after RevokeKey", k.Status)
		}
		return err
	}},
	{"deactivate identity", func(ctx context.Context, reg store.Registry, s *storetest.Signer) error {
		i, err := reg.DeactivateIdentity(ctx, s.ProjectID, s.IdentityID)
		if err == nil && i.Status != store.StatusInactive {
			err = fmt.Errorf("identity status %q after DeactivateIdentity", i.Status)
		}
		return err
	}},
}

// checkStopped appends two events of s through db (so db's writer
// remembers s as active), lets stop run through reg, then checks db
// refuses s's next new event at once while an exact retry still gets its
// original receipt, and another signer of the project is unaffected.
func checkStopped(t *testing.T, db *sqlite.DB, reg store.Registry, s, other *storetest.Signer, stop stopSending) {
	t.Helper()
	ctx := context.Background()
	e1, c1 := s.Event(t, storetest.Spec{Summary: "one"})
	e2, c2 := s.Event(t, storetest.Spec{Summary: "two"})
	r1 := appendNew(t, db, e1, c1)
	r2 := appendNew(t, db, e2, c2)
	if r2.Record.ReceivedSeq != r1.Record.ReceivedSeq+1 {
		t.Fatalf("receipts %d then %d, want consecutive", r1.Record.ReceivedSeq, r2.Record.ReceivedSeq)
	}
	if err := stop.stop(ctx, reg, s); err != nil {
		t.Fatalf("%s: %v", stop.name, err)
	}

	e3, c3 := s.Event(t, storetest.Spec{Summary: "three, after " + stop.name})
	if res, err := db.Append(ctx, e3, c3); !errors.Is(err, store.ErrSenderNotActive) {
		t.Fatalf("new event after %s: %+v, %v; want ErrSenderNotActive", stop.name, res, err)
	}
	for _, stored := range []struct {
		ev   *correspondence.Event
		c    []byte
		want store.AppendResult
	}{{e1, c1, r1}, {e2, c2, r2}} {
		ev, c, want := stored.ev, stored.c, stored.want
		got, err := db.Append(ctx, ev, c)
		if err != nil {
			t.Fatalf("exact retry of %s after %s: %v", ev.ID, stop.name, err)
		}
		if got.Created || got.Record.EventID != ev.ID || got.Record.ReceivedSeq != want.Record.ReceivedSeq ||
			!got.Record.ReceivedAt.Equal(want.Record.ReceivedAt) {
			t.Fatalf("exact retry after %s: created %v, %s at %d@%v; want the original %d@%v", stop.name, got.Created,
				got.Record.EventID, got.Record.ReceivedSeq, got.Record.ReceivedAt, want.Record.ReceivedSeq, want.Record.ReceivedAt)
		}
	}
	wantHead(t, db, s.ProjectID, r2.Record.ReceivedSeq)
	// Forgetting the stopped sender forgets no one's status wrongly: an
	// active signer still appends, at the next receipt.
	eo, co := other.Event(t, storetest.Spec{Summary: "still active"})
	if got := appendNew(t, db, eo, co); got.Record.ReceivedSeq != r2.Record.ReceivedSeq+1 {
		t.Fatalf("active signer's event at %d, want %d", got.Record.ReceivedSeq, r2.Record.ReceivedSeq+1)
	}
	// And the refusal holds on every later try, not only the first.
	if _, err := db.Append(ctx, e3, c3); !errors.Is(err, store.ErrSenderNotActive) {
		t.Fatalf("second try of the new event after %s: %v; want ErrSenderNotActive", stop.name, err)
	}
}

// TestRevocationAfterSenderCached: revoking a key or deactivating an
// identity in this process takes effect on the very next append, though
// the writer remembered the sender as active.
func TestRevocationAfterSenderCached(t *testing.T) {
	db := openTemp(t).(*sqlite.DB)
	for _, tc := range stopCases {
		t.Run(tc.name, func(t *testing.T) {
			pid := newProject(t, db)
			s := storetest.NewSigner(t, pid).Register(t, db)
			other := storetest.NewSigner(t, pid).Register(t, db)
			checkStopped(t, db, db, s, other, tc)
		})
	}
}

// TestOtherWriterRevocation: a revocation committed through another
// connection to the file (an admin command in another process) holds for
// the next append at once: each batch compares data_version inside its
// transaction.
func TestOtherWriterRevocation(t *testing.T) {
	a, b := openPair(t)
	for _, tc := range stopCases {
		t.Run(tc.name, func(t *testing.T) {
			pid := newProject(t, a)
			s := storetest.NewSigner(t, pid).Register(t, a)
			other := storetest.NewSigner(t, pid).Register(t, a)
			checkStopped(t, a, b, s, other, tc)
		})
	}
}

// TestOtherWriterAppends: events another connection appends to a project
// take the next receipts, and each store's next append follows them with
// no collision and no gap, though both writers remembered the counter.
func TestOtherWriterAppends(t *testing.T) {
	a, b := openPair(t)
	pid := newProject(t, a)
	sa := storetest.NewSigner(t, pid).Register(t, a)
	sb := storetest.NewSigner(t, pid).Register(t, b)
	var want []string // event ids in receipt order
	add := func(db *sqlite.DB, s *storetest.Signer, n int) {
		t.Helper()
		for range n {
			ev, c := s.Event(t, storetest.Spec{})
			res := appendNew(t, db, ev, c)
			if res.Record.ReceivedSeq != int64(len(want)+1) {
				t.Fatalf("event %d stored at %d, want %d", len(want)+1, res.Record.ReceivedSeq, len(want)+1)
			}
			want = append(want, ev.ID)
		}
	}
	add(a, sa, 3) // a remembers last_seq 3
	add(b, sb, 4) // b takes 4…7
	add(a, sa, 1) // a must take 8
	add(b, sb, 2) // and b 9, 10
	add(a, sa, 2)
	for name, db := range map[string]*sqlite.DB{"a": a, "b": b} {
		wantHead(t, db, pid, int64(len(want)))
		recs := allRecords(t, db, pid, "repo-1")
		var got []string
		for i, r := range recs {
			if r.ReceivedSeq != int64(i+1) || (i > 0 && r.ReceivedAt.Before(recs[i-1].ReceivedAt)) {
				t.Fatalf("%s: record %d at %d@%v after %v", name, i, r.ReceivedSeq, r.ReceivedAt, recs[max(i-1, 0)].ReceivedAt)
			}
			got = append(got, r.EventID)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%s reads %q, want %q", name, got, want)
		}
	}
}

// TestOtherWriterForksSession: session forks completed by another
// connection's events are seen by this store's next append in that
// session, though its writer remembered the session's highest seq.
func TestOtherWriterForksSession(t *testing.T) {
	a, b := openPair(t)
	pid := newProject(t, a)
	s := storetest.NewSigner(t, pid).Register(t, a)
	ev := func(seq int64, summary string) (*correspondence.Event, []byte) {
		return s.Event(t, storetest.Spec{SessionSeq: seq, Summary: summary})
	}
	var ids []string
	for seq := int64(1); seq <= 3; seq++ {
		e, c := ev(seq, "a")
		wantWarnings(t, fmt.Sprintf("a: seq %d", seq), appendNew(t, a, e, c))
		ids = append(ids, e.ID)
	}

	// b stores another event at seq 2: it sees the fork itself.
	x, xc := ev(2, "b forks seq 2")
	wantWarnings(t, "b: seq 2 again", appendNew(t, b, x, xc), ids[1], x.ID)
	// a's next event in the session is alone…
	e4, c4 := ev(4, "a")
	wantWarnings(t, "a: seq 4", appendNew(t, a, e4, c4))
	// …and a third event at seq 2 through a names all three.
	y, yc := ev(2, "a forks seq 2 again")
	wantWarnings(t, "a: seq 2 a third time", appendNew(t, a, y, yc), ids[1], x.ID, y.ID)

	// b runs ahead of what a remembers as the session's highest seq (4):
	// a's own event at that seq must still be compared with b's.
	z, zc := ev(9, "b at seq 9")
	wantWarnings(t, "b: seq 9", appendNew(t, b, z, zc))
	w, wc := ev(9, "a at seq 9")
	wantWarnings(t, "a: seq 9 after b's", appendNew(t, a, w, wc), z.ID, w.ID)
	// The same the other way round: b remembered seq 9 before a's event.
	v, vc := ev(12, "a at seq 12")
	wantWarnings(t, "a: seq 12", appendNew(t, a, v, vc))
	u, uc := ev(12, "b at seq 12")
	wantWarnings(t, "b: seq 12 after a's", appendNew(t, b, u, uc), v.ID, u.ID)
	wantHead(t, a, pid, 10)
}

// TestOtherWriterRevokesToken: a token revoked through another connection
// stops being served from this store's token cache within a few
// external checks (every 50 ms).
func TestOtherWriterRevokesToken(t *testing.T) {
	a, b := openPair(t)
	ctx := context.Background()
	pid := newProject(t, a)
	// Warm a's writer state too, as a running relay's would be.
	s := storetest.NewSigner(t, pid).Register(t, a)
	e, c := s.Event(t, storetest.Spec{})
	appendNew(t, a, e, c)
	tok := store.Token{ID: storetest.NewUUID(), ProjectID: pid, Scopes: []string{store.ScopeRead, store.ScopeAppend}, Hash: []byte("hash")}
	if _, err := a.CreateToken(ctx, tok); err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second is served from the cache
		got, err := a.GetToken(ctx, tok.ID)
		if err != nil || got.Revoked || got.ProjectID != pid || !slices.Equal(got.Scopes, tok.Scopes) {
			t.Fatalf("token before revocation: %+v, %v", got, err)
		}
	}
	if err := b.RevokeToken(ctx, tok.ID); err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Second, func() (bool, string) {
		got, err := a.GetToken(ctx, tok.ID)
		return err == nil && got.Revoked, fmt.Sprintf("a serves the token revoked by b as %+v, %v", got, err)
	})
	// Once seen, it stays revoked.
	if got, err := a.GetToken(ctx, tok.ID); err != nil || !got.Revoked {
		t.Fatalf("token after revocation seen: %+v, %v", got, err)
	}
}

// TestTokenRevocationIsImmediate: RevokeToken in this process empties the
// token cache before it returns; the cache hands out copies.
func TestTokenRevocationIsImmediate(t *testing.T) {
	db := openTemp(t)
	ctx := context.Background()
	pid := newProject(t, db)
	tok := store.Token{ID: storetest.NewUUID(), ProjectID: pid, Scopes: []string{store.ScopeRead, store.ScopeAdmin}, Hash: []byte{1, 2, 3}}
	created, err := db.CreateToken(ctx, tok)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 { // the second and third are served from the cache
		got, err := db.GetToken(ctx, tok.ID)
		if err != nil || got.ID != tok.ID || got.ProjectID != pid || got.Revoked || !slices.Equal(got.Scopes, tok.Scopes) ||
			string(got.Hash) != string(tok.Hash) || !got.CreatedAt.Equal(created.CreatedAt) {
			t.Fatalf("GetToken %d: %+v, %v; want %+v", i, got, err, created)
		}
		got.Scopes[0] = "mutated by the caller" // must not reach the cache
	}
	if err := db.RevokeToken(ctx, tok.ID); err != nil {
		t.Fatal(err)
	}
	got, err := db.GetToken(ctx, tok.ID)
	if err != nil || !got.Revoked || !slices.Equal(got.Scopes, tok.Scopes) {
		t.Fatalf("GetToken right after RevokeToken: %+v, %v; want Revoked", got, err)
	}
	if err := db.RevokeToken(ctx, "no-such-token"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("RevokeToken of an unknown id: %v, want ErrNotFound", err)
	}
}

// TestSessionForksWithWarmCache: the writer skips the fork lookup only
// for a session_seq above the highest it remembers for the session; every
// other arrival is compared with what is stored.
func TestSessionForksWithWarmCache(t *testing.T) {
	type step struct {
		seq   int64
		retry int   // 1-based index of an earlier step to send again; 0 for a new event
		fork  []int // 1-based steps whose ids the warning names; nil for none
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"fork below the highest", []step{{seq: 1}, {seq: 2}, {seq: 3}, {seq: 2, fork: []int{2, 4}}, {retry: 2, fork: []int{2, 4}}, {seq: 4}}},
		{"out of order", []step{{seq: 10}, {seq: 7}, {seq: 7, fork: []int{2, 3}}, {seq: 8}, {seq: 10, fork: []int{1, 5}}}},
		{"fresh session counting down", []step{{seq: 5}, {seq: 4}, {seq: 3}}},
		{"fork at the highest", []step{{seq: 1}, {seq: 2}, {seq: 2, fork: []int{2, 3}}, {seq: 2, fork: []int{2, 3, 4}}, {seq: 3}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := openTemp(t)
			pid := newProject(t, db)
			s := storetest.NewSigner(t, pid).Register(t, db)
			// Another session of the same identity and device warms the
			// cache for the project and must never be named.
			s2 := *s
			s2.SessionID = storetest.NewUUID()
			for seq := int64(1); seq <= 12; seq++ {
				e, c := s2.Event(t, storetest.Spec{SessionSeq: seq})
				appendNew(t, db, e, c)
			}
			evs := make([]signed, len(tc.steps))
			for i, st := range tc.steps {
				what := fmt.Sprintf("step %d (seq %d, retry of %d)", i+1, st.seq, st.retry)
				created := st.retry == 0
				if created {
					evs[i].ev, evs[i].c = s.Event(t, storetest.Spec{SessionSeq: st.seq, Summary: fmt.Sprintf("step %d", i+1)})
				} else {
					evs[i] = evs[st.retry-1]
				}
				var want []string
				for _, j := range st.fork {
					want = append(want, evs[j-1].ev.ID)
				}
				res, err := db.Append(context.Background(), evs[i].ev, evs[i].c)
				if err != nil || res.Created != created {
					t.Fatalf("%s: created %v, %v; want created %v", what, res.Created, err, created)
				}
				wantWarnings(t, what, res, want...)
			}
		})
	}
}

// TestSessionForksWithinOneBatch: events at one session_seq above the
// remembered highest, appended at once (so several share a batch), warn
// in receipt order: each names itself and every earlier one. The highest
// seq a released savepoint stages must be seen by the next job of the
// same batch.
func TestSessionForksWithinOneBatch(t *testing.T) {
	db := openTemp(t)
	pid := newProject(t, db)
	s := storetest.NewSigner(t, pid).Register(t, db)
	for seq := int64(1); seq <= 2; seq++ {
		e, c := s.Event(t, storetest.Spec{SessionSeq: seq})
		appendNew(t, db, e, c)
	}
	for round := range 5 {
		seq := int64(3 + round)
		const n = 8
		evs := make([]signed, n)
		for i := range evs {
			evs[i].ev, evs[i].c = s.Event(t, storetest.Spec{SessionSeq: seq, Summary: fmt.Sprintf("copy %d", i)})
		}
		results := make([]store.AppendResult, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range evs {
			wg.Go(func() { results[i], errs[i] = db.Append(context.Background(), evs[i].ev, evs[i].c) })
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil || !results[i].Created {
				t.Fatalf("round %d, append %d: created %v, %v", round, i, results[i].Created, err)
			}
		}
		slices.SortFunc(results, func(x, y store.AppendResult) int { return int(x.Record.ReceivedSeq - y.Record.ReceivedSeq) })
		var before []string
		for i, r := range results {
			before = append(before, r.Record.EventID)
			if i == 0 {
				wantWarnings(t, fmt.Sprintf("round %d, first at seq %d", round, seq), r)
				continue
			}
			wantWarnings(t, fmt.Sprintf("round %d, receipt %d", round, r.Record.ReceivedSeq), r, before...)
		}
	}
}

// TestReceivedAtNeverDecreases: along received_seq, received_at never
// goes back, across batches built from concurrent appends.
func TestReceivedAtNeverDecreases(t *testing.T) {
	db := openTemp(t)
	pid := newProject(t, db)
	const goroutines, each = 8, 38
	queues := make([][]signed, goroutines)
	for g := range queues {
		s := storetest.NewSigner(t, pid).Register(t, db)
		for range each {
			var x signed
			x.ev, x.c = s.Event(t, storetest.Spec{ThreadID: fmt.Sprintf("thread-%d", g)})
			queues[g] = append(queues[g], x)
		}
	}
	receipts := make([][]store.Record, goroutines)
	var wg sync.WaitGroup
	for g := range queues {
		wg.Go(func() {
			for _, x := range queues[g] {
				res, err := db.Append(context.Background(), x.ev, x.c)
				if err != nil {
					t.Errorf("append: %v", err)
					return
				}
				receipts[g] = append(receipts[g], res.Record)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	byID := map[string]store.Record{}
	for _, rs := range receipts {
		for _, r := range rs {
			byID[r.EventID] = r
		}
	}
	recs := allRecords(t, db, pid, "repo-1")
	if len(recs) != goroutines*each || len(byID) != goroutines*each {
		t.Fatalf("%d records read, %d receipts; want %d", len(recs), len(byID), goroutines*each)
	}
	for i, r := range recs {
		if r.ReceivedSeq != int64(i+1) {
			t.Fatalf("record %d at received_seq %d", i, r.ReceivedSeq)
		}
		if i > 0 && r.ReceivedAt.Before(recs[i-1].ReceivedAt) {
			t.Fatalf("received_at %v at %d is before %v at %d", r.ReceivedAt, r.ReceivedSeq, recs[i-1].ReceivedAt, recs[i-1].ReceivedSeq)
		}
		if got := byID[r.EventID]; got.ReceivedSeq != r.ReceivedSeq || !got.ReceivedAt.Equal(r.ReceivedAt) {
			t.Fatalf("%s: receipt said %d@%v, stored %d@%v", r.EventID, got.ReceivedSeq, got.ReceivedAt, r.ReceivedSeq, r.ReceivedAt)
		}
	}
	if at := wantHead(t, db, pid, int64(len(recs))); !at.Equal(recs[len(recs)-1].ReceivedAt) {
		t.Fatalf("head received_at %v, last record's %v", at, recs[len(recs)-1].ReceivedAt)
	}
}

// TestWALStaysBounded: under sustained appends of ~1 KiB events the WAL
// file stays under walSizeLimit (64 MiB): checkpointLoop gets it restarted.
// Without that, 4000 such events grew it to ~95 MB.
func TestWALStaysBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("appends 5000 events; skipped with -short")
	}
	const (
		clients  = 16
		perEach  = 313 // 5008 events
		walLimit = 64 << 20
	)
	path := filepath.Join(t.TempDir(), "acrelay.db")
	db := openAt(t, path)
	pid := newProject(t, db)
	base := storetest.NewSigner(t, pid).Register(t, db)
	filler := strings.Repeat("progress report text ", 48) // ~1 KiB
	// Sign on the test goroutine (Event may call t.Fatal), 16 threads and
	// sessions of one identity.
	queues := make([][]signed, clients)
	for c := range queues {
		s := *base
		s.SessionID = storetest.NewUUID()
		for i := range perEach {
			var x signed
			x.ev, x.c = s.Event(t, storetest.Spec{Kind: correspondence.KindProgress, ThreadID: fmt.Sprintf("thread-%d", c),
				Paths: []string{"packages/sdk", "docs"}, Summary: fmt.Sprintf("event %d of client %d: %s", i, c, filler)})
			queues[c] = append(queues[c], x)
		}
	}
	if n := len(queues[0][0].c); n < 1024 {
		t.Fatalf("events of %d bytes, want at least 1 KiB", n)
	}
	start := time.Now()
	var peak int64
	var wg sync.WaitGroup
	for c := range queues {
		wg.Go(func() {
			for _, x := range queues[c] {
				if _, err := db.Append(context.Background(), x.ev, x.c); err != nil {
					t.Errorf("append: %v", err)
					return
				}
			}
		})
	}
	// Sample the WAL while the appends run: it must never pass the limit,
	// not only be short at the end.
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			if fi, err := os.Stat(path + "-wal"); err == nil {
				peak = max(peak, fi.Size())
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	wg.Wait()
	close(stop)
	<-sampled
	if t.Failed() {
		t.FailNow()
	}
	wantHead(t, db, pid, clients*perEach)
	fi, err := os.Stat(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d events in %v; WAL %d bytes at the end, %d at the highest sample", clients*perEach, time.Since(start), fi.Size(), peak)
	if fi.Size() >= walLimit || peak >= walLimit {
		t.Fatalf("WAL %d bytes at the end, %d at the highest sample; want under %d", fi.Size(), peak, walLimit)
	}
}
