package postgres_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/postgres"
	"github.com/acrelay/acrelay/store/storetest"
)

// TestListenAdvances: a listener on a second store handle (as another
// relay process would be) hears "project P advanced to N" once per
// committed creating append, in each project's order; exact retries and
// refused appends are not announced.
func TestListenAdvances(t *testing.T) {
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
	got := make(chan string, 100)
	lctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- listener.ListenAdvances(lctx, func(p string, seq int64) { got <- fmt.Sprintf("%s %d", p, seq) })
	}()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != context.Canceled {
			t.Errorf("ListenAdvances returned %v, want context.Canceled", err)
		}
	})

	var want []string
	projects := map[string]*storetest.Signer{}
	for range 2 {
		p, err := writer.CreateProject(ctx, storetest.NewUUID())
		if err != nil {
			t.Fatal(err)
		}
		projects[p.ID] = storetest.NewSigner(t, p.ID).Register(t, writer)
	}
	// The listener connects asynchronously: append until the first
	// announcement arrives, then count exactly.
	var first *storetest.Signer
	for _, sg := range projects {
		first = sg
		break
	}
	warm := 0
	deadline := time.After(10 * time.Second)
warmup:
	for {
		ev, c := first.Event(t, storetest.Spec{})
		if _, err := writer.Append(ctx, ev, c); err != nil {
			t.Fatal(err)
		}
		warm++
		select {
		case <-got:
			break warmup
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			t.Fatal("no advance heard within 10s")
		}
	}
	for len(got) > 0 {
		<-got
	}
	seqs := map[string]int64{first.ProjectID: int64(warm)}
	for i := range 6 {
		for pid, sg := range projects {
			ev, c := sg.Event(t, storetest.Spec{})
			res, err := writer.Append(ctx, ev, c)
			if err != nil {
				t.Fatal(err)
			}
			seqs[pid]++
			if res.Record.ReceivedSeq != seqs[pid] {
				t.Fatalf("seq %d, want %d", res.Record.ReceivedSeq, seqs[pid])
			}
			want = append(want, fmt.Sprintf("%s %d", pid, seqs[pid]))
			if i == 0 {
				if again, err := writer.Append(ctx, ev, c); err != nil || again.Created {
					t.Fatalf("retry: %v %v", again.Created, err)
				}
				bad := *sg
				bad.IdentityID = storetest.NewUUID()
				ev, c := bad.Event(t, storetest.Spec{})
				if _, err := writer.Append(ctx, ev, c); err == nil {
					t.Fatal("unregistered sender accepted")
				}
			}
		}
	}
	var heard []string
	for len(heard) < len(want) {
		select {
		case s := <-got:
			heard = append(heard, s)
		case <-time.After(10 * time.Second):
			t.Fatalf("heard %d of %d advances", len(heard), len(want))
		}
	}
	select {
	case s := <-got:
		t.Fatalf("unexpected advance %s", s)
	case <-time.After(200 * time.Millisecond):
	}
	if fmt.Sprint(heard) != fmt.Sprint(want) {
		t.Fatalf("heard %v\nwant  %v", heard, want)
	}
	var _ store.Advances = listener
}
