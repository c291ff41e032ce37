package websub_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acrelay/acrelay/couriers"
	"github.com/acrelay/acrelay/couriers/websub"
	"github.com/acrelay/acrelay/hub"
	"github.com/acrelay/acrelay/internal/ssrf"
	"github.com/acrelay/acrelay/internal/teststore"
	"github.com/acrelay/acrelay/store"
)

// pingHub is an external hub that, like flask-websub's, answers 400 to a
// publish request without hub.topic, and refuses (400) the topics refuse
// says, or everything with status.
type pingHub struct {
	srv    *httptest.Server
	mu     sync.Mutex
	taken  []string // topics answered 204, in order
	asked  int      // every request
	status int      // when not 0: the answer to every request
	refuse func(topic string) bool
}

func newPingHub(t *testing.T, status int, refuse func(string) bool) *pingHub {
	h := &pingHub{status: status, refuse: refuse}
	h.srv = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.asked++
		if h.status != 0 {
			rw.WriteHeader(h.status)
			return
		}
		err := r.ParseForm()
		topic := r.PostForm.Get("hub.topic")
		if err != nil || r.PostForm.Get("hub.mode") != "publish" || topic == "" || r.PostForm.Get("hub.url") != topic ||
			len(r.PostForm) != 3 || r.Header.Get("Content-Type") != "application/x-www-form-urlencoded" || h.refuse(topic) {
			rw.WriteHeader(http.StatusBadRequest)
			return
		}
		h.taken = append(h.taken, topic)
		rw.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *pingHub) snapshot() (taken []string, asked int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.taken), h.asked
}

// TestPublishPingsEveryTopicPastRefusals: each publish ping carries
// hub.mode=publish with both hub.topic and hub.url; every topic that moved
// is announced — each repository's and thread's Atom and JSON topics and
// the project-wide JSON topic — even though the hub refuses one
// repository's topics for good (not retried, the others still pinged);
// and a hub that fails every ping (503) is given up after Backoff.GiveUp
// instead of retrying one batch forever.
func TestPublishPingsEveryTopicPastRefusals(t *testing.T) {
	teststore.Engines(t, func(t *testing.T, open teststore.Open) {
		w := newWorld(t, open)
		picky := newPingHub(t, 0, func(topic string) bool { return strings.Contains(topic, "repository_id=repo-a") })
		down := newPingHub(t, http.StatusServiceUnavailable, nil)
		guard, _ := ssrf.NewGuard(ssrf.GuardOptions{AllowHosts: []string{"127.0.0.1"}})
		logger := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
		pub := &websub.Publisher{Hubs: []string{picky.srv.URL + "/hub", down.srv.URL + "/hub"}, Store: w.st,
			Client: guard.HTTPClient(), PublicURL: w.public, Logger: logger}
		r := couriers.NewRunner(w.st, pub, couriers.Options{Holder: "relay-1", LeaseTTL: 3 * time.Second, Logger: logger,
			Backoff: couriers.Backoff{Initial: 20 * time.Millisecond, Max: 50 * time.Millisecond, GiveUp: 300 * time.Millisecond}})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { _ = r.Run(ctx); close(done) }()
		t.Cleanup(func() { cancel(); <-done })
		if err := w.st.SetProjectVisibility(ctx, w.pid, store.VisibilityPublic); err != nil {
			t.Fatal(err)
		}
		r.Refresh(w.pid)

		for _, repo := range []string{"repo-a", "repo-b", "repo-a", "repo-c"} {
			w.post(repo)
		}
		cursor := func(hubURL string) int64 {
			states, _ := w.st.TargetStates(ctx, websub.PublishName, w.pid)
			for _, s := range states {
				if s.Target == hubURL+"/hub" {
					return s.ReceivedSeq
				}
			}
			return 0
		}
		waitFor(t, "every record past the refusing hub", func() bool { return cursor(picky.srv.URL) == 4 })
		waitFor(t, "the failing hub given up", func() bool { return cursor(down.srv.URL) == 4 })

		topic := func(repo, thread, format string) string {
			return hub.Topic{ProjectID: w.pid, RepositoryID: repo, ThreadID: thread, Format: format}.URL(w.public)
		}
		want := map[string]bool{
			topic("repo-b", "", hub.FormatAtom): true, topic("repo-b", "", hub.FormatJSON): true,
			topic("repo-b", "thread-1", hub.FormatAtom): true, topic("repo-b", "thread-1", hub.FormatJSON): true,
			topic("repo-c", "", hub.FormatAtom): true, topic("repo-c", "", hub.FormatJSON): true,
			topic("repo-c", "thread-1", hub.FormatAtom): true, topic("repo-c", "thread-1", hub.FormatJSON): true,
			hub.Topic{ProjectID: w.pid, Format: hub.FormatJSON}.URL(w.public): true,
		}
		taken, asked := picky.snapshot()
		got := map[string]bool{}
		for _, p := range taken {
			if !want[p] {
				t.Fatalf("ping for %s (pings %v)", p, taken)
			}
			got[p] = true
		}
		if len(got) != len(want) {
			t.Fatalf("topics announced %v, want %v", taken, want)
		}
		// repo-a's 4 topics are refused once per batch that holds repo-a,
		// never retried: one or two batches hold repo-a.
		if refused := asked - len(taken); refused < 4 || refused > 2*4 {
			t.Fatalf("%d refused pings for repo-a's 4 topics", refused)
		}
		if _, asked := down.snapshot(); asked < 2 {
			t.Fatalf("the failing hub was asked %d times: no retry before giving up", asked)
		}
	})
}
