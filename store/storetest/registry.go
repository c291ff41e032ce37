package storetest

import (
	"bytes"
	"crypto/sha256"
	"slices"
	"testing"

	"github.com/acrelay/acrelay/store"
)

func testProjects(t *testing.T, s store.Store) {
	if n := must[int](t, "count")(s.CountProjects(ctx)); n != 0 {
		t.Fatalf("fresh store has %d projects", n)
	}
	id := NewUUID()
	p := must[store.Project](t, "create")(s.CreateProject(ctx, id))
	if p.ID != id {
		t.Fatalf("id = %q", p.ID)
	}
	checkDBTime(t, "created_at", p.CreatedAt)
	_, err := s.CreateProject(ctx, id)
	wantErr(t, "duplicate project", err, store.ErrExists)
	got := must[store.Project](t, "get")(s.GetProject(ctx, id))
	if got != p {
		t.Fatalf("get = %+v, want %+v", got, p)
	}
	_, err = s.GetProject(ctx, NewUUID())
	wantErr(t, "unknown project", err, store.ErrNotFound)
	must[store.Project](t, "create 2")(s.CreateProject(ctx, NewUUID()))
	if n := must[int](t, "count")(s.CountProjects(ctx)); n != 2 {
		t.Fatalf("count = %d, want 2", n)
	}
	seq, at, err := s.Head(ctx, id)
	if err != nil || seq != 0 || !at.IsZero() {
		t.Fatalf("head of empty = %d %v %v", seq, at, err)
	}
	_, _, err = s.Head(ctx, NewUUID())
	wantErr(t, "head of unknown project", err, store.ErrNotFound)
}

func testIdentities(t *testing.T, s store.Store) {
	pid := must[store.Project](t, "project")(s.CreateProject(ctx, NewUUID())).ID
	_, err := s.CreateIdentity(ctx, store.Identity{ID: NewUUID(), ProjectID: NewUUID(), DisplayName: "x"})
	wantErr(t, "identity of unknown project", err, store.ErrNotFound)

	ids := []string{
		"00000000-0000-4000-8000-000000000003",
		"00000000-0000-4000-8000-000000000001",
		"00000000-0000-4000-8000-000000000005",
		"00000000-0000-4000-8000-000000000002",
		"00000000-0000-4000-8000-000000000004",
	}
	for _, id := range ids {
		got := must[store.Identity](t, "create identity")(s.CreateIdentity(ctx, store.Identity{ID: id, ProjectID: pid, DisplayName: "name " + id[len(id)-1:]}))
		if got.Status != store.StatusActive || got.ProjectID != pid || got.DisplayName != "name "+id[len(id)-1:] {
			t.Fatalf("created %+v", got)
		}
		checkDBTime(t, "identity created_at", got.CreatedAt)
	}
	_, err = s.CreateIdentity(ctx, store.Identity{ID: ids[0], ProjectID: pid, DisplayName: "again"})
	wantErr(t, "duplicate identity", err, store.ErrExists)

	first := must[store.Identity](t, "get")(s.GetIdentity(ctx, pid, ids[1]))
	deact := must[store.Identity](t, "deactivate")(s.DeactivateIdentity(ctx, pid, ids[1]))
	want := first
	want.Status = store.StatusInactive
	if deact != want {
		t.Fatalf("deactivated = %+v, want %+v", deact, want)
	}
	if got := must[store.Identity](t, "get")(s.GetIdentity(ctx, pid, ids[1])); got != want {
		t.Fatalf("get after deactivate = %+v", got)
	}
	_, err = s.GetIdentity(ctx, pid, NewUUID())
	wantErr(t, "unknown identity", err, store.ErrNotFound)
	_, err = s.DeactivateIdentity(ctx, pid, NewUUID())
	wantErr(t, "deactivate unknown", err, store.ErrNotFound)

	// An identity of another project never shows up.
	other := must[store.Project](t, "project")(s.CreateProject(ctx, NewUUID())).ID
	must[store.Identity](t, "other")(s.CreateIdentity(ctx, store.Identity{ID: "00000000-0000-4000-8000-000000000000", ProjectID: other}))

	// Ids are scoped to their project: another project may use the same id
	// (no 409 oracle, no squatting), and lookups never cross projects.
	same := must[store.Identity](t, "same id, other project")(s.CreateIdentity(ctx, store.Identity{ID: ids[0], ProjectID: other, DisplayName: "other's"}))
	if same.ProjectID != other || same.Status != store.StatusActive {
		t.Fatalf("same id in another project: %+v", same)
	}
	if got := must[store.Identity](t, "get")(s.GetIdentity(ctx, pid, ids[0])); got.DisplayName != "name 3" {
		t.Fatalf("lookup crossed projects: %+v", got)
	}
	_, err = s.GetIdentity(ctx, other, ids[1])
	wantErr(t, "identity of another project", err, store.ErrNotFound)
	_, err = s.DeactivateIdentity(ctx, other, ids[2])
	wantErr(t, "deactivate an identity of another project", err, store.ErrNotFound)

	var pages [][]string
	after := ""
	for {
		page := must[[]string](t, "page")(s.ActiveIdentityIDs(ctx, pid, after, 2))
		if len(page) == 0 {
			break
		}
		pages = append(pages, page)
		after = page[len(page)-1]
	}
	wantPages := [][]string{
		{"00000000-0000-4000-8000-000000000002", "00000000-0000-4000-8000-000000000003"},
		{"00000000-0000-4000-8000-000000000004", "00000000-0000-4000-8000-000000000005"},
	}
	if !slices.EqualFunc(pages, wantPages, slices.Equal) {
		t.Fatalf("pages = %v, want %v", pages, wantPages)
	}

	// ListIdentities: every status, in id order, paged, never another
	// project's (the same id there included).
	var listed []store.Identity
	after = ""
	for {
		page := must[[]store.Identity](t, "list page")(s.ListIdentities(ctx, pid, after, 2))
		if len(page) == 0 {
			break
		}
		if len(page) > 2 {
			t.Fatalf("page of %d, limit 2", len(page))
		}
		listed = append(listed, page...)
		after = page[len(page)-1].ID
	}
	sorted := slices.Sorted(slices.Values(ids))
	if len(listed) != len(sorted) {
		t.Fatalf("listed %d identities, want %d: %+v", len(listed), len(sorted), listed)
	}
	for i, got := range listed {
		if want := must[store.Identity](t, "get")(s.GetIdentity(ctx, pid, sorted[i])); got != want {
			t.Fatalf("listed[%d] = %+v, want %+v", i, got, want)
		}
	}
	if listed[0].Status != store.StatusInactive {
		t.Fatalf("the deactivated identity is listed as %q", listed[0].Status)
	}
	if got := must[[]store.Identity](t, "list")(s.ListIdentities(ctx, NewUUID(), "", 10)); len(got) != 0 {
		t.Fatalf("unknown project lists %+v", got)
	}
}

func testKeys(t *testing.T, s store.Store) {
	pid := must[store.Project](t, "project")(s.CreateProject(ctx, NewUUID())).ID
	sg := NewSigner(t, pid).Register(t, s)
	k := must[store.SigningKey](t, "get key")(s.GetKey(ctx, pid, sg.KeyID))
	if k.ID != sg.KeyID || k.IdentityID != sg.IdentityID || k.ProjectID != pid || k.Status != store.StatusActive ||
		k.PublicKey != encodePub(sg) {
		t.Fatalf("key = %+v", k)
	}
	checkDBTime(t, "key created_at", k.CreatedAt)
	_, err := s.AddKey(ctx, store.SigningKey{ID: sg.KeyID, IdentityID: sg.IdentityID, ProjectID: pid, PublicKey: k.PublicKey})
	wantErr(t, "duplicate key", err, store.ErrExists)
	_, err = s.AddKey(ctx, store.SigningKey{ID: NewUUID(), IdentityID: NewUUID(), ProjectID: pid, PublicKey: k.PublicKey})
	wantErr(t, "key of unknown identity", err, store.ErrNotFound)
	other := must[store.Project](t, "project")(s.CreateProject(ctx, NewUUID())).ID
	_, err = s.AddKey(ctx, store.SigningKey{ID: NewUUID(), IdentityID: sg.IdentityID, ProjectID: other, PublicKey: k.PublicKey})
	wantErr(t, "key of an identity of another project", err, store.ErrNotFound)

	// The same key id in another project is another key.
	o := NewSigner(t, other)
	o.IdentityID, o.KeyID = sg.IdentityID, sg.KeyID
	o.Register(t, s)
	if got := must[store.SigningKey](t, "get")(s.GetKey(ctx, other, sg.KeyID)); got.PublicKey == k.PublicKey || got.ProjectID != other {
		t.Fatalf("same key id in another project: %+v", got)
	}

	rev := must[store.SigningKey](t, "revoke")(s.RevokeKey(ctx, pid, sg.KeyID))
	want := k
	want.Status = store.StatusRevoked
	if rev != want {
		t.Fatalf("revoked = %+v, want %+v", rev, want)
	}
	if got := must[store.SigningKey](t, "get")(s.GetKey(ctx, pid, sg.KeyID)); got != want {
		t.Fatalf("get after revoke = %+v", got)
	}
	if got := must[store.SigningKey](t, "get")(s.GetKey(ctx, other, sg.KeyID)); got.Status != store.StatusActive {
		t.Fatalf("revoking a key revoked another project's key with the same id: %+v", got)
	}
	// ListKeys: the identity's keys of every status, in id order, paged;
	// the same ids in another project are that project's.
	second := store.SigningKey{ID: "00000000-0000-4000-8000-000000000000", IdentityID: sg.IdentityID, ProjectID: pid, PublicKey: encodePub(NewSigner(t, pid))}
	second = must[store.SigningKey](t, "second key")(s.AddKey(ctx, second))
	keys := must[[]store.SigningKey](t, "list keys")(s.ListKeys(ctx, pid, sg.IdentityID, "", 10))
	if len(keys) != 2 || keys[0] != second || keys[1] != want {
		t.Fatalf("keys = %+v, want [%+v %+v]", keys, second, want)
	}
	if page := must[[]store.SigningKey](t, "list keys")(s.ListKeys(ctx, pid, sg.IdentityID, second.ID, 1)); len(page) != 1 || page[0] != want {
		t.Fatalf("second page = %+v, want [%+v]", page, want)
	}
	if got := must[[]store.SigningKey](t, "list keys")(s.ListKeys(ctx, other, sg.IdentityID, "", 10)); len(got) != 1 || got[0].ProjectID != other || got[0].Status != store.StatusActive {
		t.Fatalf("other project's keys = %+v", got)
	}
	if got := must[[]store.SigningKey](t, "list keys")(s.ListKeys(ctx, pid, NewUUID(), "", 10)); len(got) != 0 {
		t.Fatalf("unknown identity lists %+v", got)
	}
	_, err = s.GetKey(ctx, pid, NewUUID())
	wantErr(t, "unknown key", err, store.ErrNotFound)
	_, err = s.RevokeKey(ctx, pid, NewUUID())
	wantErr(t, "revoke unknown key", err, store.ErrNotFound)
}

func testTokens(t *testing.T, s store.Store) {
	pid := must[store.Project](t, "project")(s.CreateProject(ctx, NewUUID())).ID
	sum := sha256.Sum256([]byte("acr_abcdefghijklmnopqrstuvwxyz_secret"))
	tok := store.Token{ID: "abcdefghijklmnopqrstuvwxyz", ProjectID: pid, Scopes: []string{store.ScopeRead, store.ScopeAppend}, Hash: sum[:]}
	created := must[store.Token](t, "create token")(s.CreateToken(ctx, tok))
	checkDBTime(t, "token created_at", created.CreatedAt)
	got := must[store.Token](t, "get token")(s.GetToken(ctx, tok.ID))
	if got.ID != tok.ID || got.ProjectID != pid || !slices.Equal(got.Scopes, tok.Scopes) || !bytes.Equal(got.Hash, sum[:]) ||
		got.Revoked || !got.CreatedAt.Equal(created.CreatedAt) {
		t.Fatalf("token = %+v, want %+v", got, created)
	}
	_, err := s.CreateToken(ctx, tok)
	wantErr(t, "duplicate token", err, store.ErrExists)
	_, err = s.CreateToken(ctx, store.Token{ID: "other", ProjectID: NewUUID(), Scopes: []string{store.ScopeRead}, Hash: sum[:]})
	wantErr(t, "token of unknown project", err, store.ErrNotFound)
	if err := s.RevokeToken(ctx, tok.ID); err != nil {
		t.Fatal(err)
	}
	if got := must[store.Token](t, "get")(s.GetToken(ctx, tok.ID)); !got.Revoked {
		t.Fatal("token not revoked")
	}
	wantErr(t, "revoke unknown token", s.RevokeToken(ctx, "nope"), store.ErrNotFound)
	_, err = s.GetToken(ctx, "nope")
	wantErr(t, "unknown token", err, store.ErrNotFound)
	admin := must[store.Token](t, "admin")(s.CreateToken(ctx, store.Token{ID: "admin", ProjectID: pid, Scopes: []string{store.ScopeAdmin}, Hash: sum[:]}))
	if got := must[store.Token](t, "get")(s.GetToken(ctx, admin.ID)); !slices.Equal(got.Scopes, []string{store.ScopeAdmin}) {
		t.Fatalf("scopes = %v", got.Scopes)
	}

	// ListTokens: revoked ones included, in id order, paged, without
	// hashes, never another project's.
	otherPID := must[store.Project](t, "project")(s.CreateProject(ctx, NewUUID())).ID
	must[store.Token](t, "other's")(s.CreateToken(ctx, store.Token{ID: "b-other", ProjectID: otherPID, Scopes: []string{store.ScopeRead}, Hash: sum[:]}))
	list := must[[]store.Token](t, "list tokens")(s.ListTokens(ctx, pid, "", 10))
	if len(list) != 2 || list[0].ID != "abcdefghijklmnopqrstuvwxyz" || list[1].ID != "admin" {
		t.Fatalf("tokens = %+v", list)
	}
	for i, want := range []store.Token{must[store.Token](t, "get")(s.GetToken(ctx, list[0].ID)), admin} {
		got := list[i]
		if got.Hash != nil || got.ProjectID != pid || !slices.Equal(got.Scopes, want.Scopes) || got.Revoked != (i == 0) || !got.CreatedAt.Equal(want.CreatedAt) {
			t.Fatalf("tokens[%d] = %+v, want %+v without its hash", i, got, want)
		}
	}
	if page := must[[]store.Token](t, "list tokens")(s.ListTokens(ctx, pid, list[0].ID, 1)); len(page) != 1 || page[0].ID != "admin" {
		t.Fatalf("second page = %+v", page)
	}
}

func testSettings(t *testing.T, s store.Store) {
	_, err := s.Setting(ctx, "operator_token_hash")
	wantErr(t, "unset setting", err, store.ErrNotFound)
	for _, v := range []string{"one", "two"} {
		if err := s.PutSetting(ctx, "operator_token_hash", v); err != nil {
			t.Fatal(err)
		}
		if got := must[string](t, "setting")(s.Setting(ctx, "operator_token_hash")); got != v {
			t.Fatalf("setting = %q, want %q", got, v)
		}
	}
}
