package storetest

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acrelay/acrelay/store"
)

// RunMatrix runs the store.Matrix suite (bindings, sent parts,
// submissions, sync tokens); open is as for Run.
func RunMatrix(t *testing.T, open func(t *testing.T) store.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"matrix/bindings", testMatrixBindings},
		{"matrix/sent", testMatrixSent},
		{"matrix/sent_bound", testMatrixSentBound},
		{"matrix/submissions", testMatrixSubmissions},
		{"matrix/submission_retry", testMatrixSubmissionRetry},
		{"matrix/submission_claims_concurrent", testMatrixSubmissionClaimsConcurrent},
		{"matrix/submission_housekeeping", testMatrixSubmissionHousekeeping},
		{"ui_sessions", testUISessions},
		{"matrix/crypto_secrets", testMatrixCryptoSecrets},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open(t)) })
	}
}

func testMatrixBindings(t *testing.T, s store.Store) {
	p := must[store.Project](t, "create project")(s.CreateProject(ctx, NewUUID()))
	q := must[store.Project](t, "create project")(s.CreateProject(ctx, NewUUID()))
	_, err := s.CreateMatrixBinding(ctx, store.MatrixBinding{ID: NewUUID(), ProjectID: NewUUID(), RoomID: "!a:x"})
	wantErr(t, "bind unknown project", err, store.ErrNotFound)

	a := must[store.MatrixBinding](t, "bind")(s.CreateMatrixBinding(ctx, store.MatrixBinding{ID: NewUUID(), ProjectID: p.ID, RoomID: "!a:x"}))
	checkDBTime(t, "binding created_at", a.CreatedAt)
	_, err = s.CreateMatrixBinding(ctx, store.MatrixBinding{ID: a.ID, ProjectID: p.ID, RoomID: "!b:x"})
	wantErr(t, "bind taken id", err, store.ErrExists)
	b := must[store.MatrixBinding](t, "bind repo")(s.CreateMatrixBinding(ctx, store.MatrixBinding{ID: NewUUID(), ProjectID: p.ID, RepositoryID: "repo-1", RoomID: "!b:x"}))
	must[store.MatrixBinding](t, "bind other project")(s.CreateMatrixBinding(ctx, store.MatrixBinding{ID: NewUUID(), ProjectID: q.ID, RoomID: "!a:x"}))

	bs := must[[]store.MatrixBinding](t, "list")(s.MatrixBindings(ctx, p.ID))
	if len(bs) != 2 {
		t.Fatalf("bindings of p = %+v, want 2", bs)
	}
	got := must[store.MatrixBinding](t, "get")(s.MatrixBinding(ctx, p.ID, b.ID))
	if got.RepositoryID != "repo-1" || got.RoomID != "!b:x" || !got.CreatedAt.Equal(b.CreatedAt) {
		t.Errorf("binding = %+v, want %+v", got, b)
	}
	_, err = s.MatrixBinding(ctx, q.ID, b.ID)
	wantErr(t, "get another project's binding", err, store.ErrNotFound)
	if rb := must[[]store.MatrixBinding](t, "room")(s.MatrixRoomBindings(ctx, "!a:x")); len(rb) != 2 {
		t.Errorf("room bindings = %+v, want 2 (two projects)", rb)
	}
	ps := must[[]string](t, "projects")(s.MatrixBoundProjects(ctx))
	if len(ps) != 2 {
		t.Errorf("bound projects = %v, want 2", ps)
	}
	wantErr(t, "delete another project's binding", s.DeleteMatrixBinding(ctx, q.ID, a.ID), store.ErrNotFound)
	if err := s.DeleteMatrixBinding(ctx, p.ID, a.ID); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "delete twice", s.DeleteMatrixBinding(ctx, p.ID, a.ID), store.ErrNotFound)
	if bs := must[[]store.MatrixBinding](t, "list")(s.MatrixBindings(ctx, p.ID)); len(bs) != 1 || bs[0].ID != b.ID {
		t.Errorf("bindings after delete = %+v", bs)
	}
}

// testMatrixSentBound: storing a sent part answers whether its binding
// still exists, and stores the part either way.
func testMatrixSentBound(t *testing.T, s store.Store) {
	p := must[store.Project](t, "project")(s.CreateProject(ctx, NewUUID()))
	b := must[store.MatrixBinding](t, "bind")(s.CreateMatrixBinding(ctx, store.MatrixBinding{ID: NewUUID(), ProjectID: p.ID, RoomID: "!r:x"}))
	part := store.MatrixSent{RoomID: "!r:x", EventID: "sha256:aa", Part: store.MatrixPartRecord, MatrixEventID: "$1"}
	if bound := must[bool](t, "record")(s.RecordMatrixSentBound(ctx, part, p.ID, b.ID)); !bound {
		t.Error("bound = false for a live binding")
	}
	if bound := must[bool](t, "another project")(s.RecordMatrixSentBound(ctx, part, NewUUID(), b.ID)); bound {
		t.Error("bound = true under another project")
	}
	if err := s.DeleteMatrixBinding(ctx, p.ID, b.ID); err != nil {
		t.Fatal(err)
	}
	notice := store.MatrixSent{RoomID: "!r:x", EventID: "sha256:aa", Part: store.MatrixPartNotice, MatrixEventID: "$2"}
	if bound := must[bool](t, "after unbinding")(s.RecordMatrixSentBound(ctx, notice, p.ID, b.ID)); bound {
		t.Error("bound = true after the binding was deleted")
	}
	got := must[[]store.MatrixSent](t, "sent")(s.MatrixSentParts(ctx, "!r:x", []string{"sha256:aa"}))
	if len(got) != 2 || got[0] != notice || got[1] != part {
		t.Errorf("sent parts = %+v, want the notice and the record, each stored once", got)
	}
}

func testMatrixSent(t *testing.T, s store.Store) {
	if got := must[[]store.MatrixSent](t, "none")(s.MatrixSentParts(ctx, "!r:x", nil)); len(got) != 0 {
		t.Fatalf("sent of no ids = %v", got)
	}
	rec := store.MatrixSent{RoomID: "!r:x", EventID: "sha256:aa", Part: store.MatrixPartRecord, MatrixEventID: "$1"}
	for _, m := range []store.MatrixSent{rec, {RoomID: "!r:x", EventID: "sha256:aa", Part: store.MatrixPartRecord, MatrixEventID: "$again"},
		{RoomID: "!r:x", EventID: "sha256:aa", Part: store.MatrixPartNotice, MatrixEventID: "$2"},
		{RoomID: "!other:x", EventID: "sha256:bb", Part: store.MatrixPartRecord, MatrixEventID: "$3"}} {
		if err := s.RecordMatrixSent(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	got := must[[]store.MatrixSent](t, "sent")(s.MatrixSentParts(ctx, "!r:x", []string{"sha256:aa", "sha256:bb"}))
	if len(got) != 2 || got[0].Part != store.MatrixPartNotice || got[1] != rec {
		t.Errorf("sent parts = %+v, want the notice and the first record", got)
	}
}

func testMatrixSubmissions(t *testing.T, s store.Store) {
	if tok := must[string](t, "token")(s.MatrixSyncToken(ctx, "@bot:x")); tok != "" {
		t.Fatalf("sync token of nobody = %q", tok)
	}
	a := store.MatrixSubmission{MatrixEventID: "$a", RoomID: "!r:x", Sender: "@u:x", Event: []byte(`{"a":1}`)}
	b := store.MatrixSubmission{MatrixEventID: "$b", RoomID: "!r:x", Sender: "@u:x", Event: []byte(`{"b":1}`)}
	if err := s.EnqueueMatrixSubmissions(ctx, []store.MatrixSubmission{a}, "@bot:x", "s1"); err != nil {
		t.Fatal(err)
	}
	// A replay (a re-sent transaction, a re-read sync) adds nothing.
	if err := s.EnqueueMatrixSubmissions(ctx, []store.MatrixSubmission{a, b}, "@bot:x", "s2"); err != nil {
		t.Fatal(err)
	}
	if tok := must[string](t, "token")(s.MatrixSyncToken(ctx, "@bot:x")); tok != "s2" {
		t.Errorf("sync token = %q, want s2", tok)
	}
	p := must[[]store.MatrixSubmission](t, "claim")(s.ClaimMatrixSubmissions(ctx, 10, 0))
	if len(p) != 2 || p[0].MatrixEventID != "$a" || !bytes.Equal(p[0].Event, a.Event) || p[0].Outcome != nil || p[0].Attempts != 1 || p[0].Final != "" {
		t.Fatalf("claimed = %+v", p)
	}
	checkDBTime(t, "received_at", p[0].ReceivedAt)
	out := must[[]byte](t, "outcome")(s.SetMatrixSubmissionOutcome(ctx, "$a", []byte(`{"ok":1}`)))
	if string(out) != `{"ok":1}` {
		t.Errorf("outcome = %s", out)
	}
	out = must[[]byte](t, "outcome again")(s.SetMatrixSubmissionOutcome(ctx, "$a", []byte(`{"other":1}`)))
	if string(out) != `{"ok":1}` {
		t.Errorf("second outcome = %s, want the first kept", out)
	}
	_, err := s.SetMatrixSubmissionOutcome(ctx, "$none", []byte(`{}`))
	wantErr(t, "outcome of unknown", err, store.ErrNotFound)
	if err := s.CompleteMatrixSubmission(ctx, "$a", "$reply"); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "complete unknown", s.CompleteMatrixSubmission(ctx, "$none", "$r"), store.ErrNotFound)
	p = must[[]store.MatrixSubmission](t, "claim")(s.ClaimMatrixSubmissions(ctx, 10, 0))
	if len(p) != 1 || p[0].MatrixEventID != "$b" || p[0].Attempts != 2 {
		t.Errorf("claimed after completion = %+v, want $b at its second attempt", p)
	}
	if err := s.EnqueueMatrixSubmissions(ctx, []store.MatrixSubmission{a}, "", ""); err != nil {
		t.Fatal(err)
	}
	if p = must[[]store.MatrixSubmission](t, "claim")(s.ClaimMatrixSubmissions(ctx, 10, 0)); len(p) != 1 || p[0].MatrixEventID != "$b" {
		t.Errorf("a completed submission came back: %+v", p)
	}
	got := must[store.MatrixSubmission](t, "get")(s.MatrixSubmission(ctx, "$a"))
	if got.Final != store.MatrixSubmissionReplied || got.ReplyEventID != "$reply" || string(got.Outcome) != `{"ok":1}` || got.Attempts != 1 {
		t.Errorf("completed = %+v", got)
	}
	checkDBTime(t, "finished_at", got.FinishedAt)
	_, err = s.MatrixSubmission(ctx, "$none")
	wantErr(t, "get unknown", err, store.ErrNotFound)
}

// testMatrixSubmissionRetry: a claim holds what it takes, a retry sets
// the next attempt, a submission that is not due is skipped for the ones
// behind it, and giving up is final.
func testMatrixSubmissionRetry(t *testing.T, s store.Store) {
	var subs []store.MatrixSubmission
	for _, id := range []string{"$1", "$2", "$3"} {
		subs = append(subs, store.MatrixSubmission{MatrixEventID: id, RoomID: "!r:x", Sender: "@u:x", Event: []byte(`{}`)})
	}
	if err := s.EnqueueMatrixSubmissions(ctx, subs[:2], "", ""); err != nil {
		t.Fatal(err)
	}
	ids := func(p []store.MatrixSubmission) string {
		var out []string
		for _, x := range p {
			out = append(out, x.MatrixEventID)
		}
		return strings.Join(out, ",")
	}
	// One claim of one: the other is still due for another claimant.
	if p := must[[]store.MatrixSubmission](t, "claim 1")(s.ClaimMatrixSubmissions(ctx, 1, time.Hour)); ids(p) != "$1" {
		t.Fatalf("claim 1 = %s, want $1", ids(p))
	}
	if p := must[[]store.MatrixSubmission](t, "claim 2")(s.ClaimMatrixSubmissions(ctx, 10, time.Hour)); ids(p) != "$2" {
		t.Fatalf("second claim = %s, want $2 ($1 is held)", ids(p))
	}
	// Both held: a new one behind them is taken at once.
	if err := s.EnqueueMatrixSubmissions(ctx, subs[2:], "", ""); err != nil {
		t.Fatal(err)
	}
	if p := must[[]store.MatrixSubmission](t, "claim 3")(s.ClaimMatrixSubmissions(ctx, 10, time.Hour)); ids(p) != "$3" {
		t.Fatalf("third claim = %s, want $3", ids(p))
	}
	if err := s.RetryMatrixSubmission(ctx, "$1", 0, "M_FORBIDDEN"); err != nil {
		t.Fatal(err)
	}
	if err := s.RetryMatrixSubmission(ctx, "$2", time.Hour, "M_FORBIDDEN"); err != nil {
		t.Fatal(err)
	}
	p := must[[]store.MatrixSubmission](t, "claim again")(s.ClaimMatrixSubmissions(ctx, 10, time.Hour))
	if ids(p) != "$1" || p[0].Attempts != 2 || p[0].LastError != "M_FORBIDDEN" {
		t.Fatalf("claim after retry = %+v, want $1 at attempt 2", p)
	}
	got := must[store.MatrixSubmission](t, "get $2")(s.MatrixSubmission(ctx, "$2"))
	if d := time.Until(got.NextAttemptAt); d < 59*time.Minute || d > 61*time.Minute || got.Attempts != 1 {
		t.Errorf("$2 next attempt in %v after %d attempts, want 1h after 1", d, got.Attempts)
	}
	if err := s.GiveUpMatrixSubmission(ctx, "$1", "M_FORBIDDEN"); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "give up twice", s.GiveUpMatrixSubmission(ctx, "$1", "x"), store.ErrNotFound)
	wantErr(t, "retry a final one", s.RetryMatrixSubmission(ctx, "$1", 0, "x"), store.ErrNotFound)
	wantErr(t, "retry unknown", s.RetryMatrixSubmission(ctx, "$none", 0, "x"), store.ErrNotFound)
	got = must[store.MatrixSubmission](t, "get $1")(s.MatrixSubmission(ctx, "$1"))
	if got.Final != store.MatrixSubmissionGaveUp || got.ReplyEventID != "" || got.LastError != "M_FORBIDDEN" {
		t.Errorf("given up = %+v", got)
	}
	checkDBTime(t, "finished_at", got.FinishedAt)
	if err := s.RetryMatrixSubmission(ctx, "$3", 0, ""); err != nil {
		t.Fatal(err)
	}
	if p := must[[]store.MatrixSubmission](t, "claim last")(s.ClaimMatrixSubmissions(ctx, 10, time.Hour)); ids(p) != "$3" {
		t.Errorf("claim last = %s, want $3 (not the final $1, not the held $2)", ids(p))
	}
}

// testMatrixSubmissionClaimsConcurrent: four claimants (as four relay
// processes) claiming at once take every submission exactly once.
func testMatrixSubmissionClaimsConcurrent(t *testing.T, s store.Store) {
	var subs []store.MatrixSubmission
	for i := range 60 {
		subs = append(subs, store.MatrixSubmission{MatrixEventID: fmt.Sprintf("$%02d", i), RoomID: "!r:x", Sender: "@u:x", Event: []byte(`{}`)})
	}
	if err := s.EnqueueMatrixSubmissions(ctx, subs, "", ""); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	claimed := map[string]int{}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				p, err := s.ClaimMatrixSubmissions(ctx, 3, time.Hour)
				if err != nil {
					t.Error(err)
					return
				}
				if len(p) == 0 {
					return
				}
				mu.Lock()
				for _, x := range p {
					claimed[x.MatrixEventID]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(claimed) != len(subs) {
		t.Errorf("%d of %d submissions claimed", len(claimed), len(subs))
	}
	for id, n := range claimed {
		if n != 1 {
			t.Errorf("%s claimed %d times, want once", id, n)
		}
	}
}

// testMatrixSubmissionHousekeeping: final submissions past the retention
// go in batches; pending ones and recent final ones stay.
func testMatrixSubmissionHousekeeping(t *testing.T, s store.Store) {
	var subs []store.MatrixSubmission
	for i := range 5 {
		subs = append(subs, store.MatrixSubmission{MatrixEventID: fmt.Sprintf("$%d", i), RoomID: "!r:x", Sender: "@u:x", Event: []byte(`{}`)})
	}
	if err := s.EnqueueMatrixSubmissions(ctx, subs, "", ""); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		if err := s.CompleteMatrixSubmission(ctx, subs[i].MatrixEventID, "$r"); err != nil {
			t.Fatal(err)
		}
	}
	if n := must[int](t, "delete none")(s.DeleteFinishedMatrixSubmissions(ctx, time.Now().Add(-time.Hour), 10)); n != 0 {
		t.Errorf("deleted %d finished within the retention, want 0", n)
	}
	later := time.Now().Add(time.Minute)
	if n := must[int](t, "batch 1")(s.DeleteFinishedMatrixSubmissions(ctx, later, 3)); n != 3 {
		t.Errorf("first batch deleted %d, want 3", n)
	}
	if n := must[int](t, "batch 2")(s.DeleteFinishedMatrixSubmissions(ctx, later, 3)); n != 1 {
		t.Errorf("second batch deleted %d, want 1", n)
	}
	if _, err := s.MatrixSubmission(ctx, "$4"); err != nil {
		t.Errorf("the pending submission: %v, want it kept", err)
	}
	_, err := s.MatrixSubmission(ctx, "$0")
	wantErr(t, "a deleted submission", err, store.ErrNotFound)
}

// testUISessions: stored by hash, found by hash, ended, and expired ones
// deleted in batches.
func testUISessions(t *testing.T, s store.Store) {
	now := time.Now().UTC().Truncate(time.Millisecond)
	mk := func(i int, expires time.Time) store.UISession {
		h := sha256.Sum256([]byte(fmt.Sprintf("session-%d", i)))
		return store.UISession{Hash: h[:], ProjectID: "p", TokenID: fmt.Sprintf("t%d", i), CreatedAt: now, ExpiresAt: expires}
	}
	a := mk(0, now.Add(time.Hour))
	if err := s.CreateUISession(ctx, a); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "create twice", s.CreateUISession(ctx, a), store.ErrExists)
	got := must[store.UISession](t, "get")(s.UISession(ctx, a.Hash))
	if !bytes.Equal(got.Hash, a.Hash) || got.ProjectID != "p" || got.TokenID != "t0" || !got.CreatedAt.Equal(now) || !got.ExpiresAt.Equal(a.ExpiresAt) ||
		got.ExpiresAt.Location() != time.UTC {
		t.Errorf("session = %+v, want %+v", got, a)
	}
	for i := 1; i <= 3; i++ {
		if err := s.CreateUISession(ctx, mk(i, now.Add(-time.Duration(i)*time.Minute))); err != nil {
			t.Fatal(err)
		}
	}
	if n := must[int](t, "expired 1")(s.DeleteExpiredUISessions(ctx, now, 2)); n != 2 {
		t.Errorf("first batch deleted %d, want 2", n)
	}
	if n := must[int](t, "expired 2")(s.DeleteExpiredUISessions(ctx, now, 2)); n != 1 {
		t.Errorf("second batch deleted %d, want 1", n)
	}
	if _, err := s.UISession(ctx, a.Hash); err != nil {
		t.Errorf("the live session: %v, want it kept", err)
	}
	if err := s.DeleteUISession(ctx, a.Hash); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteUISession(ctx, a.Hash); err != nil {
		t.Errorf("delete twice: %v, want no error", err)
	}
	_, err := s.UISession(ctx, a.Hash)
	wantErr(t, "a deleted session", err, store.ErrNotFound)
}

// testMatrixCryptoSecrets: a secret is made once (the first create wins;
// later creates are not called), names are independent, create's error
// stores nothing, and the crypto database handle opens on the same
// database (the secrets table is visible through it).
func testMatrixCryptoSecrets(t *testing.T, s store.Store) {
	mc, ok := s.(store.MatrixCrypto)
	if !ok {
		t.Fatal("the store does not implement store.MatrixCrypto")
	}
	boom := errors.New("boom")
	if _, err := mc.MatrixCryptoSecret(ctx, store.MatrixPickleKey, func() (string, error) { return "", boom }); !errors.Is(err, boom) {
		t.Fatalf("create's error: %v", err)
	}
	v, err := mc.MatrixCryptoSecret(ctx, store.MatrixPickleKey, func() (string, error) { return "first", nil })
	if err != nil || v != "first" {
		t.Fatalf("first: %q %v", v, err)
	}
	v, err = mc.MatrixCryptoSecret(ctx, store.MatrixPickleKey, func() (string, error) {
		t.Error("create called for a stored secret")
		return "second", nil
	})
	if err != nil || v != "first" {
		t.Fatalf("again: %q %v, want first", v, err)
	}
	if v, err := mc.MatrixCryptoSecret(ctx, store.MatrixRecoveryKey, func() (string, error) { return "rk", nil }); err != nil || v != "rk" {
		t.Fatalf("another name: %q %v", v, err)
	}
	db, dialect, err := mc.MatrixCryptoDB(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if dialect != "sqlite" && dialect != "pgx" {
		t.Fatalf("dialect %q", dialect)
	}
	var n int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM matrix_crypto_secrets").Scan(&n); err != nil || n != 2 {
		t.Fatalf("secrets through the crypto handle: %d %v, want 2", n, err)
	}
}
