package hub_test

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	"github.com/acrelay/acrelay/hub"
	"github.com/acrelay/acrelay/wire"
)

// refusals records Options.OnRefused.
type refusals struct {
	mu    sync.Mutex
	names []string
}

func (r *refusals) note(name string) { r.mu.Lock(); r.names = append(r.names, name); r.mu.Unlock() }
func (r *refusals) got() []string    { r.mu.Lock(); defer r.mu.Unlock(); return slices.Clone(r.names) }

func (e *env) repoTopic(pid, repo string) string {
	return hub.Topic{ProjectID: pid, RepositoryID: repo, Format: hub.FormatAtom}.URL(pub)
}

func (e *env) subscribeTo(topic, cb string) *httptest.ResponseRecorder {
	return e.post(form("hub.mode", "subscribe", "hub.topic", topic, "hub.callback", cb), "")
}

// wantCap checks a cap's refusal: exactly 409, the code, the JSON type,
// and Retry-After only for the pending-verifications cap.
func wantCap(t *testing.T, w *httptest.ResponseRecorder, code, retryAfter string) {
	t.Helper()
	wantStatus(t, w, http.StatusConflict, code)
	if got := w.Header().Get("Retry-After"); got != retryAfter {
		t.Fatalf("Retry-After %q, want %q", got, retryAfter)
	}
}

// TestSubscriptionCaps: each subscription cap refuses the request that
// would pass it, counting pending subscribes (no Run: nothing is
// verified yet), and names its limit to OnRefused; a renewal of a live
// subscription passes every cap.
func TestSubscriptionCaps(t *testing.T) {
	var refused refusals
	e := newEnv(t, hub.Options{OnRefused: refused.note,
		Limits: hub.Limits{SubscriptionsPerTopic: 2, SubscriptionsPerHost: 3, SubscriptionsPerProject: 4, PendingPerHost: -1}})
	a, b := newCallback(t), newCallback(t) // two ports of 127.0.0.1: two callback hosts
	p := e.publicPID
	t1, t2, t3, t4 := e.repoTopic(p, "repo-1"), e.repoTopic(p, "repo-2"), e.repoTopic(p, "repo-3"), e.repoTopic(p, "repo-4")

	wantStatus(t, e.subscribeTo(t1, a.url("/1")), http.StatusAccepted, "")
	wantStatus(t, e.subscribeTo(t1, a.url("/2")), http.StatusAccepted, "")
	wantCap(t, e.subscribeTo(t1, b.url("/3")), wire.CodeHubTopicSubscriptionsLimit, "")
	wantStatus(t, e.subscribeTo(t2, a.url("/4")), http.StatusAccepted, "")
	wantCap(t, e.subscribeTo(t2, a.url("/5")), wire.CodeHubHostSubscriptionsLimit, "")
	wantStatus(t, e.subscribeTo(t3, b.url("/6")), http.StatusAccepted, "")
	wantCap(t, e.subscribeTo(t4, b.url("/7")), wire.CodeHubProjectSubscriptionsLimit, "")
	if got, want := len(e.pending()), 4; got != want {
		t.Fatalf("pending %d, want %d (refusals store nothing)", got, want)
	}
	want := []string{hub.LimitTopicSubscriptions, hub.LimitHostSubscriptions, hub.LimitProjectSubscriptions}
	if got := refused.got(); !slices.Equal(got, want) {
		t.Fatalf("OnRefused %v, want %v", got, want)
	}

	// Verified, the four stay at every cap; renewing one is accepted, a
	// new one still refused.
	e.run(e.h)
	eventually(t, "four subscriptions", func() bool { return len(e.subscriptions(p)) == 4 && len(e.pending()) == 0 })
	wantStatus(t, e.subscribeTo(t1, a.url("/1")), http.StatusAccepted, "")
	wantCap(t, e.subscribeTo(t1, a.url("/8")), wire.CodeHubTopicSubscriptionsLimit, "")
	// An unsubscribe is no new subscription.
	wantStatus(t, e.post(form("hub.mode", "unsubscribe", "hub.topic", t1, "hub.callback", a.url("/2")), ""), http.StatusAccepted, "")
}

// TestPendingVerificationsCap: a callback host with PendingPerHost
// verifications waiting gets 409 hub_host_verifications_limit with
// Retry-After (the verification request timeout, in seconds) for the next
// request; another host is unaffected.
func TestPendingVerificationsCap(t *testing.T) {
	var refused refusals
	e := newEnv(t, hub.Options{OnRefused: refused.note, RequestTimeout: 7e9, Limits: hub.Limits{PendingPerHost: 2}})
	a, b := newCallback(t), newCallback(t)
	t1 := e.repoTopic(e.publicPID, "repo-1")
	wantStatus(t, e.subscribeTo(t1, a.url("/1")), http.StatusAccepted, "")
	wantStatus(t, e.subscribeTo(t1, a.url("/2")), http.StatusAccepted, "")
	w := e.subscribeTo(t1, a.url("/3"))
	wantCap(t, w, wire.CodeHubHostVerificationsLimit, "7")
	wantStatus(t, e.subscribeTo(t1, b.url("/1")), http.StatusAccepted, "")
	if got, want := refused.got(), []string{hub.LimitHostVerifications}; !slices.Equal(got, want) {
		t.Fatalf("OnRefused %v, want %v", got, want)
	}
	// Once verified, the host may queue again.
	e.run(e.h)
	eventually(t, "verifications done", func() bool { return len(e.pending()) == 0 })
	wantStatus(t, e.subscribeTo(t1, a.url("/3")), http.StatusAccepted, "")
}
