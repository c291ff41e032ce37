package client_test

import (
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/acrelay/acrelay/client"
	"github.com/acrelay/acrelay/correspondence"
)

// TestOthersClaims: against the real relay, the other identity's claims
// overlapping the asked paths come back with the paths they overlap and
// the summary its owner gave them; the asker's own claims, released
// claims and disjoint claims do not.
func TestOthersClaims(t *testing.T) {
	c, project := realRelay(t)
	ctx := t.Context()
	kr := client.Keyring{}
	me := agent(t, c, project, kr)
	other := agent(t, c, project, kr)
	const repo = "repo:example/app"
	open := func(s *client.Session, thread string, paths ...string) *correspondence.Event {
		t.Helper()
		ev, err := s.Sign(client.At{RepositoryID: repo, ThreadID: thread, Scope: correspondence.Scope{Paths: paths}},
			client.ClaimOpen(uuid.NewString(), time.Now().Add(time.Hour)))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Post(ctx, ev); err != nil {
			t.Fatal(err)
		}
		return ev
	}
	parser := open(other, "task:parser", "src/parser")
	say, err := other.Sign(client.At{RepositoryID: repo, ThreadID: "task:parser", Scope: parser.Scope, Parents: []string{parser.ID}},
		client.Intent("rewriting the lexer"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Post(ctx, say); err != nil {
		t.Fatal(err)
	}
	open(other, "task:web", "web")            // disjoint
	open(me, "task:mine", "src/parser/lexer") // mine
	gone := open(other, "task:old", "docs")
	rel, err := other.Sign(client.At{RepositoryID: repo, ThreadID: "task:old"}, client.ClaimRelease(gone, ""))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Post(ctx, rel); err != nil {
		t.Fatal(err)
	}
	whole := open(other, "task:all", ".")

	got, err := c.OthersClaims(ctx, client.OthersClaimsQuery{RepositoryID: repo, Self: me.Signer.Sender.IdentityID,
		Paths: []string{"src/parser/lexer", "docs"}, WithSummaries: true})
	if err != nil {
		t.Fatal(err)
	}
	if got.ProjectionStatus != "complete" || got.Cursor == nil || *got.Cursor != "7" {
		t.Fatalf("status %q cursor %v", got.ProjectionStatus, got.Cursor)
	}
	byEvent := map[string]client.OthersClaim{}
	for _, oc := range got.Claims {
		byEvent[oc.EventID] = oc
	}
	if len(byEvent) != 2 {
		t.Fatalf("want the parser claim and the whole-repository claim, got %+v", got.Claims)
	}
	p := byEvent[parser.ID]
	if p.OwnerIdentityID != other.Signer.Sender.IdentityID || !slices.Equal(p.Overlaps, []string{"src/parser/lexer"}) ||
		p.Summary != "rewriting the lexer" || !slices.Equal(p.Scope.Paths, []string{"src/parser"}) || p.ThreadID != "task:parser" {
		t.Fatalf("parser claim %+v", p)
	}
	w := byEvent[whole.ID]
	if !slices.Equal(w.Overlaps, []string{"src/parser/lexer", "docs"}) || w.Summary != "" {
		t.Fatalf("whole-repository claim %+v", w)
	}

	// Without Self, the asker's own claim is listed too.
	all, err := c.OthersClaims(ctx, client.OthersClaimsQuery{RepositoryID: repo, Paths: []string{"src/parser/lexer"}})
	if err != nil || len(all.Claims) != 3 {
		t.Fatalf("without self: %+v %v", all, err)
	}
	if _, err := c.OthersClaims(ctx, client.OthersClaimsQuery{RepositoryID: repo}); err == nil {
		t.Fatal("no paths: want an error")
	}

	ids, keys, err := c.Identities(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if id := ids[other.Signer.Sender.IdentityID]; id.DisplayName != "sdk test" || id.Status != "active" {
		t.Fatalf("identity %+v", id)
	}
	if k, ok := keys[other.Signer.Sender.SigningKeyID]; !ok || !k.PublicKey.Equal(other.Signer.PublicKey()) || k.Status != "active" {
		t.Fatalf("keyring lacks the other's key")
	}
	if err := keys.Verify(parser); err != nil {
		t.Fatal(err)
	}
}
