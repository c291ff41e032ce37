package storetest

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/acrelay/acrelay/store"
)

// testPeerSubscriptions: a link's subscriber state reads back exactly
// (secret bytes, times at millisecond precision, lease in whole seconds);
// saving replaces it; a replace under another request id changes nothing
// and says so; a nil secret stays nil; an unknown link and a removed one
// are ErrNotFound.
func testPeerSubscriptions(t *testing.T, st store.Store) {
	ctx := context.Background()
	p := must[store.Project](t, "project")(st.CreateProject(ctx, NewUUID()))
	peer := must[store.Peer](t, "peer")(st.CreatePeer(ctx, store.Peer{ID: NewUUID(), ProjectID: p.ID, RemoteURL: "https://a.example", Token: "t"}))
	if _, err := st.PeerSubscription(ctx, p.ID, peer.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("PeerSubscription before any: err %v, want ErrNotFound", err)
	}
	at := time.Date(2026, 7, 1, 9, 0, 0, 123e6, time.UTC)
	s := store.PeerSubscription{ProjectID: p.ID, PeerID: peer.ID, Topic: "https://a.example/v1/websub/topics/x?format=json",
		RequestID: "r1", Mode: "subscribe", Secret: []byte("0123456789abcdef0123456789abcdef0123456789a"), RequestedAt: at, State: "pending"}
	if err := st.SavePeerSubscription(ctx, store.PeerSubscription{ProjectID: p.ID, PeerID: NewUUID(), RequestID: "r", Mode: "subscribe",
		RequestedAt: at, State: "pending"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("SavePeerSubscription of an unknown link: err %v, want ErrNotFound", err)
	}
	if err := st.SavePeerSubscription(ctx, store.PeerSubscription{ProjectID: NewUUID(), PeerID: peer.ID, RequestID: "r", Mode: "subscribe",
		RequestedAt: at, State: "pending"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("SavePeerSubscription under another project: err %v, want ErrNotFound", err)
	}
	if err := st.SavePeerSubscription(ctx, s); err != nil {
		t.Fatal(err)
	}
	check := func(want store.PeerSubscription) {
		t.Helper()
		got, err := st.PeerSubscription(ctx, p.ID, peer.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.ProjectID != want.ProjectID || got.PeerID != want.PeerID || got.Topic != want.Topic || got.RequestID != want.RequestID ||
			got.Mode != want.Mode || !bytes.Equal(got.Secret, want.Secret) || (got.Secret == nil) != (want.Secret == nil) ||
			!got.RequestedAt.Equal(want.RequestedAt) || got.Failed != want.Failed || got.State != want.State || got.Verified != want.Verified ||
			got.Lease != want.Lease || !got.VerifiedAt.Equal(want.VerifiedAt) || got.Reason != want.Reason {
			t.Fatalf("PeerSubscription = %+v\nwant %+v", got, want)
		}
	}
	check(s)
	if _, err := st.PeerSubscription(ctx, NewUUID(), peer.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("PeerSubscription under another project: err %v, want ErrNotFound", err)
	}

	v := s
	v.State, v.Verified, v.Lease, v.VerifiedAt = "active", true, 86400*time.Second, at.Add(1500*time.Millisecond)
	if ok, err := st.ReplacePeerSubscription(ctx, v, "r0"); err != nil || ok {
		t.Fatalf("ReplacePeerSubscription under another request id = %v, %v; want false, nil", ok, err)
	}
	check(s)
	if ok, err := st.ReplacePeerSubscription(ctx, v, "r1"); err != nil || !ok {
		t.Fatalf("ReplacePeerSubscription = %v, %v; want true, nil", ok, err)
	}
	check(v)

	u := v
	u.RequestID, u.Mode, u.Secret, u.State, u.Verified, u.Failed, u.Reason = "r2", "unsubscribe", nil, "unsubscribed", false, true, "gone"
	if err := st.SavePeerSubscription(ctx, u); err != nil {
		t.Fatal(err)
	}
	check(u)

	if err := st.RemovePeer(ctx, p.ID, peer.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := st.PeerSubscription(ctx, p.ID, peer.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("PeerSubscription after RemovePeer: err %v, want ErrNotFound", err)
	}
	if ok, err := st.ReplacePeerSubscription(ctx, v, "r2"); err != nil || ok {
		t.Fatalf("ReplacePeerSubscription after RemovePeer = %v, %v; want false, nil", ok, err)
	}
}
