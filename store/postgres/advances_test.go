package postgres_test

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/postgres"
	"github.com/acrelay/acrelay/store/storetest"
)

// heard collects a subscription's advances into the highest received_seq
// per project.
func heard(t *testing.T, sub *store.AdvanceSubscription, got map[string]int64, until func() bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for !until() {
		select {
		case <-sub.Ready():
			for _, a := range sub.Take() {
				if a.ReceivedSeq > got[a.ProjectID] {
					got[a.ProjectID] = a.ReceivedSeq
				}
			}
		case <-deadline:
			t.Fatalf("advances heard: %v", got)
		}
	}
}

// TestSubscribeAdvancesAcrossProcesses: a subscription on a second store
// handle (as another relay process would have) hears every project's
// committed head through LISTEN/NOTIFY, never a head beyond what
// committed; after its LISTEN connection is killed, the re-check on
// reconnect publishes what was committed while it was down.
func TestSubscribeAdvancesAcrossProcesses(t *testing.T) {
	dbURL := freshDatabase(t)
	ctx := context.Background()
	open := func() *postgres.DB {
		db, err := postgres.Open(ctx, dbURL, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	writer, listener := open(), open()
	sub := listener.SubscribeAdvances()
	defer sub.Close()

	var signers []*storetest.Signer
	for range 2 {
		p, err := writer.CreateProject(ctx, storetest.NewUUID())
		if err != nil {
			t.Fatal(err)
		}
		signers = append(signers, storetest.NewSigner(t, p.ID).Register(t, writer))
	}
	got := map[string]int64{}
	// The LISTEN connection opens asynchronously: append until heard.
	warm := int64(0)
	heardFirst := func() bool { return got[signers[0].ProjectID] > 0 }
	for !heardFirst() {
		ev, c := signers[0].Event(t, storetest.Spec{})
		if _, err := writer.Append(ctx, ev, c); err != nil {
			t.Fatal(err)
		}
		warm++
		select {
		case <-sub.Ready():
			for _, a := range sub.Take() {
				got[a.ProjectID] = max(got[a.ProjectID], a.ReceivedSeq)
			}
		case <-time.After(100 * time.Millisecond):
		}
		if warm > 100 {
			t.Fatal("no advance heard after 100 appends")
		}
	}
	heads := map[string]int64{signers[0].ProjectID: warm}
	for range 5 {
		for _, sg := range signers {
			ev, c := sg.Event(t, storetest.Spec{})
			res, err := writer.Append(ctx, ev, c)
			if err != nil {
				t.Fatal(err)
			}
			heads[sg.ProjectID] = res.Record.ReceivedSeq
			if again, err := writer.Append(ctx, ev, c); err != nil || again.Created {
				t.Fatalf("retry: %v %v", again.Created, err)
			}
		}
	}
	caughtUp := func() bool {
		for p, h := range heads {
			if got[p] > h {
				t.Fatalf("heard %d for a project whose head is %d", got[p], h)
			}
			if got[p] < h {
				return false
			}
		}
		return true
	}
	heard(t, sub, got, caughtUp)

	// Kill the LISTEN connection, append from the other handle at once,
	// and hear it: by NOTIFY after the reconnect, or by the re-check.
	admin, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE query LIKE 'LISTEN acrelay_advances%' AND pid <> pg_backend_pid()`); err != nil {
		t.Fatal(err)
	}
	for _, sg := range signers {
		ev, c := sg.Event(t, storetest.Spec{})
		res, err := writer.Append(ctx, ev, c)
		if err != nil {
			t.Fatal(err)
		}
		heads[sg.ProjectID] = res.Record.ReceivedSeq
	}
	heard(t, sub, got, caughtUp)
}

// TestPeerWakesAcrossProcesses: a wake sent on one store handle is heard
// on another (as another relay process would be) through LISTEN/NOTIFY,
// with no subscription to advances there (a wake subscription alone keeps
// the LISTEN connection); after that connection is killed, the reconnect
// publishes the zero PeerWake (wakes sent while it was down are lost), and
// wakes are heard again.
func TestPeerWakesAcrossProcesses(t *testing.T) {
	dbURL := freshDatabase(t)
	ctx := context.Background()
	open := func() *postgres.DB {
		db, err := postgres.Open(ctx, dbURL, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	sender, listener := open(), open()
	sub := listener.SubscribePeerWakes()
	defer sub.Close()
	want := store.PeerWake{ProjectID: storetest.NewUUID(), PeerID: "peer-1"}
	hear := func(what string, send func(), ok func([]store.PeerWake) bool) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			send()
			select {
			case <-sub.Ready():
				if ws := sub.Take(); ok(ws) {
					return
				}
			case <-time.After(100 * time.Millisecond):
			case <-deadline:
				t.Fatalf("%s: not heard within 10 s", what)
			}
		}
	}
	wake := func() {
		if err := sender.WakePeer(ctx, want.ProjectID, want.PeerID); err != nil {
			t.Fatal(err)
		}
	}
	hear("a wake from the other handle", wake, func(ws []store.PeerWake) bool {
		if len(ws) != 1 || ws[0] != want {
			t.Fatalf("heard %+v, want [%+v]", ws, want)
		}
		return true
	})

	admin, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	tag, err := admin.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE query LIKE 'LISTEN acrelay_advances%' AND pid <> pg_backend_pid()`)
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("terminate the LISTEN connection: %v, %d rows", err, tag.RowsAffected())
	}
	hear("the zero wake after the reconnect", func() {}, func(ws []store.PeerWake) bool {
		return slices.Contains(ws, store.PeerWake{})
	})
	hear("a wake after the reconnect", wake, func(ws []store.PeerWake) bool { return slices.Contains(ws, want) })
}
