package hub_test

import (
	"context"
	"maps"
	"net/http"
	"sync"
	"testing"

	"github.com/acrelay/acrelay/hub"
	"github.com/acrelay/acrelay/store"
)

// readCounter counts the hub's store reads by method (issue 26 item 4:
// a timer-driven scan is one query, not one per project, token or row).
type readCounter struct {
	store.Store
	mu    sync.Mutex
	calls map[string]int
}

func (c *readCounter) count(m string) {
	c.mu.Lock()
	c.calls[m]++
	c.mu.Unlock()
}

func (c *readCounter) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	got := c.calls
	c.calls = map[string]int{}
	return got
}

func (c *readCounter) GetToken(ctx context.Context, id string) (store.Token, error) {
	c.count("GetToken")
	return c.Store.GetToken(ctx, id)
}

func (c *readCounter) Subscription(ctx context.Context, pid, id string) (store.Subscription, error) {
	c.count("Subscription")
	return c.Store.Subscription(ctx, pid, id)
}

func (c *readCounter) Subscriptions(ctx context.Context, pid string) ([]store.Subscription, error) {
	c.count("Subscriptions")
	return c.Store.Subscriptions(ctx, pid)
}

func (c *readCounter) SubscribedProjects(ctx context.Context) ([]string, error) {
	c.count("SubscribedProjects")
	return c.Store.SubscribedProjects(ctx)
}

func (c *readCounter) RevokedSubscriptions(ctx context.Context, limit int) ([]store.Subscription, error) {
	c.count("RevokedSubscriptions")
	return c.Store.RevokedSubscriptions(ctx, limit)
}

func (c *readCounter) TokenSubscriptions(ctx context.Context, pid, tokenID string) ([]store.Subscription, error) {
	c.count("TokenSubscriptions")
	return c.Store.TokenSubscriptions(ctx, pid, tokenID)
}

func (c *readCounter) CountWebSub(ctx context.Context, pid, topic, callback string) (store.WebSubCounts, error) {
	c.count("CountWebSub")
	return c.Store.CountWebSub(ctx, pid, topic, callback)
}

// TestScansAreOneQuery: the periodic revoked-token check over 40 projects
// with a token each is one read plus the re-read of the one subscription it
// denies (it was 1 + 40 + 40); the revoke hook reads the token's
// subscriptions, not the project's whole list; an unsubscribe checks its one
// (topic, callback) without listing the project.
func TestScansAreOneQuery(t *testing.T) {
	e := newEnv(t, hub.Options{})
	rc := &readCounter{Store: e.st, calls: map[string]int{}}
	h := e.newHubOn(rc, hub.Options{})
	cb := newCallback(t)
	var revoked store.Subscription
	for i := range 40 {
		pid := e.project()
		tok := e.token(pid, store.ScopeRead)
		v := store.Verification{ID: "v" + pid, ProjectID: pid, Mode: hub.ModeSubscribe, Topic: e.topic(pid), RepositoryID: "repo-a",
			Format: hub.FormatAtom, Callback: cb.url("/cb"), Secret: []byte("k"), TokenID: tok, LeaseSeconds: 3600}
		sub, err := e.st.ActivateSubscription(bg, v, "sub-"+pid)
		if err != nil {
			t.Fatal(err)
		}
		if i == 7 {
			revoked = sub
		}
	}
	if err := h.DenyRevokedAll(bg); err != nil {
		t.Fatal(err)
	}
	if got, want := rc.take(), map[string]int{"RevokedSubscriptions": 1}; !maps.Equal(got, want) {
		t.Fatalf("reads of a check that denies nothing = %v, want %v", got, want)
	}
	if err := e.st.RevokeToken(bg, revoked.TokenID); err != nil {
		t.Fatal(err)
	}
	if err := h.DenyRevokedAll(bg); err != nil {
		t.Fatal(err)
	}
	if got, want := rc.take(), map[string]int{"RevokedSubscriptions": 1, "Subscription": 1}; !maps.Equal(got, want) {
		t.Fatalf("reads of a check that denies one = %v, want %v", got, want)
	}
	if _, err := e.st.Subscription(bg, revoked.ProjectID, revoked.ID); err == nil {
		t.Fatal("the revoked token's subscription is still there")
	}
	if ps, err := e.st.SubscribedProjects(bg); err != nil || len(ps) != 39 {
		t.Fatalf("subscribed projects after the denial: %d (%v), want the other 39", len(ps), err)
	}

	// The revoke hook: the token, its subscriptions, the re-read of each.
	tok := e.token(e.pid, store.ScopeRead)
	for _, c := range []string{"/a", "/b"} {
		v := store.Verification{ID: "v" + c, ProjectID: e.pid, Mode: hub.ModeSubscribe, Topic: e.topic(e.pid), RepositoryID: "repo-a",
			Format: hub.FormatAtom, Callback: cb.url(c), Secret: []byte("k"), TokenID: tok, LeaseSeconds: 3600}
		if _, err := e.st.ActivateSubscription(bg, v, "sub"+c); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.st.RevokeToken(bg, tok); err != nil {
		t.Fatal(err)
	}
	rc.take()
	if err := h.DenyRevoked(bg, tok); err != nil {
		t.Fatal(err)
	}
	if got, want := rc.take(), map[string]int{"GetToken": 1, "TokenSubscriptions": 1, "Subscription": 2}; !maps.Equal(got, want) {
		t.Fatalf("reads of DenyRevoked = %v, want %v", got, want)
	}
	if n := len(e.subscriptions(e.pid)); n != 0 {
		t.Fatalf("%d subscriptions of the revoked token left", n)
	}

	// An unsubscribe of an unknown (topic, callback): one lookup, 202.
	w := e.postTo(h, form("hub.mode", "unsubscribe", "hub.topic", e.topic(e.pid), "hub.callback", cb.url("/a")), "", "application/x-www-form-urlencoded")
	wantStatus(t, w, http.StatusAccepted, "")
	if got, want := rc.take(), map[string]int{"CountWebSub": 1}; !maps.Equal(got, want) {
		t.Fatalf("reads of an unsubscribe = %v, want %v", got, want)
	}
}
