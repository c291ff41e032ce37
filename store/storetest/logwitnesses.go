package storetest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/acrelay/acrelay/store"
)

// logWitnessTests cover store.LogWitnesses (issue 34).
var logWitnessTests = []struct {
	name string
	fn   func(t *testing.T, s store.Store)
}{
	{"log_witness/states", testLogWitnessStates},
	{"log_witness/witnessed_logs", testWitnessedLogs},
}

// testLogWitnessStates: a state is stored per project and witness,
// replaced whole, listed by project then witness; an unknown project is
// ErrNotFound.
func testLogWitnessStates(t *testing.T, st store.Store) {
	ctx := context.Background()
	p := must[store.Project](t, "project")(st.CreateProject(ctx, NewUUID()))
	q := must[store.Project](t, "project")(st.CreateProject(ctx, NewUUID()))
	if p.ID > q.ID {
		p, q = q, p
	}
	if err := st.SaveLogWitnessState(ctx, store.LogWitnessState{ProjectID: NewUUID(), Witness: "w+1+A"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown project: %v, want ErrNotFound", err)
	}
	if got, err := st.LogWitnessStates(ctx, p.ID); err != nil || len(got) != 0 {
		t.Fatalf("before any: %v, %v", got, err)
	}
	at := time.Date(2026, 12, 6, 20, 1, 2, 345_000_000, time.UTC)
	states := []store.LogWitnessState{
		{ProjectID: q.ID, Witness: "a.example/w+01020304+AAAA", KnownSize: 9},
		{ProjectID: p.ID, Witness: "b.example/w+01020304+BBBB", KnownSize: 300, CosignedSize: 300, CosignedAt: at},
		{ProjectID: p.ID, Witness: "a.example/w+01020304+AAAA", KnownSize: 12, LastError: "witness answered 404", ErrorAt: at},
	}
	for _, s := range states {
		if err := st.SaveLogWitnessState(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	// Replaced whole: the error is gone after a success.
	states[2] = store.LogWitnessState{ProjectID: p.ID, Witness: "a.example/w+01020304+AAAA", KnownSize: 20, CosignedSize: 20, CosignedAt: at.Add(time.Second)}
	if err := st.SaveLogWitnessState(ctx, states[2]); err != nil {
		t.Fatal(err)
	}
	all, err := st.LogWitnessStates(ctx, "")
	if err != nil || len(all) != 3 {
		t.Fatalf("all: %+v, %v", all, err)
	}
	for i, want := range []store.LogWitnessState{states[2], states[1], states[0]} {
		got := all[i]
		if got.UpdatedAt.IsZero() || time.Since(got.UpdatedAt) > time.Minute {
			t.Errorf("state %d UpdatedAt %v", i, got.UpdatedAt)
		}
		got.UpdatedAt = time.Time{}
		if got.ProjectID != want.ProjectID || got.Witness != want.Witness || got.KnownSize != want.KnownSize || got.CosignedSize != want.CosignedSize ||
			!got.CosignedAt.Equal(want.CosignedAt) || got.LastError != want.LastError || !got.ErrorAt.Equal(want.ErrorAt) {
			t.Errorf("state %d = %+v, want %+v", i, got, want)
		}
	}
	if one, err := st.LogWitnessStates(ctx, q.ID); err != nil || len(one) != 1 || one[0].KnownSize != 9 || !one[0].CosignedAt.IsZero() {
		t.Fatalf("project q: %+v, %v", one, err)
	}
}

// testWitnessedLogs: the latest checkpoint per origin is a compare-and-set
// on its size: of concurrent writers from one size, exactly one wins; a
// smaller size is never stored.
func testWitnessedLogs(t *testing.T, st store.Store) {
	ctx := context.Background()
	origin := "log.example/" + NewUUID()
	if _, err := st.WitnessedLog(ctx, origin); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("none yet: %v, want ErrNotFound", err)
	}
	save := func(size int64, b byte, old int64, want bool) {
		t.Helper()
		ok, err := st.SaveWitnessedLog(ctx, store.WitnessedLog{Origin: origin, Size: size, Root: [32]byte{b}, Checkpoint: []byte{b}}, old)
		if err != nil || ok != want {
			t.Fatalf("SaveWitnessedLog(size %d from %d) = %v, %v; want %v", size, old, ok, err, want)
		}
	}
	save(5, 1, 0, true)
	save(6, 2, 0, false) // stored size is 5, not 0
	save(4, 3, 5, false) // never smaller
	var wg sync.WaitGroup
	wins := make([]bool, 8)
	for i := range wins {
		wg.Go(func() {
			ok, err := st.SaveWitnessedLog(ctx, store.WitnessedLog{Origin: origin, Size: 9, Root: [32]byte{byte(10 + i)}, Checkpoint: []byte{byte(10 + i)}}, 5)
			if err != nil {
				t.Error(err)
			}
			wins[i] = ok
		})
	}
	wg.Wait()
	won := -1
	for i, ok := range wins {
		if ok {
			if won >= 0 {
				t.Fatalf("writers %d and %d both stored size 9 from 5", won, i)
			}
			won = i
		}
	}
	l, err := st.WitnessedLog(ctx, origin)
	if won < 0 || err != nil || l.Size != 9 || l.Root != [32]byte{byte(10 + won)} || string(l.Checkpoint) != string([]byte{byte(10 + won)}) || l.Origin != origin {
		t.Fatalf("after the race: won %d, %+v, %v", won, l, err)
	}
}
