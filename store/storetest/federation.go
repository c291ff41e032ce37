package storetest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/store"
)

// federationTests cover store.Federation (spec/federation.md).
var federationTests = []struct {
	name string
	fn   func(t *testing.T, s store.Store)
}{
	{"federation/append_at_key_time", testAppendAtKeyTime},
	{"federation/registry_keys", testRegistryKeys},
	{"federation/import_key", testImportKey},
	{"federation/project_events", testProjectEvents},
	{"federation/peers", testPeers},
	{"federation/refusals", testRefusals},
	{"federation/peer_subscriptions", testPeerSubscriptions},
}

// testRefusals: a refusal that may pass keeps its bytes and is listed as
// pending in remote order; refusing it again counts an attempt; a final
// refusal drops the bytes and stays final; counts and the latest are per
// link; a stored record's refusal is deleted; an unknown link is
// ErrNotFound; removing the link removes its refusals.
func testRefusals(t *testing.T, st store.Store) {
	ctx := context.Background()
	p := must[store.Project](t, "project")(st.CreateProject(ctx, NewUUID()))
	peer := must[store.Peer](t, "peer")(st.CreatePeer(ctx, store.Peer{ID: NewUUID(), ProjectID: p.ID, RemoteURL: "https://a.example", Token: "t"}))
	other := must[store.Peer](t, "peer")(st.CreatePeer(ctx, store.Peer{ID: NewUUID(), ProjectID: p.ID, RemoteURL: "https://b.example", Token: "t"}))
	at := time.Date(2026, 7, 1, 9, 0, 0, 123e6, time.UTC)
	save := func(peerID string, seq int64, reason string, final bool, record string) {
		t.Helper()
		r := store.Refusal{ProjectID: p.ID, PeerID: peerID, ReceivedSeq: seq, EventID: "sha256:x", Reason: reason, Final: final,
			Record: []byte(record), RemoteReceivedAt: at}
		if err := st.SaveRefusal(ctx, r); err != nil {
			t.Fatalf("save refusal %d: %v", seq, err)
		}
	}
	save(peer.ID, 7, "signing_key_unknown", false, `{"a":7}`)
	save(peer.ID, 3, "signing_key_unknown", false, `{"a":3}`)
	save(peer.ID, 5, "signature_invalid", true, `{"a":5}`)
	save(peer.ID, 3, "signing_key_unknown", false, `{"a":3}`) // again
	save(other.ID, 1, "signing_key_unknown", false, `{"o":1}`)

	pending, err := st.PendingRefusals(ctx, p.ID, peer.ID, 0, 10)
	if err != nil || len(pending) != 2 {
		t.Fatalf("pending: %+v, %v", pending, err)
	}
	if r := pending[0]; r.ReceivedSeq != 3 || string(r.Record) != `{"a":3}` || r.Attempts != 2 || r.Final ||
		!r.RemoteReceivedAt.Equal(at) || r.Reason != "signing_key_unknown" || r.EventID != "sha256:x" || r.RefusedAt.IsZero() ||
		r.FirstRefusedAt.After(r.RefusedAt) {
		t.Fatalf("pending[0] = %+v", r)
	}
	if pending[1].ReceivedSeq != 7 || pending[1].Attempts != 1 {
		t.Fatalf("pending[1] = %+v", pending[1])
	}
	if after, err := st.PendingRefusals(ctx, p.ID, peer.ID, 3, 10); err != nil || len(after) != 1 || after[0].ReceivedSeq != 7 {
		t.Fatalf("pending after 3: %+v, %v", after, err)
	}
	// 7 turns final; a later "may pass" does not undo that.
	save(peer.ID, 7, "signing_key_unknown", true, `{"a":7}`)
	save(peer.ID, 7, "other", false, `{"a":7}`)
	sum, err := st.SummarizeRefusals(ctx, p.ID, peer.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := []store.RefusalCount{{Reason: "signature_invalid", Final: true, Count: 1},
		{Reason: "signing_key_unknown", Final: false, Count: 1}, {Reason: "signing_key_unknown", Final: true, Count: 1}}
	if !slices.Equal(sum.Counts, want) {
		t.Fatalf("counts %+v, want %+v", sum.Counts, want)
	}
	if l := sum.Latest; l == nil || l.ReceivedSeq != 7 || !l.Final || l.Record != nil || l.Attempts != 3 {
		t.Fatalf("latest %+v", sum.Latest)
	}
	all, err := st.SummarizeRefusals(ctx, "", "")
	if err != nil || len(all.Counts) != 3 || all.Counts[1].Count != 2 {
		t.Fatalf("every link's counts: %+v, %v", all.Counts, err)
	}
	// Stored after all.
	if err := st.DeleteRefusal(ctx, p.ID, peer.ID, 3); err != nil {
		t.Fatal(err)
	}
	if pending, err := st.PendingRefusals(ctx, p.ID, peer.ID, 0, 10); err != nil || len(pending) != 0 {
		t.Fatalf("pending after delete: %+v, %v", pending, err)
	}
	if err := st.SaveRefusal(ctx, store.Refusal{ProjectID: p.ID, PeerID: NewUUID(), ReceivedSeq: 1, Reason: "x"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown link: %v", err)
	}
	if err := st.RemovePeer(ctx, p.ID, other.ID); err != nil {
		t.Fatal(err)
	}
	if sum, err := st.SummarizeRefusals(ctx, p.ID, other.ID); err != nil || len(sum.Counts) != 0 || sum.Latest != nil {
		t.Fatalf("a removed link's refusals: %+v, %v", sum, err)
	}
}

// testAppendAtKeyTime: a foreign record is accepted when its key was
// active at the remote receipt time, refused when it was received after
// the revocation; a local append after the revocation is refused.
func testAppendAtKeyTime(t *testing.T, st store.Store) {
	ctx := context.Background()
	p := must[store.Project](t, "project")(st.CreateProject(ctx, NewUUID()))
	s := NewSigner(t, p.ID).Register(t, st)
	revoked, err := st.RevokeKey(ctx, p.ID, s.KeyID)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := st.RegistryKeys(ctx, p.ID, "", 10)
	if err != nil || len(keys) != 1 {
		t.Fatalf("registry keys: %v, %v", keys, err)
	}
	at := keys[0].RevokedAt
	if at.IsZero() || revoked.Status != store.StatusRevoked {
		t.Fatalf("revoked_at not kept: %+v", keys[0])
	}
	before, beforeCanonical := s.Event(t, Spec{Summary: "signed before"})
	res, err := st.AppendAt(ctx, before, beforeCanonical, at.Add(-time.Second))
	if err != nil || !res.Created {
		t.Fatalf("received before the revocation: %+v, %v", res, err)
	}
	again, err := st.AppendAt(ctx, before, beforeCanonical, at.Add(-time.Second))
	if err != nil || again.Created {
		t.Fatalf("exact retry: %+v, %v", again, err)
	}
	after, afterCanonical := s.Event(t, Spec{Summary: "received after"})
	if _, err := st.AppendAt(ctx, after, afterCanonical, at); !errors.Is(err, store.ErrSenderNotActive) {
		t.Fatalf("received at the revocation: %v, want ErrSenderNotActive", err)
	}
	if _, err := st.AppendAt(ctx, after, afterCanonical, at.Add(time.Second)); !errors.Is(err, store.ErrSenderNotActive) {
		t.Fatalf("received after the revocation: %v, want ErrSenderNotActive", err)
	}
	if _, err := st.Append(ctx, after, afterCanonical); !errors.Is(err, store.ErrSenderNotActive) {
		t.Fatalf("local append after the revocation: %v, want ErrSenderNotActive", err)
	}
	// An active key accepts any time; an unknown key none.
	s2 := NewSigner(t, p.ID).Register(t, st)
	ev, canonical := s2.Event(t, Spec{})
	if _, err := st.AppendAt(ctx, ev, canonical, time.Now().Add(time.Hour)); err != nil {
		t.Fatalf("active key: %v", err)
	}
	s3 := NewSigner(t, p.ID)
	ev, canonical = s3.Event(t, Spec{})
	if _, err := st.AppendAt(ctx, ev, canonical, time.Now()); !errors.Is(err, store.ErrSenderNotActive) {
		t.Fatalf("unknown key: %v", err)
	}
	// A deactivated identity: the same rule on deactivated_at.
	if _, err := st.DeactivateIdentity(ctx, p.ID, s2.IdentityID); err != nil {
		t.Fatal(err)
	}
	ev, canonical = s2.Event(t, Spec{Summary: "after deactivation"})
	if _, err := st.AppendAt(ctx, ev, canonical, time.Now().Add(time.Hour)); !errors.Is(err, store.ErrSenderNotActive) {
		t.Fatalf("received after deactivation: %v", err)
	}
	if _, err := st.AppendAt(ctx, ev, canonical, time.Now().Add(-time.Hour)); err != nil {
		t.Fatalf("received before deactivation: %v", err)
	}
}

func testRegistryKeys(t *testing.T, st store.Store) {
	ctx := context.Background()
	p := must[store.Project](t, "project")(st.CreateProject(ctx, NewUUID()))
	other := must[store.Project](t, "project")(st.CreateProject(ctx, NewUUID()))
	NewSigner(t, other.ID).Register(t, st)
	var ids []string
	for range 3 {
		s := NewSigner(t, p.ID).Register(t, st)
		ids = append(ids, s.KeyID)
	}
	first, err := st.RegistryKeys(ctx, p.ID, "", 2)
	if err != nil || len(first) != 2 {
		t.Fatalf("page 1: %v, %v", first, err)
	}
	rest, err := st.RegistryKeys(ctx, p.ID, first[1].SigningKeyID, 2)
	if err != nil || len(rest) != 1 {
		t.Fatalf("page 2: %v, %v", rest, err)
	}
	all := append(first, rest...)
	for i := 1; i < len(all); i++ {
		if all[i-1].SigningKeyID >= all[i].SigningKeyID {
			t.Fatalf("not in key id order: %v", all)
		}
	}
	slices.Sort(ids)
	for i, k := range all {
		if k.SigningKeyID != ids[i] {
			t.Fatalf("keys %v, want the project's own %v (not another project's)", all, ids)
		}
		if k.Status != store.StatusActive || k.IdentityStatus != store.StatusActive || k.Source != store.SourceLocal ||
			k.CreatedAt.IsZero() || !k.RevokedAt.IsZero() || k.PublicKey == "" || k.DisplayName == "" {
			t.Fatalf("key row: %+v", k)
		}
	}
}

func testImportKey(t *testing.T, st store.Store) {
	ctx := context.Background()
	p := must[store.Project](t, "project")(st.CreateProject(ctx, NewUUID()))
	local := NewSigner(t, p.ID).Register(t, st)
	remote := NewSigner(t, p.ID)
	created := time.Date(2026, 7, 1, 10, 0, 0, 0, time.UTC)
	k := store.RegistryKey{SigningKeyID: remote.KeyID, IdentityID: remote.IdentityID, Status: store.StatusActive,
		PublicKey: correspondence.EncodePublicKey(remote.Pub), CreatedAt: created, DisplayName: "remote agent",
		IdentityStatus: store.StatusActive, IdentityCreatedAt: created}
	changed, err := st.ImportKey(ctx, p.ID, "peer-1", k)
	if err != nil || !changed {
		t.Fatalf("import: %v, %v", changed, err)
	}
	if changed, err := st.ImportKey(ctx, p.ID, "peer-1", k); err != nil || changed {
		t.Fatalf("import again: %v, %v", changed, err)
	}
	got, err := st.GetKey(ctx, p.ID, remote.KeyID)
	if err != nil || got.Status != store.StatusActive || got.IdentityID != remote.IdentityID {
		t.Fatalf("imported key: %+v, %v", got, err)
	}
	ev, canonical := remote.Event(t, Spec{})
	if _, err := st.Append(ctx, ev, canonical); err != nil {
		t.Fatalf("append with an imported key: %v", err)
	}
	// A revocation arrives: it applies with the remote's time, one way.
	revokedAt := time.Date(2026, 7, 2, 10, 0, 0, 0, time.UTC)
	k.Status, k.RevokedAt = store.StatusRevoked, revokedAt
	if changed, err := st.ImportKey(ctx, p.ID, "peer-2", k); err != nil || !changed {
		t.Fatalf("import revocation: %v, %v", changed, err)
	}
	keys, err := st.RegistryKeys(ctx, p.ID, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	var row store.RegistryKey
	for _, r := range keys {
		if r.SigningKeyID == remote.KeyID {
			row = r
		}
	}
	if row.Status != store.StatusRevoked || !row.RevokedAt.Equal(revokedAt) || row.Source != "peer-1" || row.IdentitySource != "peer-1" ||
		!row.CreatedAt.Equal(created) {
		t.Fatalf("revoked import: %+v", row)
	}
	ev2, canonical2 := remote.Event(t, Spec{Summary: "after"})
	if _, err := st.Append(ctx, ev2, canonical2); !errors.Is(err, store.ErrSenderNotActive) {
		t.Fatalf("append after imported revocation: %v", err)
	}
	if _, err := st.AppendAt(ctx, ev2, canonical2, revokedAt.Add(-time.Minute)); err != nil {
		t.Fatalf("history before the imported revocation: %v", err)
	}
	k.Status, k.RevokedAt = store.StatusActive, time.Time{}
	if changed, err := st.ImportKey(ctx, p.ID, "peer-1", k); err != nil || changed {
		t.Fatalf("re-activation must not apply: %v, %v", changed, err)
	}
	// A local key is never changed by a peer; other facts conflict.
	lk := store.RegistryKey{SigningKeyID: local.KeyID, IdentityID: local.IdentityID, Status: store.StatusRevoked,
		RevokedAt: revokedAt, PublicKey: correspondence.EncodePublicKey(local.Pub), CreatedAt: created,
		IdentityStatus: store.StatusActive, IdentityCreatedAt: created}
	if changed, err := st.ImportKey(ctx, p.ID, "peer-1", lk); err != nil || changed {
		t.Fatalf("peer revoking a local key: %v, %v", changed, err)
	}
	if got, _ := st.GetKey(ctx, p.ID, local.KeyID); got.Status != store.StatusActive {
		t.Fatalf("local key changed by a peer: %+v", got)
	}
	lk.PublicKey = correspondence.EncodePublicKey(remote.Pub)
	if _, err := st.ImportKey(ctx, p.ID, "peer-1", lk); !errors.Is(err, store.ErrKeyConflict) {
		t.Fatalf("other public key: %v, want ErrKeyConflict", err)
	}
	if _, err := st.ImportKey(ctx, NewUUID(), "peer-1", k); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown project: %v", err)
	}
}

func testProjectEvents(t *testing.T, st store.Store) {
	ctx := context.Background()
	p := must[store.Project](t, "project")(st.CreateProject(ctx, NewUUID()))
	s := NewSigner(t, p.ID).Register(t, st)
	for i, repo := range []string{"repo-a", "repo-b", "repo-a", "repo-c", "repo-b"} {
		ev, canonical := s.Event(t, Spec{RepositoryID: repo, SessionSeq: int64(i + 1)})
		if _, err := st.Append(ctx, ev, canonical); err != nil {
			t.Fatal(err)
		}
	}
	page, err := st.ProjectEvents(ctx, p.ID, 0, 3)
	if err != nil || len(page.Records) != 3 || !page.HasMore {
		t.Fatalf("page 1: %+v, %v", page, err)
	}
	page2, err := st.ProjectEvents(ctx, p.ID, page.Records[2].ReceivedSeq, 3)
	if err != nil || len(page2.Records) != 2 || page2.HasMore {
		t.Fatalf("page 2: %+v, %v", page2, err)
	}
	all := append(page.Records, page2.Records...)
	for i, r := range all {
		if r.ReceivedSeq != int64(i+1) || r.MissingParents == nil {
			t.Fatalf("record %d: %+v", i, r)
		}
	}
}

func testPeers(t *testing.T, st store.Store) {
	ctx := context.Background()
	p := must[store.Project](t, "project")(st.CreateProject(ctx, NewUUID()))
	a := store.Peer{ID: NewUUID(), ProjectID: p.ID, RemoteURL: "https://a.example", Token: "secret-a"}
	got, err := st.CreatePeer(ctx, a)
	if err != nil || got.CreatedAt.IsZero() {
		t.Fatalf("create: %+v, %v", got, err)
	}
	dup := a
	dup.ID = NewUUID()
	if _, err := st.CreatePeer(ctx, dup); !errors.Is(err, store.ErrExists) {
		t.Fatalf("same link twice: %v", err)
	}
	dup.RepositoryID = "repo-1"
	if _, err := st.CreatePeer(ctx, dup); err != nil {
		t.Fatalf("same remote, one repository: %v", err)
	}
	if _, err := st.CreatePeer(ctx, store.Peer{ID: NewUUID(), ProjectID: NewUUID(), RemoteURL: "https://b.example", Token: "t"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown project: %v", err)
	}
	list, err := st.Peers(ctx, p.ID)
	if err != nil || len(list) != 2 {
		t.Fatalf("list: %+v, %v", list, err)
	}
	one, err := st.Peer(ctx, p.ID, a.ID)
	if err != nil || one.Token != "secret-a" || one.RemoteURL != a.RemoteURL {
		t.Fatalf("peer: %+v, %v", one, err)
	}
	if _, err := st.Peer(ctx, NewUUID(), a.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("peer of another project: %v", err)
	}
	if err := st.RemovePeer(ctx, p.ID, a.ID); err != nil {
		t.Fatal(err)
	}
	if err := st.RemovePeer(ctx, p.ID, a.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("remove twice: %v", err)
	}
	all, err := st.Peers(ctx, "")
	if err != nil || len(all) != 1 {
		t.Fatalf("all peers: %+v, %v", all, err)
	}
}
