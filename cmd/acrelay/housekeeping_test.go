package main

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acrelay/acrelay/internal/teststore"
	"github.com/acrelay/acrelay/lease"
	"github.com/acrelay/acrelay/store"
)

// TestHousekeepOnce: expired sessions, Matrix submissions final for
// longer than the retention, WebSub subscriptions whose lease ended (with
// their cursors) and lapsed verifications are deleted in batches; a live
// session, a recent final submission, a pending one, a live subscription
// (and its cursor) and a recent verification stay.
func TestHousekeepOnce(t *testing.T) {
	teststore.Engines(t, testHousekeepOnce)
}

func testHousekeepOnce(t *testing.T, open teststore.Open) {
	ctx := context.Background()
	st := open(t)
	now := time.Now().UTC().Truncate(time.Millisecond)
	later := now.Add(matrixSubmissionRetained + time.Hour) // the clock of the housekeeping run
	hash := func(i int) []byte { h := sha256.Sum256([]byte(fmt.Sprint("s", i))); return h[:] }
	for i := range 6 {
		exp := now.Add(time.Duration(i) * time.Minute)
		if i == 5 {
			exp = later.Add(time.Hour) // still live then
		}
		if err := st.CreateUISession(ctx, store.UISession{Hash: hash(i), ProjectID: "p", TokenID: "t", CreatedAt: now, ExpiresAt: exp}); err != nil {
			t.Fatal(err)
		}
	}
	var subs []store.MatrixSubmission
	for i := range 4 {
		subs = append(subs, store.MatrixSubmission{MatrixEventID: fmt.Sprint("$", i), RoomID: "!r:x", Sender: "@u:x", Event: []byte(`{}`)})
	}
	if err := st.EnqueueMatrixSubmissions(ctx, subs, "", ""); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := st.CompleteMatrixSubmission(ctx, subs[i].MatrixEventID, "$r"); err != nil {
			t.Fatal(err)
		}
	}
	p, err := st.CreateProject(ctx, "housekeeping")
	if err != nil {
		t.Fatal(err)
	}
	verification := func(cb string, lease int64) store.Verification {
		return store.Verification{ID: "v-" + cb, ProjectID: p.ID, Mode: "subscribe", Topic: "https://relay.example/t", RepositoryID: "r",
			Format: "atom", Callback: "https://cb.example/" + cb, LeaseSeconds: lease}
	}
	var ended []string
	for i := range 3 { // leases of 0 s: ended when stored
		sub, err := st.ActivateSubscription(ctx, verification(fmt.Sprint("ended", i), 0), fmt.Sprint("ended-", i))
		if err != nil {
			t.Fatal(err)
		}
		ended = append(ended, sub.ID)
	}
	live, err := st.ActivateSubscription(ctx, verification("live", int64((30*24*time.Hour).Seconds())), "live")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := st.AddVerification(ctx, verification(fmt.Sprint("pending", i), 3600)); err != nil {
			t.Fatal(err)
		}
	}
	// Within every retention (the subscriptions ended after this clock):
	// nothing goes.
	c, err := housekeepOnce(ctx, st, now.Add(-time.Second), 2)
	if err != nil || c != (housekeepCounts{}) {
		t.Fatalf("early run deleted %+v (%v), want none", c, err)
	}
	c, err = housekeepOnce(ctx, st, later, 2)
	if want := (housekeepCounts{UISessions: 5, MatrixSubmissions: 3, Subscriptions: 3, Verifications: 3}); err != nil || c != want {
		t.Fatalf("deleted %+v (%v), want %+v", c, err, want)
	}
	targets, err := st.TargetStates(ctx, store.CourierWebSub, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(targets) != 1 || targets[0].Target != live.ID {
		t.Errorf("cursors left = %+v, want only the live subscription's", targets)
	}
	for _, id := range ended {
		if _, err := st.Subscription(ctx, p.ID, id); err == nil {
			t.Errorf("ended subscription %s still there", id)
		}
	}
	if _, err := st.Subscription(ctx, p.ID, live.ID); err != nil {
		t.Errorf("the live subscription: %v", err)
	}
	if _, err := st.UISession(ctx, hash(5)); err != nil {
		t.Errorf("the live session: %v", err)
	}
	if s, err := st.MatrixSubmission(ctx, "$3"); err != nil || s.Final != "" {
		t.Errorf("the pending submission: %+v %v", s, err)
	}
}

// deleteCounter counts one process's housekeeping runs (its calls of the
// first delete of a run).
type deleteCounter struct {
	store.Store
	runs atomic.Int64
}

func (d *deleteCounter) DeleteExpiredUISessions(ctx context.Context, before time.Time, limit int) (int, error) {
	d.runs.Add(1)
	return d.Store.DeleteExpiredUISessions(ctx, before, limit)
}

// TestHousekeepingOneProcessAtATime: two processes on one database, each
// with its own holder identity (on PostgreSQL each with its own pool; on
// SQLite, which one process opens, sharing the store): only the holder of
// the relay-wide lease housekeeps; when it stops, the other takes the
// lease over and runs.
func TestHousekeepingOneProcessAtATime(t *testing.T) {
	teststore.Engines(t, testHousekeepingOneProcessAtATime)
}

func testHousekeepingOneProcessAtATime(t *testing.T, open teststore.Open) {
	ctx := context.Background()
	stA := open(t)
	stB := stA
	if strings.HasSuffix(t.Name(), "/postgres") {
		stB = open(t) // the same database (teststore.Engines), another pool
	}
	const ttl = 900 * time.Millisecond
	a, b := &deleteCounter{Store: stA}, &deleteCounter{Store: stB}
	ctxA, stopA := context.WithCancel(ctx)
	ctxB, stopB := context.WithCancel(ctx)
	doneA, doneB := make(chan struct{}), make(chan struct{})
	go func() { housekeep(ctxA, a, lease.NewIdentity(), ttl, slog.New(slog.DiscardHandler)); close(doneA) }()
	go func() { housekeep(ctxB, b, lease.NewIdentity(), ttl, slog.New(slog.DiscardHandler)); close(doneB) }()
	defer func() { stopA(); stopB(); <-doneA; <-doneB }()
	waitUntil(t, "one run", func() bool { return a.runs.Load()+b.runs.Load() > 0 })
	time.Sleep(3 * ttl) // a few renewals: the other process must not run meanwhile
	ra, rb := a.runs.Load(), b.runs.Load()
	if ra+rb != 1 {
		t.Fatalf("runs: %d and %d, want exactly one (one process, once per hour)", ra, rb)
	}
	holder, other, stopHolder, holderDone := a, b, stopA, doneA
	if rb == 1 {
		holder, other, stopHolder, holderDone = b, a, stopB, doneB
	}
	stopHolder() // releases the lease
	<-holderDone
	waitUntil(t, "the other process's run", func() bool { return other.runs.Load() == 1 })
	if n := holder.runs.Load(); n != 1 {
		t.Fatalf("the stopped process ran %d times, want 1", n)
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
