package storetest

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/acrelay/acrelay/store"
)

// cosignatureTests cover store.Cosignatures (spec/tlog.md §Checkpoints,
// spec/federation.md, issue 24 item 5).
var cosignatureTests = []struct {
	name string
	fn   func(t *testing.T, s store.Store)
}{
	{"witness/key", testWitnessKey},
	{"witness/cosignatures", testCosignatures},
	{"witness/state", testWitnessState},
	{"witness/split_views", testSplitViews},
}

// testWitnessKey: the first call stores create's key; every later call,
// concurrent ones included, returns that key without calling create; a
// failing create stores nothing and its error comes back.
func testWitnessKey(t *testing.T, st store.Store) {
	ctx := context.Background()
	boom := errors.New("no entropy")
	if _, err := st.WitnessKey(ctx, func() (string, error) { return "", boom }); !errors.Is(err, boom) {
		t.Fatalf("WitnessKey with a failing create: err %v, want %v", err, boom)
	}
	var wg sync.WaitGroup
	keys := make([]string, 8)
	for i := range keys {
		wg.Go(func() {
			k, err := st.WitnessKey(ctx, func() (string, error) { return "PRIVATE+KEY+w+0000000" + string(rune('0'+i)) + "+AA", nil })
			if err != nil {
				t.Error(err)
			}
			keys[i] = k
		})
	}
	wg.Wait()
	for i, k := range keys {
		if k != keys[0] || len(k) != len("PRIVATE+KEY+w+00000000+AA") {
			t.Fatalf("WitnessKey #%d = %q, #0 = %q: want one stored key", i, k, keys[0])
		}
	}
	called := false
	k, err := st.WitnessKey(ctx, func() (string, error) { called = true; return "PRIVATE+KEY+other+00000000+AA", nil })
	if err != nil || k != keys[0] || called {
		t.Fatalf("WitnessKey again = %q, %v (create called: %v); want %q, nil, not called", k, err, called, keys[0])
	}
}

func cosig(projectID, name string, size int64, b byte) store.Cosignature {
	var root [32]byte
	root[0], root[31] = b, byte(size)
	return store.Cosignature{ProjectID: projectID, KeyName: name, Size: size, Root: root,
		Body: []byte("relay.example/" + projectID + "\n" + string(rune('0'+size)) + "\nroot\n"), Line: "— " + name + " c2ln" + string(rune('a'+size)) + "\n",
		SignedAt: time.Date(2026, 12, 6, 10, 0, int(size), 0, time.UTC)}
}

// testCosignatures: one cosignature per (project, key name), the one on
// the largest size (an equal size replaces; a smaller one is not stored
// and says so), listed by key name with every field read back exactly;
// an unknown project is ErrNotFound; projects do not see each other's.
func testCosignatures(t *testing.T, st store.Store) {
	ctx := context.Background()
	p := must[store.Project](t, "project")(st.CreateProject(ctx, NewUUID()))
	q := must[store.Project](t, "project")(st.CreateProject(ctx, NewUUID()))
	if _, err := st.SaveCosignature(ctx, cosig(NewUUID(), "w.example/a", 3, 1)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("SaveCosignature on an unknown project: err %v, want ErrNotFound", err)
	}
	if cs, err := st.Cosignatures(ctx, p.ID); err != nil || len(cs) != 0 {
		t.Fatalf("Cosignatures before any = %v, %v; want none", cs, err)
	}
	save := func(c store.Cosignature, want bool) {
		t.Helper()
		ok, err := st.SaveCosignature(ctx, c)
		if err != nil || ok != want {
			t.Fatalf("SaveCosignature(%s, size %d) = %v, %v; want %v, nil", c.KeyName, c.Size, ok, err, want)
		}
	}
	check := func(projectID string, want ...store.Cosignature) {
		t.Helper()
		got, err := st.Cosignatures(ctx, projectID)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("Cosignatures(%s) = %d rows %+v, want %d", projectID, len(got), got, len(want))
		}
		for i, g := range got {
			w := want[i]
			if g.ProjectID != w.ProjectID || g.KeyName != w.KeyName || g.Size != w.Size || g.Root != w.Root || !bytes.Equal(g.Body, w.Body) ||
				g.Line != w.Line || !g.SignedAt.Equal(w.SignedAt) || g.SignedAt.Location() != time.UTC {
				t.Fatalf("Cosignatures(%s)[%d] = %+v\nwant %+v", projectID, i, g, w)
			}
			checkDBTime(t, "StoredAt", g.StoredAt)
		}
	}
	save(cosig(p.ID, "w.example/b", 5, 1), true)
	save(cosig(p.ID, "w.example/a", 4, 1), true)
	check(p.ID, cosig(p.ID, "w.example/a", 4, 1), cosig(p.ID, "w.example/b", 5, 1))
	save(cosig(p.ID, "w.example/b", 3, 2), false) // smaller: the held one stays
	save(cosig(p.ID, "w.example/a", 4, 2), true)  // equal size: replaced
	save(cosig(p.ID, "w.example/b", 7, 2), true)
	save(cosig(q.ID, "w.example/a", 1, 9), true)
	check(p.ID, cosig(p.ID, "w.example/a", 4, 2), cosig(p.ID, "w.example/b", 7, 2))
	check(q.ID, cosig(q.ID, "w.example/a", 1, 9))
}

// testWitnessState: a link's witness state is written only over the size
// it was read at (none counts as 0), reads back exactly, is ErrNotFound
// for an unknown link or before any, lists its witness key under the
// project, and goes with the link.
func testWitnessState(t *testing.T, st store.Store) {
	ctx := context.Background()
	p := must[store.Project](t, "project")(st.CreateProject(ctx, NewUUID()))
	peer := must[store.Peer](t, "peer")(st.CreatePeer(ctx, store.Peer{ID: NewUUID(), ProjectID: p.ID, RemoteURL: "https://a.example", Token: "t"}))
	other := must[store.Peer](t, "peer")(st.CreatePeer(ctx, store.Peer{ID: NewUUID(), ProjectID: p.ID, RemoteURL: "https://b.example", Token: "t"}))
	if _, err := st.WitnessState(ctx, p.ID, peer.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("WitnessState before any: err %v, want ErrNotFound", err)
	}
	at := time.Date(2026, 12, 6, 11, 0, 0, 250e6, time.UTC)
	w := store.WitnessState{ProjectID: p.ID, PeerID: peer.ID, LogKey: "a.example+01020304+AQID", WitnessKey: "a.example/witness+05060708+BAUG",
		Size: 0, CosignedAt: at}
	if _, err := st.SaveWitnessState(ctx, store.WitnessState{ProjectID: p.ID, PeerID: NewUUID(), LogKey: "k", CosignedAt: at}, 0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("SaveWitnessState of an unknown link: err %v, want ErrNotFound", err)
	}
	if _, err := st.SaveWitnessState(ctx, store.WitnessState{ProjectID: NewUUID(), PeerID: peer.ID, LogKey: "k", CosignedAt: at}, 3); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("SaveWitnessState under another project: err %v, want ErrNotFound", err)
	}
	saveW := func(w store.WitnessState, old int64, want bool) {
		t.Helper()
		ok, err := st.SaveWitnessState(ctx, w, old)
		if err != nil || ok != want {
			t.Fatalf("SaveWitnessState(size %d over %d) = %v, %v; want %v, nil", w.Size, old, ok, err, want)
		}
	}
	check := func(want store.WitnessState) {
		t.Helper()
		got, err := st.WitnessState(ctx, p.ID, peer.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.ProjectID != want.ProjectID || got.PeerID != want.PeerID || got.LogKey != want.LogKey || got.WitnessKey != want.WitnessKey ||
			got.Size != want.Size || got.Root != want.Root || !bytes.Equal(got.Checkpoint, want.Checkpoint) || (got.Checkpoint == nil) != (want.Checkpoint == nil) ||
			!got.CosignedAt.Equal(want.CosignedAt) || got.CosignedAt.Location() != time.UTC {
			t.Fatalf("WitnessState = %+v\nwant %+v", got, want)
		}
	}
	saveW(w, 5, false) // none stored: only 0 matches
	saveW(w, 0, true)  // the pinned keys of an empty remote tree
	check(w)
	w5 := w
	w5.Size, w5.Root, w5.Checkpoint, w5.CosignedAt = 5, [32]byte{5, 5}, []byte("a.example/p\n5\nBQU=\n\n— a.example x\n"), at.Add(time.Second)
	saveW(w5, 0, true)
	check(w5)
	w9 := w5
	w9.Size, w9.Root, w9.Checkpoint = 9, [32]byte{9}, []byte("a.example/p\n9\nCQ==\n\n— a.example y\n")
	saveW(w9, 0, false) // stored size is 5
	saveW(w9, 4, false)
	saveW(w9, 5, true)
	check(w9)
	saveW(w5, 5, false) // a second writer that read 5 cannot roll 9 back
	check(w9)
	ow := store.WitnessState{ProjectID: p.ID, PeerID: other.ID, LogKey: "b.example+0a0b0c0d+AQID", CosignedAt: at}
	saveW(ow, 0, true)
	keys, err := st.PeerWitnessKeys(ctx, p.ID)
	if err != nil || len(keys) != 1 || keys[peer.ID] != w.WitnessKey {
		t.Fatalf("PeerWitnessKeys = %v, %v; want only %s: %s", keys, err, peer.ID, w.WitnessKey)
	}
	if keys, err := st.PeerWitnessKeys(ctx, NewUUID()); err != nil || len(keys) != 0 {
		t.Fatalf("PeerWitnessKeys of another project = %v, %v; want none", keys, err)
	}
	if err := st.RemovePeer(ctx, p.ID, peer.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := st.WitnessState(ctx, p.ID, peer.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("WitnessState after RemovePeer: err %v, want ErrNotFound", err)
	}
	if keys, err := st.PeerWitnessKeys(ctx, p.ID); err != nil || len(keys) != 0 {
		t.Fatalf("PeerWitnessKeys after RemovePeer = %v, %v; want none", keys, err)
	}
}

// testSplitViews: evidence reads back exactly with both notes, in
// ascending id, per project or for all; it outlives its link, which then
// reads as removed.
func testSplitViews(t *testing.T, st store.Store) {
	ctx := context.Background()
	p := must[store.Project](t, "project")(st.CreateProject(ctx, NewUUID()))
	q := must[store.Project](t, "project")(st.CreateProject(ctx, NewUUID()))
	peer := must[store.Peer](t, "peer")(st.CreatePeer(ctx, store.Peer{ID: NewUUID(), ProjectID: p.ID, RemoteURL: "https://a.example", Token: "t"}))
	if vs, err := st.SplitViews(ctx, ""); err != nil || len(vs) != 0 {
		t.Fatalf("SplitViews before any = %v, %v", vs, err)
	}
	e1 := store.SplitView{ProjectID: p.ID, PeerID: peer.ID, Kind: store.SplitViewFork, Origin: "a.example/" + p.ID,
		Cosigned: []byte("a.example/p\n3\nAAAA\n\n— a.example x\n"), Seen: []byte("a.example/p\n3\nBBBB\n\n— a.example y\n")}
	got1, err := st.SaveSplitView(ctx, e1)
	if err != nil {
		t.Fatal(err)
	}
	checkDBTime(t, "DetectedAt", got1.DetectedAt)
	if got1.ID <= 0 || got1.LinkRemoved {
		t.Fatalf("SaveSplitView = %+v, want an id and the link present", got1)
	}
	e2 := store.SplitView{ProjectID: q.ID, PeerID: NewUUID(), Kind: store.SplitViewInconsistent, Origin: "b.example/" + q.ID,
		Cosigned: []byte("b1"), Seen: []byte("b2")}
	got2, err := st.SaveSplitView(ctx, e2)
	if err != nil || got2.ID <= got1.ID || !got2.LinkRemoved {
		t.Fatalf("SaveSplitView of a link not configured = %+v, %v; want a larger id, LinkRemoved", got2, err)
	}
	same := func(g, w store.SplitView) bool {
		return g.ID == w.ID && g.ProjectID == w.ProjectID && g.PeerID == w.PeerID && g.Kind == w.Kind && g.Origin == w.Origin &&
			bytes.Equal(g.Cosigned, w.Cosigned) && bytes.Equal(g.Seen, w.Seen) && g.LinkRemoved == w.LinkRemoved && g.DetectedAt.Equal(w.DetectedAt)
	}
	all, err := st.SplitViews(ctx, "")
	if err != nil || len(all) != 2 || !same(all[0], got1) || !same(all[1], got2) {
		t.Fatalf("SplitViews(all) = %+v, %v\nwant %+v, %+v", all, err, got1, got2)
	}
	ps, err := st.SplitViews(ctx, p.ID)
	if err != nil || len(ps) != 1 || !same(ps[0], got1) {
		t.Fatalf("SplitViews(p) = %+v, %v; want %+v", ps, err, got1)
	}
	if err := st.RemovePeer(ctx, p.ID, peer.ID); err != nil {
		t.Fatal(err)
	}
	got1.LinkRemoved = true
	ps, err = st.SplitViews(ctx, p.ID)
	if err != nil || len(ps) != 1 || !same(ps[0], got1) {
		t.Fatalf("SplitViews(p) after RemovePeer = %+v, %v; want %+v", ps, err, got1)
	}
}
