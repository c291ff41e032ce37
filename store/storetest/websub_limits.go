package storetest

import (
	"strings"
	"testing"
	"time"

	"github.com/acrelay/acrelay/store"
)

// limitsTests cover store.WebSubLimits, which every store implements.
var limitsTests = []struct {
	name string
	fn   func(*testing.T, store.Store)
}{
	{"websub/counts", testWebSubCounts},
}

func testWebSubCounts(t *testing.T, s store.Store) {
	l, ok := s.(store.WebSubLimits)
	if !ok {
		t.Fatalf("%T does not implement store.WebSubLimits", s)
	}
	p1 := must[store.Project](t, "project")(s.CreateProject(ctx, NewUUID())).ID
	p2 := must[store.Project](t, "project")(s.CreateProject(ctx, NewUUID())).ID
	// A host of this test alone: the host counts span every project of the
	// store.
	host := strings.ToLower(NewUUID()[:8]) + ".cb.example:8443"
	cb := func(path string) string { return "https://" + strings.ToUpper(host) + path }
	topic2 := topicOf(p1) + "&thread_id=t"
	count := func(pid, topic, callback string) store.WebSubCounts {
		t.Helper()
		return must[store.WebSubCounts](t, "count")(l.CountWebSub(ctx, pid, topic, callback))
	}
	if got, want := count(p1, topicOf(p1), cb("/a")), (store.WebSubCounts{}); got != want {
		t.Fatalf("empty: %+v, want %+v", got, want)
	}
	activate := func(pid, topic, callback string, lease int64) {
		t.Helper()
		v := subscribeVerification(pid, topic, callback, "k", lease)
		must[store.Subscription](t, "activate")(s.ActivateSubscription(ctx, v, NewUUID()))
	}
	activate(p1, topicOf(p1), cb("/a"), 3600)
	activate(p1, topicOf(p1), cb("/b?x=1"), 3600)
	activate(p1, topic2, cb("/a"), 3600)
	activate(p2, topicOf(p2), cb("?only-query"), 3600)
	activate(p1, topicOf(p1), "https://other-"+host+"/a", 3600) // another host
	activate(p1, topicOf(p1), cb("/expiring"), 1)
	// Pending: a subscribe counts as a subscription; an unsubscribe only
	// as a pending verification of its host.
	if err := s.AddVerification(ctx, subscribeVerification(p1, topicOf(p1), cb("/c"), "k", 60)); err != nil {
		t.Fatal(err)
	}
	un := subscribeVerification(p2, topicOf(p2), cb("?only-query"), "", 0)
	un.Mode, un.TokenID = "unsubscribe", ""
	if err := s.AddVerification(ctx, un); err != nil {
		t.Fatal(err)
	}
	want := store.WebSubCounts{Subscribed: true, Topic: 5, Project: 6, Host: 6, HostPending: 2}
	if got := count(p1, topicOf(p1), cb("/a")); got != want {
		t.Fatalf("counts = %+v, want %+v", got, want)
	}
	time.Sleep(1100 * time.Millisecond) // the 1 s lease ends
	want = store.WebSubCounts{Subscribed: false, Topic: 4, Project: 5, Host: 5, HostPending: 2}
	if got := count(p1, topicOf(p1), cb("/expiring")); got != want {
		t.Fatalf("after a lease ended: %+v, want %+v", got, want)
	}
	want = store.WebSubCounts{Subscribed: false, Topic: 1, Project: 1, Host: 5, HostPending: 2}
	if got := count(p2, topicOf(p2), "http://"+host+"/new"); got != want {
		t.Fatalf("other project, same host over http: %+v, want %+v", got, want)
	}
}
