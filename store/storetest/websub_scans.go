package storetest

import (
	"crypto/sha256"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/acrelay/acrelay/store"
)

var webSubScanTests = []struct {
	name string
	fn   func(t *testing.T, s store.Store)
}{
	{"websub/scans_counts_tokens", testWebSubScans},
	{"websub/public_project_ids", testPublicProjectIDs},
	{"websub/delete_expired", testDeleteExpiredSubscriptions},
	{"websub/delete_lapsed_verifications", testDeleteLapsedVerifications},
}

func subIDs(subs []store.Subscription) []string {
	ids := make([]string, 0, len(subs))
	for _, s := range subs {
		ids = append(ids, s.ID)
	}
	return ids
}

func sortedIDs(ids ...string) []string {
	ids = slices.Clone(ids)
	slices.Sort(ids)
	return ids
}

func subscribeWith(t *testing.T, s store.Store, pid, callback, tokenID string, lease int64) store.Subscription {
	t.Helper()
	v := subscribeVerification(pid, topicOf(pid), callback, "k", lease)
	v.TokenID = tokenID
	return must[store.Subscription](t, "activate")(s.ActivateSubscription(ctx, v, NewUUID()))
}

// testWebSubScans: the state counts, the revoked-token scan and a token's
// subscriptions see only live subscriptions, in every project.
func testWebSubScans(t *testing.T, s store.Store) {
	a := must[store.Project](t, "project")(s.CreateProject(ctx, NewUUID())).ID
	b := must[store.Project](t, "project")(s.CreateProject(ctx, NewUUID())).ID
	sum := sha256.Sum256([]byte("secret"))
	for _, tok := range []store.Token{{ID: "tok-live", ProjectID: a}, {ID: "tok-revoked", ProjectID: a}, {ID: "tok-b", ProjectID: b}} {
		tok.Scopes, tok.Hash = []string{store.ScopeRead}, sum[:]
		must[store.Token](t, "token")(s.CreateToken(ctx, tok))
	}
	if got := must[map[string]int](t, "counts")(s.CountSubscriptionStates(ctx)); len(got) != 0 {
		t.Fatalf("counts of none = %v", got)
	}
	live := subscribeWith(t, s, a, "https://cb.example/live", "tok-live", 3600)
	revoked := subscribeWith(t, s, a, "https://cb.example/revoked", "tok-revoked", 3600)
	revoked2 := subscribeWith(t, s, a, "https://cb.example/revoked2", "tok-revoked", 3600)
	subscribeWith(t, s, a, "https://cb.example/revoked-ended", "tok-revoked", 0)
	subscribeWith(t, s, a, "https://cb.example/public", "", 3600) // no token: never revoked
	gone := subscribeWith(t, s, b, "https://cb.example/gone", "tok-unknown", 3600)
	failing := subscribeWith(t, s, b, "https://cb.example/failing", "tok-b", 3600)
	if err := s.SetSubscriptionState(ctx, b, failing.ID, store.SubscriptionFailing); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{store.SubscriptionActive: 5, store.SubscriptionFailing: 1}
	if got := must[map[string]int](t, "counts")(s.CountSubscriptionStates(ctx)); !maps.Equal(got, want) {
		t.Fatalf("counts = %v, want %v", got, want)
	}
	if got := subIDs(must[[]store.Subscription](t, "revoked")(s.RevokedSubscriptions(ctx, 10))); len(got) != 1 || got[0] != gone.ID {
		t.Fatalf("revoked before any revocation = %v, want only the unknown token's %s", got, gone.ID)
	}
	if err := s.RevokeToken(ctx, "tok-revoked"); err != nil {
		t.Fatal(err)
	}
	// Sorted by project id, then id.
	var wantRevoked []string
	if a < b {
		wantRevoked = append(sortedIDs(revoked.ID, revoked2.ID), gone.ID)
	} else {
		wantRevoked = append([]string{gone.ID}, sortedIDs(revoked.ID, revoked2.ID)...)
	}
	if got := subIDs(must[[]store.Subscription](t, "revoked")(s.RevokedSubscriptions(ctx, 10))); !slices.Equal(got, wantRevoked) {
		t.Fatalf("revoked = %v, want %v", got, wantRevoked)
	}
	if got := subIDs(must[[]store.Subscription](t, "revoked")(s.RevokedSubscriptions(ctx, 2))); !slices.Equal(got, wantRevoked[:2]) {
		t.Fatalf("revoked limit 2 = %v, want %v", got, wantRevoked[:2])
	}
	if got := subIDs(must[[]store.Subscription](t, "token subs")(s.TokenSubscriptions(ctx, a, "tok-revoked"))); !slices.Equal(got, sortedIDs(revoked.ID, revoked2.ID)) {
		t.Fatalf("token subscriptions = %v, want %v", got, sortedIDs(revoked.ID, revoked2.ID))
	}
	if got := subIDs(must[[]store.Subscription](t, "token subs")(s.TokenSubscriptions(ctx, b, "tok-revoked"))); len(got) != 0 {
		t.Fatalf("token subscriptions in another project = %v, want none", got)
	}
	if got := subIDs(must[[]store.Subscription](t, "token subs")(s.TokenSubscriptions(ctx, a, "tok-live"))); !slices.Equal(got, []string{live.ID}) {
		t.Fatalf("live token subscriptions = %v, want [%s]", got, live.ID)
	}
}

func testPublicProjectIDs(t *testing.T, s store.Store) {
	var public []string
	for i := range 5 {
		pid := must[store.Project](t, "project")(s.CreateProject(ctx, NewUUID())).ID
		if i%2 == 0 {
			if err := s.SetProjectVisibility(ctx, pid, store.VisibilityPublic); err != nil {
				t.Fatal(err)
			}
			public = append(public, pid)
		}
	}
	slices.Sort(public)
	if got := must[[]string](t, "public")(s.PublicProjectIDs(ctx, "", 10)); !slices.Equal(got, public) {
		t.Fatalf("public = %v, want %v", got, public)
	}
	if got := must[[]string](t, "public page")(s.PublicProjectIDs(ctx, public[0], 1)); !slices.Equal(got, public[1:2]) {
		t.Fatalf("page after %s = %v, want %v", public[0], got, public[1:2])
	}
}

// testDeleteExpiredSubscriptions: ended leases go in batches with their
// cursors; live ones and their cursors stay.
func testDeleteExpiredSubscriptions(t *testing.T, s store.Store) {
	a := must[store.Project](t, "project")(s.CreateProject(ctx, NewUUID())).ID
	b := must[store.Project](t, "project")(s.CreateProject(ctx, NewUUID())).ID
	live := subscribeWith(t, s, a, "https://cb.example/live", "", 3600)
	var ended []store.Subscription
	for i, pid := range []string{a, b, b} {
		ended = append(ended, subscribeWith(t, s, pid, "https://cb.example/ended"+string(rune('0'+i)), "", 0))
	}
	for _, sub := range append([]store.Subscription{live}, ended...) {
		if !hasTarget(t, s, sub.ProjectID, sub.ID) {
			t.Fatalf("no cursor for %s before", sub.ID)
		}
	}
	if n := must[int](t, "none before")(s.DeleteExpiredSubscriptions(ctx, time.Now().Add(-time.Hour), 10)); n != 0 {
		t.Fatalf("deleted %d ended before an hour ago, want 0", n)
	}
	before := time.Now().Add(time.Second)
	for i, want := range []int{2, 1, 0} {
		if n := must[int](t, "batch")(s.DeleteExpiredSubscriptions(ctx, before, 2)); n != want {
			t.Fatalf("batch %d deleted %d, want %d", i, n, want)
		}
	}
	for _, sub := range ended {
		if _, err := s.Subscription(ctx, sub.ProjectID, sub.ID); err == nil {
			t.Fatalf("ended %s still there", sub.ID)
		}
		if hasTarget(t, s, sub.ProjectID, sub.ID) {
			t.Fatalf("cursor of ended %s still there", sub.ID)
		}
	}
	if _, err := s.Subscription(ctx, a, live.ID); err != nil {
		t.Fatalf("live subscription: %v", err)
	}
	if !hasTarget(t, s, a, live.ID) {
		t.Fatal("live subscription's cursor deleted")
	}
}

func testDeleteLapsedVerifications(t *testing.T, s store.Store) {
	pid := must[store.Project](t, "project")(s.CreateProject(ctx, NewUUID())).ID
	for _, cb := range []string{"https://cb.example/a", "https://cb.example/b", "https://cb.example/c"} {
		if err := s.AddVerification(ctx, subscribeVerification(pid, topicOf(pid), cb, "k", 60)); err != nil {
			t.Fatal(err)
		}
	}
	if n := must[int](t, "none lapsed")(s.DeleteLapsedVerifications(ctx, time.Now().Add(-time.Hour), 10)); n != 0 {
		t.Fatalf("deleted %d created before an hour ago, want 0", n)
	}
	before := time.Now().Add(time.Second)
	for i, want := range []int{2, 1, 0} {
		if n := must[int](t, "batch")(s.DeleteLapsedVerifications(ctx, before, 2)); n != want {
			t.Fatalf("batch %d deleted %d, want %d", i, n, want)
		}
	}
	if ids := pendingIDs(t, s, 10); len(ids) != 0 {
		t.Fatalf("pending after = %v", ids)
	}
}
