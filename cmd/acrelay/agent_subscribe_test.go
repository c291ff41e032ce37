package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/acrelay/acrelay/client"
	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/couriers/websub"
	"github.com/acrelay/acrelay/hub"
	"github.com/acrelay/acrelay/store"
)

// lockedOutput is an io.Writer safe to read while the command writes.
type lockedOutput struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (o *lockedOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.Write(p)
}

func (o *lockedOutput) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}

// loopHub stands in for the relay's topic and hub (the edge this test
// does not own): it serves the topic with its Link header, answers hub
// requests 202, then verifies intent (or denies) on the callback, as
// spec/websub.md describes.
type loopHub struct {
	*httptest.Server
	t      *testing.T
	lease  int    // hub.lease_seconds it grants
	silent bool   // never verify
	deny   string // send hub.mode=denied with this reason instead
	events chan string

	mu        sync.Mutex
	forms     []url.Values
	auths     []string
	topicAuth string
}

func newLoopHub(t *testing.T) *loopHub {
	t.Helper()
	h := &loopHub{t: t, lease: 3600, events: make(chan string, 16)}
	h.Server = httptest.NewServer(http.HandlerFunc(h.serve))
	t.Cleanup(h.Close)
	return h
}

func (h *loopHub) serve(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodGet && r.URL.Path == hub.TopicPathAtom:
		h.mu.Lock()
		h.topicAuth = r.Header.Get("Authorization")
		h.mu.Unlock()
		w.Header().Set("Link", websub.LinkHeader(h.URL, h.URL+r.URL.RequestURI()))
		w.Header().Set("Content-Type", websub.ContentTypeAtom)
		io.WriteString(w, `<?xml version="1.0" encoding="utf-8"?><feed xmlns="http://www.w3.org/2005/Atom"></feed>`)
	case r.Method == http.MethodGet && r.URL.Path == "/elsewhere": // a page without a hub
		io.WriteString(w, "no links here")
	case r.Method == http.MethodPost && r.URL.Path == hub.HubPath:
		_ = r.ParseForm()
		form := r.PostForm
		h.mu.Lock()
		h.forms = append(h.forms, form)
		h.auths = append(h.auths, r.Header.Get("Authorization"))
		h.mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
		if !h.silent {
			go h.verify(form)
		}
	default:
		http.NotFound(w, r)
	}
}

// verify plays the hub's verification of intent for one request.
func (h *loopHub) verify(form url.Values) {
	q := url.Values{"hub.mode": {form.Get("hub.mode")}, "hub.topic": {form.Get("hub.topic")}, "hub.challenge": {uuid.NewString()}}
	if h.deny != "" {
		q = url.Values{"hub.mode": {"denied"}, "hub.topic": {form.Get("hub.topic")}, "hub.reason": {h.deny}}
	} else if form.Get("hub.mode") == "subscribe" {
		q.Set("hub.lease_seconds", strconv.Itoa(h.lease))
	}
	res, err := http.Get(form.Get("hub.callback") + "?" + q.Encode())
	if err != nil {
		h.t.Errorf("verify: %v", err)
		return
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode == http.StatusOK && string(body) == q.Get("hub.challenge") {
		h.events <- "verified " + q.Get("hub.mode")
	} else {
		h.events <- "refused " + q.Get("hub.mode")
	}
}

func (h *loopHub) form(i int) (url.Values, string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.forms[i], h.auths[i]
}

func (h *loopHub) expect(t *testing.T, want string) {
	t.Helper()
	select {
	case got := <-h.events:
		if got != want {
			t.Fatalf("hub: %s, want %s", got, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("hub: no %s", want)
	}
}

// subscribeAgent signs one record for the topic's repository.
func subscribeAgent(t *testing.T, project string) (store.Record, client.Keyring) {
	t.Helper()
	priv, _ := client.GenerateKey()
	sender := correspondence.Sender{IdentityID: uuid.NewString(), SigningKeyID: uuid.NewString(), DeviceID: uuid.NewString(), SessionID: uuid.NewString()}
	s, _ := client.NewSigner(priv, project, sender)
	ev, err := client.NewSession(s, client.NewMemorySequencer(0)).Sign(client.At{RepositoryID: "repo:cli", ThreadID: "t", Parents: []string{},
		Scope: correspondence.Scope{Paths: []string{"src"}}}, client.Intent("over websub"))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := ev.CanonicalJSON()
	rec := store.Record{ProjectID: project, EventID: ev.ID, RepositoryID: ev.RepositoryID, ThreadID: ev.ThreadID, Kind: ev.Kind,
		Event: raw, ReceivedSeq: 7, ReceivedAt: time.Date(2026, 7, 19, 10, 0, 0, 0, time.UTC)}
	return rec, client.Keyring{sender.SigningKeyID: {IdentityID: sender.IdentityID, PublicKey: s.PublicKey()}}
}

// startSubscribe runs the command's core on a fresh loopback listener.
func startSubscribe(t *testing.T, ctx context.Context, cfg subscribeConfig) (subscribeConfig, *lockedOutput, *lockedOutput, chan error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.PublicCallback = "http://" + ln.Addr().String() + "/websub/" + uuid.NewString()
	out, errb := &lockedOutput{}, &lockedOutput{}
	done := make(chan error, 1)
	go func() { done <- runSubscribe(ctx, ln, cfg, out, errb) }()
	return cfg, out, errb, done
}

func TestSubscribeCommandLoop(t *testing.T) {
	h := newLoopHub(t)
	h.lease = 1 // renewal at 80%: after 0.8 s
	project := uuid.NewString()
	topic := hub.Topic{ProjectID: project, RepositoryID: "repo:cli", Format: hub.FormatAtom}.URL(h.URL)
	rec, keys := subscribeAgent(t, project)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	cfg, out, errb, done := startSubscribe(t, ctx, subscribeConfig{Topic: topic, Token: "tok-read", Keys: keys, Lease: time.Hour, VerifyTimeout: 5 * time.Second})

	h.expect(t, "verified subscribe")
	form, auth := h.form(0)
	if h.topicAuth != "Bearer tok-read" || auth != "Bearer tok-read" {
		t.Fatalf("authorization: topic GET %q, hub %q", h.topicAuth, auth)
	}
	if form.Get("hub.topic") != topic || form.Get("hub.callback") != cfg.PublicCallback || form.Get("hub.lease_seconds") != "3600" || len(form.Get("hub.secret")) != 43 {
		t.Fatalf("form %v", form)
	}
	secret := []byte(form.Get("hub.secret"))

	// One delivery, sent twice (a retry), and one with a bad signature.
	body, ct, err := websub.Render(h.URL, store.Subscription{Topic: topic, RepositoryID: "repo:cli", Format: hub.FormatAtom}, []store.Record{rec})
	if err != nil {
		t.Fatal(err)
	}
	for _, sig := range []string{websub.Signature(secret, body), websub.Signature(secret, body), "sha256=00"} {
		req, _ := http.NewRequest(http.MethodPost, cfg.PublicCallback, bytes.NewReader(body))
		req.Header.Set("Content-Type", ct)
		req.Header.Set("Link", websub.LinkHeader(h.URL, topic))
		req.Header.Set("X-Hub-Signature", sig)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusNoContent {
			t.Fatalf("delivery: %d", res.StatusCode)
		}
	}

	h.expect(t, "verified subscribe") // the renewal
	if f, _ := h.form(1); f.Get("hub.secret") != string(secret) || f.Get("hub.mode") != "subscribe" {
		t.Fatalf("renewal form %v", f)
	}
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(errb.String(), "lease renewed"); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("renewal not reported: %s", errb)
		}
	}
	cancel() // Ctrl-C
	h.expect(t, "verified unsubscribe")
	if err := <-done; err != nil {
		t.Fatalf("run: %v; stderr %s", err, errb)
	}

	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("stdout %q, want one line", out.String())
	}
	var got struct {
		Event   json.RawMessage `json:"event"`
		Receipt struct {
			ReceivedSeq string `json:"received_seq"`
		} `json:"receipt"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &got); err != nil || !bytes.Equal(got.Event, rec.Event) || got.Receipt.ReceivedSeq != "7" {
		t.Fatalf("line %s: %v", lines[0], err)
	}
	if e := errb.String(); !strings.Contains(e, "subscribed to") || !strings.Contains(e, "lease renewed") ||
		!strings.Contains(e, "unsubscribed") || !strings.Contains(e, "1 bad signature") {
		t.Fatalf("stderr %s", e)
	}
}

func TestSubscribeCommandFailures(t *testing.T) {
	project := uuid.NewString()
	cases := []struct {
		name  string
		setup func(h *loopHub, cfg *subscribeConfig)
		want  string
		is    error
	}{
		{"verification never arrives", func(h *loopHub, cfg *subscribeConfig) { h.silent = true }, "no verification of intent from the hub within 200ms", nil},
		{"denied", func(h *loopHub, cfg *subscribeConfig) { h.deny = "token revoked" }, "token revoked", client.ErrWebSubDenied},
		{"no hub link", func(h *loopHub, cfg *subscribeConfig) {
			cfg.Topic = h.URL + "/elsewhere"
		}, "pass --hub", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newLoopHub(t)
			cfg := subscribeConfig{Topic: hub.Topic{ProjectID: project, RepositoryID: "repo:cli", Format: hub.FormatAtom}.URL(h.URL),
				VerifyTimeout: 200 * time.Millisecond}
			tc.setup(h, &cfg)
			_, _, _, done := startSubscribe(t, t.Context(), cfg)
			var err error
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("still running")
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || (tc.is != nil && !errors.Is(err, tc.is)) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
		})
	}
}

func TestSubscribeCommandFlags(t *testing.T) {
	cmd, _, err := rootCmd.Find([]string{"subscribe"})
	if err != nil || cmd.Name() != "subscribe" || !strings.Contains(cmd.Example, "acrelay subscribe") {
		t.Fatalf("subscribe not registered with an example: %v", err)
	}
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"required", []string{"--topic", "https://relay.example/t"}, "are required"},
		{"bad callback", []string{"--topic", "https://relay.example/t", "--callback-listen", "127.0.0.1:0", "--public-callback", "/cb"}, "--public-callback"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := runAgent(t, newSubscribeCmd(), "", tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
		})
	}
}
