package websub_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acrelay/acrelay/client"
	"github.com/acrelay/acrelay/couriers"
	"github.com/acrelay/acrelay/couriers/websub"
	"github.com/acrelay/acrelay/hub"
	"github.com/acrelay/acrelay/internal/ssrf"
	"github.com/acrelay/acrelay/internal/teststore"
	"github.com/acrelay/acrelay/registry"
	"github.com/acrelay/acrelay/relay"
	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/storetest"
	"github.com/acrelay/acrelay/wire"
)

// world is a relay with its embedded hub and WebSub courier running over a
// real store, on a loopback listener, wired as cmd/acrelay wires them.
type world struct {
	t      *testing.T
	st     store.Store
	public string
	runner *couriers.Runner
	hub    *hub.Hub
	pid    string
	token  string // read+append
	signer *storetest.Signer
	keys   client.Keyring
}

func newWorld(t *testing.T, open teststore.Open) *world {
	t.Helper()
	return newWorldWith(t, open, nil)
}

// newWorldWith is newWorld with tune, when not nil, adjusting the
// runner's options and the courier before they start.
func newWorldWith(t *testing.T, open teststore.Open, tune func(*couriers.Options, *websub.Courier)) *world {
	t.Helper()
	st := open(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	w := &world{t: t, st: st, public: "http://" + ln.Addr().String()}
	guard, err := ssrf.NewGuard(ssrf.GuardOptions{AllowHosts: []string{"127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	var srv *relay.Server
	// Logs go to the test's log: shown only when it fails.
	logger := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	w.hub = hub.New(st, hub.Options{PublicURL: w.public, Guard: guard, Poll: 50 * time.Millisecond, RevokedCheck: -1, Logger: logger,
		Authorize: func(r *http.Request, projectID string) (string, bool, error) { return srv.AuthorizeTopic(r, projectID) },
		Refresh:   func(projectID string) { w.runner.Refresh(projectID) }})
	courier := &websub.Courier{Store: st, Client: guard.HTTPClient(), PublicURL: w.public, Denier: w.hub, Logger: logger}
	opt := couriers.Options{Holder: "relay-1", Logger: logger, LeaseTTL: 3 * time.Second, DeliveryTimeout: 2 * time.Second,
		Backoff: couriers.Backoff{Initial: 20 * time.Millisecond, Max: 100 * time.Millisecond}}
	if tune != nil {
		tune(&opt, courier)
	}
	w.runner = couriers.NewRunner(st, courier, opt)
	srv = relay.New(st, relay.Config{PublicURL: w.public, Hub: w.hub, TokenRevoked: w.hub.DenyRevoked, Logger: logger})
	hs := &httptest.Server{Listener: ln, Config: &http.Server{Handler: srv.Handler()}}
	hs.Start()
	t.Cleanup(hs.Close)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = w.hub.Run(ctx) })
	wg.Go(func() { _ = w.runner.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })

	p, err := registry.CreateProject(ctx, st, "")
	if err != nil {
		t.Fatal(err)
	}
	w.pid = p.ID
	w.signer = storetest.NewSigner(t, p.ID).Register(t, st)
	_, w.token, err = registry.CreateToken(ctx, st, p.ID, []string{store.ScopeRead, store.ScopeAppend})
	if err != nil {
		t.Fatal(err)
	}
	w.keys = client.Keyring{w.signer.KeyID: {IdentityID: w.signer.IdentityID, PublicKey: w.signer.Pub}}
	return w
}

func (w *world) topic(repo, format string) string {
	return hub.Topic{ProjectID: w.pid, RepositoryID: repo, Format: format}.URL(w.public)
}

// post appends one signed event over HTTP and returns its id.
func (w *world) post(repo string) string {
	w.t.Helper()
	ev, canonical := w.signer.Event(w.t, storetest.Spec{RepositoryID: repo})
	req, _ := http.NewRequest("POST", w.public+"/v1/correspondence/events", bytes.NewReader(canonical))
	req.Header.Set("Authorization", "Bearer "+w.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		b, _ := io.ReadAll(resp.Body)
		w.t.Fatalf("POST: %d %s", resp.StatusCode, b)
	}
	return ev.ID
}

// follower is a client.WebSubSubscriber on its own loopback callback.
type follower struct {
	sub *client.WebSubSubscriber
	mu  sync.Mutex
	got map[string][]string // topic → event ids, in arrival order
}

func (w *world) follower(token string) *follower {
	f := &follower{got: map[string][]string{}}
	cb := httptest.NewServer(nil)
	w.t.Cleanup(cb.Close)
	f.sub = &client.WebSubSubscriber{Hub: w.public + hub.HubPath, Callback: cb.URL + "/cb", Token: token, Keys: w.keys,
		OnRecord: func(topic string, rec client.Record) {
			if !rec.Verified {
				w.t.Errorf("unverified record %s", rec.Event.ID)
			}
			f.mu.Lock()
			f.got[topic] = append(f.got[topic], rec.Event.ID)
			f.mu.Unlock()
		}}
	cb.Config.Handler = f.sub
	return f
}

func (f *follower) ids(topic string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.got[topic]...)
}

func (f *follower) subscribe(t *testing.T, topic string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := f.sub.Subscribe(ctx, topic, time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := f.sub.Wait(ctx, topic); err != nil {
		t.Fatalf("verification of intent: %v", err)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestSubscribeAndReceive: a subscriber of a private topic (Atom) and of
// its JSON twin receives, signed and verified, exactly the records of its
// repository appended after its verification, in receipt order.
func TestSubscribeAndReceive(t *testing.T) {
	teststore.Engines(t, func(t *testing.T, open teststore.Open) {
		w := newWorld(t, open)
		before := w.post("repo-a") // before the subscription: history comes from the feed
		f := w.follower(w.token)
		atomTopic, jsonTopic := w.topic("repo-a", hub.FormatAtom), w.topic("repo-a", hub.FormatJSON)
		f.subscribe(t, atomTopic)
		f.subscribe(t, jsonTopic)
		// The hub stores a subscription after the callback answered its
		// verification, so Wait can return a moment before; a record
		// appended in between is (rightly) not this subscription's.
		waitFor(t, "both subscriptions stored", func() bool {
			subs, _ := w.st.Subscriptions(context.Background(), w.pid)
			return len(subs) == 2
		})
		var want []string
		for i := range 6 {
			want = append(want, w.post("repo-a"))
			if i%2 == 0 {
				w.post("repo-b") // another repository: not this topic's
			}
		}
		for _, topic := range []string{atomTopic, jsonTopic} {
			// The project advanced before it had a subscription; the hub's
			// Refresh must still start deliveries at once (not at the
			// runner's next periodic listing, 30 s away).
			waitFor(t, "six records on "+topic, func() bool { return len(f.ids(topic)) >= 6 })
			if got := f.ids(topic); strings.Join(got, ",") != strings.Join(want, ",") {
				t.Fatalf("%s received %v\nwant %v (not %s, appended before)", topic, got, want, before)
			}
		}
		if s := f.sub.Stats(); s.BadSignature != 0 || s.Refused != 0 || s.Malformed != 0 || s.UnknownTopic != 0 {
			t.Fatalf("subscriber dropped deliveries: %+v", s)
		}
	})
}

// callback is a WebSub callback under the test's control: it answers
// verification of intent, and each delivery with the next status of
// script (200 once the script is used up), recording what arrived.
type callback struct {
	srv    *httptest.Server
	mu     sync.Mutex
	script []int
	hang   chan struct{} // closed to release hanging deliveries; nil: no hang
	posts  []delivery
	denied []string
}

type delivery struct {
	body        []byte
	contentType string
	signature   string
	link        string
}

func newCallback(t *testing.T, script ...int) *callback {
	c := &callback{script: script}
	c.srv = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if r.Method == http.MethodGet {
			if q.Get("hub.mode") == hub.ModeDenied {
				c.mu.Lock()
				c.denied = append(c.denied, q.Get("hub.reason"))
				c.mu.Unlock()
			}
			_, _ = io.WriteString(rw, q.Get("hub.challenge"))
			return
		}
		b, _ := io.ReadAll(r.Body)
		c.mu.Lock()
		c.posts = append(c.posts, delivery{body: b, contentType: r.Header.Get("Content-Type"), signature: r.Header.Get("X-Hub-Signature"), link: r.Header.Get("Link")})
		status := http.StatusOK
		if len(c.script) > 0 {
			status, c.script = c.script[0], c.script[1:]
		}
		hang := c.hang
		c.mu.Unlock()
		if hang != nil {
			select {
			case <-hang:
			case <-r.Context().Done():
			}
		}
		rw.WriteHeader(status)
		_, _ = io.WriteString(rw, "callback body the hub must never echo")
	}))
	t.Cleanup(c.srv.Close)
	return c
}

func (c *callback) deliveries() []delivery {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]delivery(nil), c.posts...)
}

// subscribe sends a subscription request with curl's form and waits until
// it is active.
func (w *world) subscribe(cb *callback, topic, secret string) {
	w.t.Helper()
	form := "hub.mode=subscribe&hub.callback=" + cb.srv.URL + "/cb&hub.topic=" + urlEscape(topic) + "&hub.secret=" + secret
	req, _ := http.NewRequest("POST", w.public+hub.HubPath, strings.NewReader(form))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer "+w.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		w.t.Fatalf("subscribe: %d", resp.StatusCode)
	}
	waitFor(w.t, "the subscription", func() bool {
		subs, _ := w.st.Subscriptions(context.Background(), w.pid)
		for _, s := range subs {
			if s.Callback == cb.srv.URL+"/cb" && s.Topic == topic {
				return true
			}
		}
		return false
	})
}

func urlEscape(s string) string {
	r := strings.NewReplacer("%", "%25", "&", "%26", "=", "%3D", "?", "%3F", "+", "%2B")
	return r.Replace(s)
}

// TestRetryIsTheSameBytes: a delivery that failed is retried with the
// same bytes and the same signature, even though records arrived
// meanwhile; the signature is the HMAC of exactly those bytes, and the
// delivery carries the topic's Content-Type and discovery links.
func TestRetryIsTheSameBytes(t *testing.T) {
	teststore.Engines(t, func(t *testing.T, open teststore.Open) {
		w := newWorld(t, open)
		cb := newCallback(t, http.StatusInternalServerError, http.StatusServiceUnavailable)
		topic := w.topic("repo-a", hub.FormatAtom)
		w.subscribe(cb, topic, "s3cret")
		first := w.post("repo-a")
		waitFor(t, "the first attempt", func() bool { return len(cb.deliveries()) >= 1 })
		second := w.post("repo-a")
		waitFor(t, "three attempts and a fourth delivery", func() bool { return len(cb.deliveries()) >= 4 })
		d := cb.deliveries()
		for i := 1; i < 3; i++ {
			if !bytes.Equal(d[i].body, d[0].body) || d[i].signature != d[0].signature {
				t.Fatalf("attempt %d differs from the first", i+1)
			}
		}
		if !bytes.Contains(d[0].body, []byte(first)) || bytes.Contains(d[0].body, []byte(second)) {
			t.Fatal("the failed batch is not exactly the first record")
		}
		if !bytes.Contains(d[3].body, []byte(second)) || bytes.Contains(d[3].body, []byte(first)) {
			t.Fatal("the next delivery does not carry only the new record")
		}
		if d[0].signature != websub.Signature([]byte("s3cret"), d[0].body) || !strings.HasPrefix(d[0].signature, "sha256=") {
			t.Fatalf("signature %q is not the HMAC of the body", d[0].signature)
		}
		if d[0].contentType != wire.ContentTypeAtom {
			t.Fatalf("Content-Type %q", d[0].contentType)
		}
		if want := "<" + w.public + `/websub/hub>; rel="hub", <` + topic + `>; rel="self"`; d[0].link != want {
			t.Fatalf("Link %q\nwant %q", d[0].link, want)
		}
		// A GET of the topic has the same Content-Type.
		req, _ := http.NewRequest("GET", topic, nil)
		req.Header.Set("Authorization", "Bearer "+w.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if ct := resp.Header.Get("Content-Type"); ct != d[0].contentType {
			t.Fatalf("topic GET Content-Type %q, delivery %q", ct, d[0].contentType)
		}
	})
}

// TestGoneRemovesTheSubscription: a callback answering 410 is
// unsubscribed and gets nothing more.
func TestGoneRemovesTheSubscription(t *testing.T) {
	teststore.Engines(t, func(t *testing.T, open teststore.Open) {
		w := newWorld(t, open)
		cb := newCallback(t, http.StatusGone)
		w.subscribe(cb, w.topic("repo-a", hub.FormatAtom), "s")
		w.post("repo-a")
		waitFor(t, "the subscription removed", func() bool {
			subs, err := w.st.Subscriptions(context.Background(), w.pid)
			return err == nil && len(subs) == 0
		})
		w.post("repo-a")
		other := newCallback(t)
		w.subscribe(other, w.topic("repo-a", hub.FormatAtom), "s") // a live one, to know deliveries went on
		w.post("repo-a")
		waitFor(t, "the other callback's delivery", func() bool { return len(other.deliveries()) == 1 })
		if n := len(cb.deliveries()); n != 1 {
			t.Fatalf("the gone callback got %d deliveries, want 1", n)
		}
	})
}

// TestHangingCallbackDelaysNoOther: a callback that never answers holds
// back no other subscription, on its project or another.
func TestHangingCallbackDelaysNoOther(t *testing.T) {
	teststore.Engines(t, func(t *testing.T, open teststore.Open) {
		w := newWorld(t, open)
		slow := newCallback(t)
		slow.hang = make(chan struct{})
		defer close(slow.hang)
		fast := newCallback(t)
		topic := w.topic("repo-a", hub.FormatAtom)
		w.subscribe(slow, topic, "s")
		w.subscribe(fast, topic, "s")
		for i := 1; i <= 5; i++ {
			w.post("repo-a")
			waitFor(t, "the fast callback's delivery", func() bool { return len(fast.deliveries()) == i })
		}
		if n := len(slow.deliveries()); n != 1 {
			t.Fatalf("the hanging callback got %d deliveries (one hangs; no second may start)", n)
		}
	})
}

// TestRevokedCapabilityIsDenied: when the token that created a private
// subscription is revoked (here behind the relay's back, so only the
// delivery-time re-check sees it), the next delivery is not made: the
// callback gets hub.mode=denied and the subscription is gone.
func TestRevokedCapabilityIsDenied(t *testing.T) {
	teststore.Engines(t, func(t *testing.T, open teststore.Open) {
		w := newWorld(t, open)
		cb := newCallback(t)
		w.subscribe(cb, w.topic("repo-a", hub.FormatAtom), "s")
		w.post("repo-a")
		waitFor(t, "one delivery", func() bool { return len(cb.deliveries()) == 1 })
		tok, err := w.st.ListTokens(context.Background(), w.pid, "", 10)
		if err != nil || len(tok) != 1 {
			t.Fatalf("tokens %v %v", tok, err)
		}
		// Posting needs a live token: make a second one first.
		_, appendTok, err := registry.CreateToken(context.Background(), w.st, w.pid, []string{store.ScopeAppend})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.st.RevokeToken(context.Background(), tok[0].ID); err != nil {
			t.Fatal(err)
		}
		w.token = appendTok
		w.post("repo-a")
		waitFor(t, "the denial", func() bool { cb.mu.Lock(); defer cb.mu.Unlock(); return len(cb.denied) == 1 })
		waitFor(t, "the subscription removed", func() bool {
			subs, err := w.st.Subscriptions(context.Background(), w.pid)
			return err == nil && len(subs) == 0
		})
		if n := len(cb.deliveries()); n != 1 {
			t.Fatalf("%d deliveries after the revocation", n-1)
		}
	})
}

// TestPublishPingsExternalHubs: for a public project, new records of each
// repository are announced to an external hub (a loopback test hub: no
// Go or npm WebSub hub installs here) as hub.mode=publish&hub.url=<topic>
// (with hub.topic=<topic> too);
// a private project's records are not.
func TestPublishPingsExternalHubs(t *testing.T) {
	teststore.Engines(t, func(t *testing.T, open teststore.Open) {
		w := newWorld(t, open)
		var mu sync.Mutex
		var pings []string
		ext := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			if err := r.ParseForm(); err != nil || r.Form.Get("hub.mode") != "publish" ||
				r.Header.Get("Content-Type") != "application/x-www-form-urlencoded" {
				rw.WriteHeader(http.StatusBadRequest)
				return
			}
			mu.Lock()
			pings = append(pings, r.Form.Get("hub.url"))
			mu.Unlock()
			rw.WriteHeader(http.StatusNoContent)
		}))
		t.Cleanup(ext.Close)
		guard, _ := ssrf.NewGuard(ssrf.GuardOptions{AllowHosts: []string{"127.0.0.1"}})
		r := couriers.NewRunner(w.st, &websub.Publisher{Hubs: []string{ext.URL + "/hub"}, Store: w.st, Client: guard.HTTPClient(), PublicURL: w.public},
			couriers.Options{Holder: "relay-1", LeaseTTL: 3 * time.Second, Backoff: couriers.Backoff{Initial: 20 * time.Millisecond, Max: 50 * time.Millisecond}})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { _ = r.Run(ctx); close(done) }()
		t.Cleanup(func() { cancel(); <-done })

		// A second, private project of the same relay: never announced.
		other, err := registry.CreateProject(ctx, w.st, "")
		if err != nil {
			t.Fatal(err)
		}
		priv := storetest.NewSigner(t, other.ID).Register(t, w.st)
		ev, c := priv.Event(t, storetest.Spec{RepositoryID: "repo-p"})
		if _, err := w.st.Append(ctx, ev, c); err != nil {
			t.Fatal(err)
		}
		if err := w.st.SetProjectVisibility(ctx, w.pid, store.VisibilityPublic); err != nil {
			t.Fatal(err)
		}
		r.Refresh(w.pid)
		w.post("repo-b")
		w.post("repo-b")
		w.post("repo-c")
		waitFor(t, "the public project's records announced", func() bool {
			states, _ := w.st.TargetStates(ctx, websub.PublishName, w.pid)
			return len(states) == 1 && states[0].ReceivedSeq == 3
		})
		mu.Lock()
		defer mu.Unlock()
		// Each repository's Atom and JSON topics, its thread's, and the
		// project-wide JSON topic (TestPublishPingsEveryTopicPastRefusals).
		thread := func(repo, format string) string {
			return hub.Topic{ProjectID: w.pid, RepositoryID: repo, ThreadID: "thread-1", Format: format}.URL(w.public)
		}
		want := map[string]bool{w.topic("repo-b", hub.FormatAtom): true, w.topic("repo-c", hub.FormatAtom): true,
			w.topic("repo-b", hub.FormatJSON): true, w.topic("repo-c", hub.FormatJSON): true,
			thread("repo-b", hub.FormatAtom): true, thread("repo-c", hub.FormatAtom): true,
			thread("repo-b", hub.FormatJSON): true, thread("repo-c", hub.FormatJSON): true,
			hub.Topic{ProjectID: w.pid, Format: hub.FormatJSON}.URL(w.public): true}
		for _, p := range pings {
			if !want[p] {
				t.Fatalf("ping for %s: not a public topic of this relay's records (pings %v)", p, pings)
			}
		}
		if len(pings) < 9 || len(pings) > 9*3 { // one to three batches; each topic announced once per batch
			t.Fatalf("pings %v", pings)
		}
	})
}

// testWriter sends log lines to t.Log (kept only for a failing test).
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestAtomDeliveryEntriesAreTheTopics: an Atom delivery's entries are the
// topic's entries byte for byte (issue 32: titled by the event's words,
// authored by the sender's display name, linked to the record's page),
// so a subscriber that also reads the feed sees one entry per record.
func TestAtomDeliveryEntriesAreTheTopics(t *testing.T) {
	teststore.Engines(t, func(t *testing.T, open teststore.Open) {
		w := newWorld(t, open)
		cb := newCallback(t)
		topic := w.topic("repo-a", hub.FormatAtom)
		w.subscribe(cb, topic, "s3cret")
		var ids []string
		for range 3 {
			ids = append(ids, w.post("repo-a"))
		}
		entriesOf := func(b []byte) map[string]string {
			out := map[string]string{}
			for _, m := range regexp.MustCompile(`(?s)  <entry>\n    <id>([^<]*)</id>.*?</entry>\n`).FindAllSubmatch(b, -1) {
				out[string(m[1])] = string(m[0])
			}
			return out
		}
		delivered := map[string]string{}
		waitFor(t, "three delivered entries", func() bool {
			for _, d := range cb.deliveries() {
				for id, e := range entriesOf(d.body) {
					delivered[id] = e
				}
			}
			return len(delivered) == 3
		})
		req, _ := http.NewRequest("GET", topic, nil)
		req.Header.Set("Authorization", "Bearer "+w.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		got := entriesOf(body)
		for i, id := range ids {
			if got[id] == "" || got[id] != delivered[id] {
				t.Fatalf("entry %d differs:\ndelivered %s\ntopic     %s", i, delivered[id], got[id])
			}
			for _, want := range []string{"<author><name>agent " + w.signer.IdentityID[:8] + "</name></author>",
				`<link rel="alternate" type="text/html" href="` + w.public + "/ui/projects/" + w.pid + "/records/"} {
				if !strings.Contains(got[id], want) {
					t.Fatalf("entry %d lacks %q:\n%s", i, want, got[id])
				}
			}
		}
	})
}
