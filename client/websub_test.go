package client_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"hash"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/acrelay/acrelay/atom"
	"github.com/acrelay/acrelay/client"
	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/couriers/websub"
	"github.com/acrelay/acrelay/hub"
	"github.com/acrelay/acrelay/store"
)

const wsPublic = "https://relay.test"

// hubRequest is one form POST the fake hub received.
type hubRequest struct {
	form          url.Values
	authorization string
	contentType   string
}

// fakeHub is the hub's edge in these unit tests: it records each request
// and answers status (202 by default).
type fakeHub struct {
	*httptest.Server
	mu     sync.Mutex
	reqs   []hubRequest
	status int
}

func newFakeHub(t *testing.T) *fakeHub {
	t.Helper()
	h := &fakeHub{status: http.StatusAccepted}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		form, err := url.ParseQuery(string(body))
		if err != nil {
			t.Errorf("hub: form: %v", err)
		}
		h.mu.Lock()
		h.reqs = append(h.reqs, hubRequest{form: form, authorization: r.Header.Get("Authorization"), contentType: r.Header.Get("Content-Type")})
		status := h.status
		h.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *fakeHub) last(t *testing.T) hubRequest {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.reqs) == 0 {
		t.Fatal("hub received nothing")
	}
	return h.reqs[len(h.reqs)-1]
}

// wsAgent signs events and holds the keyring that verifies them.
type wsAgent struct {
	sess    *client.Session
	keys    client.Keyring
	project string
	seq     int64
}

func newWSAgent(t *testing.T) *wsAgent {
	t.Helper()
	priv, err := client.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	sender := correspondence.Sender{IdentityID: uuid.NewString(), SigningKeyID: uuid.NewString(), DeviceID: uuid.NewString(), SessionID: uuid.NewString()}
	project := uuid.NewString()
	s, err := client.NewSigner(priv, project, sender)
	if err != nil {
		t.Fatal(err)
	}
	return &wsAgent{sess: client.NewSession(s, client.NewMemorySequencer(0)), project: project,
		keys: client.Keyring{sender.SigningKeyID: {IdentityID: sender.IdentityID, PublicKey: s.PublicKey()}}}
}

// record signs an intent and returns it as the store would hand it to the
// courier.
func (a *wsAgent) record(t *testing.T, summary string) store.Record {
	t.Helper()
	ev, err := a.sess.Sign(client.At{RepositoryID: "repo:ws", ThreadID: "t", Parents: []string{},
		Scope: correspondence.Scope{Paths: []string{"src"}}}, client.Intent(summary))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := ev.CanonicalJSON()
	if err != nil {
		t.Fatal(err)
	}
	a.seq++
	return store.Record{ProjectID: a.project, EventID: ev.ID, RepositoryID: ev.RepositoryID, ThreadID: ev.ThreadID, Kind: ev.Kind,
		Event: raw, ReceivedSeq: a.seq, ReceivedAt: time.Date(2026, 7, 19, 10, 0, int(a.seq), 0, time.UTC)}
}

func (a *wsAgent) topic(format string) string {
	return hub.Topic{ProjectID: a.project, RepositoryID: "repo:ws", Format: format}.URL(wsPublic)
}

// wsFixture is a subscriber serving its callback over real HTTP, its
// fake hub, and what it collected.
type wsFixture struct {
	sub      *client.WebSubSubscriber
	hub      *fakeHub
	callback string
	mu       sync.Mutex
	got      []client.Record
	topics   []string
}

func newWSFixture(t *testing.T, keys client.Keyring) *wsFixture {
	t.Helper()
	f := &wsFixture{hub: newFakeHub(t)}
	f.sub = &client.WebSubSubscriber{Hub: f.hub.URL + "/websub/hub", Token: "tok-read", Keys: keys, MaxBody: 1 << 20,
		OnRecord: func(topic string, rec client.Record) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.got = append(f.got, rec)
			f.topics = append(f.topics, topic)
		}}
	srv := httptest.NewServer(f.sub)
	t.Cleanup(srv.Close)
	f.callback = srv.URL + "/cb"
	f.sub.Callback = f.callback
	return f
}

func (f *wsFixture) records() []client.Record {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]client.Record(nil), f.got...)
}

// verify plays the hub's verification of intent: a GET on the callback.
func (f *wsFixture) verify(t *testing.T, q url.Values) (int, string, string) {
	t.Helper()
	res, err := http.Get(f.callback + "?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header.Get("Content-Type"), string(body)
}

// subscribed subscribes to topic, verifies it as the hub would, and
// returns the secret the subscriber sent.
func (f *wsFixture) subscribed(t *testing.T, topic string) []byte {
	t.Helper()
	if err := f.sub.Subscribe(t.Context(), topic, time.Hour); err != nil {
		t.Fatal(err)
	}
	req := f.hub.last(t)
	status, _, body := f.verify(t, url.Values{"hub.mode": {"subscribe"}, "hub.topic": {topic}, "hub.challenge": {"ch-1"}, "hub.lease_seconds": {"3600"}})
	if status != http.StatusOK || body != "ch-1" {
		t.Fatalf("verification: %d %q", status, body)
	}
	return []byte(req.form.Get("hub.secret"))
}

// deliver POSTs body to the callback as the courier does, with the
// given signature header ("" for none).
func (f *wsFixture) deliver(t *testing.T, topic, contentType string, body []byte, signature string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, f.callback, bytes.NewReader(body))
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Link", websub.LinkHeader(wsPublic, topic))
	if signature != "" {
		req.Header.Set("X-Hub-Signature", signature)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

// render is the courier's own delivery body for topic and recs.
func render(t *testing.T, topic string, recs ...store.Record) ([]byte, string) {
	t.Helper()
	ht, err := hub.ParseTopic(wsPublic, topic)
	if err != nil {
		t.Fatal(err)
	}
	body, ct, err := websub.Render(wsPublic, store.Subscription{Topic: topic, RepositoryID: ht.RepositoryID, ThreadID: ht.ThreadID, Format: ht.Format}, recs)
	if err != nil {
		t.Fatal(err)
	}
	return body, ct
}

func hmacHex(h func() hash.Hash, secret, body []byte) string {
	m := hmac.New(h, secret)
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

func TestWebSubSubscribeSendsForm(t *testing.T) {
	f := newWSFixture(t, nil)
	topic := newWSAgent(t).topic(hub.FormatAtom)
	if err := f.sub.Subscribe(t.Context(), topic, 36*time.Hour); err != nil {
		t.Fatal(err)
	}
	req := f.hub.last(t)
	if req.authorization != "Bearer tok-read" || req.contentType != "application/x-www-form-urlencoded" {
		t.Fatalf("headers: %q %q", req.authorization, req.contentType)
	}
	secret := req.form.Get("hub.secret")
	want := url.Values{"hub.mode": {"subscribe"}, "hub.topic": {topic}, "hub.callback": {f.callback},
		"hub.lease_seconds": {"129600"}, "hub.secret": {secret}}
	if req.form.Encode() != want.Encode() || len(secret) != 43 {
		t.Fatalf("form %v, want %v (secret of 43 characters)", req.form, want)
	}
	// A renewal keeps the secret.
	if err := f.sub.Subscribe(t.Context(), topic, 0); err != nil {
		t.Fatal(err)
	}
	if r := f.hub.last(t); r.form.Get("hub.secret") != secret || r.form.Has("hub.lease_seconds") {
		t.Fatalf("renewal form %v", r.form)
	}
	if err := f.sub.Unsubscribe(t.Context(), topic); err != nil {
		t.Fatal(err)
	}
	want = url.Values{"hub.mode": {"unsubscribe"}, "hub.topic": {topic}, "hub.callback": {f.callback}}
	if r := f.hub.last(t); r.form.Encode() != want.Encode() || r.authorization != "Bearer tok-read" {
		t.Fatalf("unsubscribe form %v auth %q", r.form, r.authorization)
	}

	t.Run("no secret and no token for a public topic", func(t *testing.T) {
		g := newWSFixture(t, nil)
		g.sub.NoSecret, g.sub.Token = true, ""
		if err := g.sub.Subscribe(t.Context(), topic, time.Hour); err != nil {
			t.Fatal(err)
		}
		if r := g.hub.last(t); r.form.Has("hub.secret") || r.authorization != "" {
			t.Fatalf("form %v auth %q", r.form, r.authorization)
		}
	})
	t.Run("refusal", func(t *testing.T) {
		g := newWSFixture(t, nil)
		g.hub.status = http.StatusUnauthorized
		err := g.sub.Subscribe(t.Context(), topic, time.Hour)
		var ae *client.APIError
		if !errors.As(err, &ae) || ae.Status != http.StatusUnauthorized {
			t.Fatalf("err %v", err)
		}
		if _, werr := g.sub.Wait(t.Context(), topic); !errors.As(werr, &ae) {
			t.Fatalf("wait: %v", werr)
		}
		// The refused request is not verified.
		status, _, _ := g.verify(t, url.Values{"hub.mode": {"subscribe"}, "hub.topic": {topic}, "hub.challenge": {"x"}, "hub.lease_seconds": {"60"}})
		if status != http.StatusNotFound {
			t.Fatalf("verification of a refused request: %d", status)
		}
	})
}

func TestWebSubVerification(t *testing.T) {
	a := newWSAgent(t)
	asked := a.topic(hub.FormatAtom)
	// The same topic with its parameters in another order and encoding.
	u, _ := url.Parse(asked)
	reordered := u.Scheme + "://" + strings.ToUpper(u.Host) + u.Path + "?repository_id=repo%3Aws&project_id=" + a.project
	unasked := a.topic(hub.FormatJSON)
	q := func(mode, topic, challenge, lease string) url.Values {
		v := url.Values{"hub.mode": {mode}, "hub.topic": {topic}, "hub.challenge": {challenge}}
		if lease != "" {
			v.Set("hub.lease_seconds", lease)
		}
		return v
	}
	cases := []struct {
		name   string
		query  url.Values
		status int
		body   string
	}{
		{"asked topic", q("subscribe", asked, "Zx-9_~.challenge", "864000"), 200, "Zx-9_~.challenge"},
		{"asked topic, other spelling", q("subscribe", reordered, "c2", "3600"), 200, "c2"},
		{"topic not asked for", q("subscribe", unasked, "c3", "3600"), 404, ""},
		{"wrong mode", q("unsubscribe", asked, "c4", ""), 404, ""},
		{"unknown mode", q("publish", asked, "c5", "3600"), 404, ""},
		{"no challenge", q("subscribe", asked, "", "3600"), 404, ""},
		{"bad lease", q("subscribe", asked, "c6", "1.5"), 404, ""},
		{"no lease", q("subscribe", asked, "c7", ""), 404, ""},
	}
	f := newWSFixture(t, nil)
	if err := f.sub.Subscribe(t.Context(), asked, time.Hour); err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, ct, body := f.verify(t, tc.query)
			if status != tc.status {
				t.Fatalf("status %d, want %d", status, tc.status)
			}
			if tc.status == 200 && (body != tc.body || ct != "text/plain") {
				t.Fatalf("body %q content type %q, want %q text/plain", body, ct, tc.body)
			}
		})
	}
	lease, err := f.sub.Wait(t.Context(), asked)
	if err != nil || lease != time.Hour {
		t.Fatalf("wait: %v %v (the last verification granted 3600 s)", lease, err)
	}
	if s, _ := f.sub.Subscription(asked); s.State != client.WebSubActive {
		t.Fatalf("state %+v", s)
	}

	t.Run("unsubscribe", func(t *testing.T) {
		if status, _, _ := f.verify(t, q("unsubscribe", asked, "u0", "")); status != 404 {
			t.Fatalf("unsubscribe nobody asked for: %d", status)
		}
		if err := f.sub.Unsubscribe(t.Context(), asked); err != nil {
			t.Fatal(err)
		}
		if status, _, _ := f.verify(t, q("subscribe", asked, "u1", "3600")); status != 404 {
			t.Fatalf("subscribe while unsubscribing: %d", status)
		}
		if status, _, body := f.verify(t, q("unsubscribe", asked, "u2", "")); status != 200 || body != "u2" {
			t.Fatalf("unsubscribe: %d %q", status, body)
		}
		if _, err := f.sub.Wait(t.Context(), asked); err != nil {
			t.Fatal(err)
		}
		if s, _ := f.sub.Subscription(asked); s.State != client.WebSubUnsubscribed {
			t.Fatalf("state %+v", s)
		}
	})

	t.Run("denied", func(t *testing.T) {
		g := newWSFixture(t, nil)
		var denials []string
		g.sub.OnDenied = func(topic, reason string) { denials = append(denials, topic+" "+reason) }
		if err := g.sub.Subscribe(t.Context(), asked, time.Hour); err != nil {
			t.Fatal(err)
		}
		status, _, _ := g.verify(t, url.Values{"hub.mode": {"denied"}, "hub.topic": {asked}, "hub.reason": {"token revoked"}})
		if status != http.StatusOK {
			t.Fatalf("denied: %d", status)
		}
		if _, err := g.sub.Wait(t.Context(), asked); !errors.Is(err, client.ErrWebSubDenied) || !strings.Contains(err.Error(), "token revoked") {
			t.Fatalf("wait: %v", err)
		}
		if s, _ := g.sub.Subscription(asked); s.State != client.WebSubDenied || s.DeniedReason != "token revoked" {
			t.Fatalf("state %+v", s)
		}
		if len(denials) != 1 || denials[0] != asked+" token revoked" {
			t.Fatalf("OnDenied %q", denials)
		}
		// A denial of a topic never asked for is acknowledged and ignored.
		if status, _, _ := g.verify(t, url.Values{"hub.mode": {"denied"}, "hub.topic": {unasked}}); status != 200 || len(denials) != 1 {
			t.Fatalf("denied unknown: %d %q", status, denials)
		}
	})

	t.Run("verification never comes", func(t *testing.T) {
		g := newWSFixture(t, nil)
		if err := g.sub.Subscribe(t.Context(), asked, time.Hour); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		defer cancel()
		if _, err := g.sub.Wait(ctx, asked); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("wait: %v", err)
		}
		if _, err := g.sub.Wait(t.Context(), unasked); !errors.Is(err, client.ErrWebSubNoRequest) {
			t.Fatalf("wait unasked: %v", err)
		}
	})
}

func TestWebSubDeliverySignature(t *testing.T) {
	a := newWSAgent(t)
	topic := a.topic(hub.FormatAtom)
	rec := a.record(t, "signed")
	body, ct := render(t, topic, rec)
	cases := []struct {
		name      string
		signature func(secret []byte) string
		delivered bool
	}{
		{"sha256", func(s []byte) string { return websub.Signature(s, body) }, true},
		{"sha384", func(s []byte) string { return "sha384=" + hmacHex(sha512.New384, s, body) }, true},
		{"sha512", func(s []byte) string { return "sha512=" + hmacHex(sha512.New, s, body) }, true},
		{"uppercase hex", func(s []byte) string { return "sha256=" + strings.ToUpper(hmacHex(sha256.New, s, body)) }, true},
		{"missing", func([]byte) string { return "" }, false},
		{"wrong secret", func([]byte) string { return websub.Signature([]byte("another secret"), body) }, false},
		{"other body", func(s []byte) string { return websub.Signature(s, append(bytes.Clone(body), ' ')) }, false},
		{"sha1", func(s []byte) string { return "sha1=" + hmacHex(sha1.New, s, body) }, false},
		{"not hex", func([]byte) string { return "sha256=zz" }, false},
		{"no method", func(s []byte) string { return hmacHex(sha256.New, s, body) }, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newWSFixture(t, a.keys)
			secret := f.subscribed(t, topic)
			if status := f.deliver(t, topic, ct, body, tc.signature(secret)); status != http.StatusNoContent {
				t.Fatalf("status %d, want 204 whatever the signature", status)
			}
			got, st := f.records(), f.sub.Stats()
			if tc.delivered {
				if len(got) != 1 || got[0].Event.ID != rec.EventID || !got[0].Verified || st.Delivered != 1 {
					t.Fatalf("records %d, stats %+v", len(got), st)
				}
				return
			}
			if len(got) != 0 || st.BadSignature != 1 || st.Dropped() != 1 || st.Refused != 0 {
				t.Fatalf("records %d, stats %+v", len(got), st)
			}
		})
	}
	t.Run("topic not subscribed", func(t *testing.T) {
		f := newWSFixture(t, a.keys)
		secret := f.subscribed(t, topic)
		other := a.topic(hub.FormatJSON)
		jb, jct := render(t, other, rec)
		if status := f.deliver(t, other, jct, jb, websub.Signature(secret, jb)); status != http.StatusNoContent {
			t.Fatalf("status %d", status)
		}
		if st := f.sub.Stats(); len(f.records()) != 0 || st.UnknownTopic != 1 {
			t.Fatalf("stats %+v", st)
		}
	})
	t.Run("pending, not yet verified", func(t *testing.T) {
		f := newWSFixture(t, a.keys)
		if err := f.sub.Subscribe(t.Context(), topic, time.Hour); err != nil {
			t.Fatal(err)
		}
		secret := []byte(f.hub.last(t).form.Get("hub.secret"))
		f.deliver(t, topic, ct, body, websub.Signature(secret, body))
		if st := f.sub.Stats(); len(f.records()) != 0 || st.UnknownTopic != 1 {
			t.Fatalf("stats %+v", st)
		}
	})
	t.Run("too large", func(t *testing.T) {
		f := newWSFixture(t, a.keys)
		secret := f.subscribed(t, topic)
		f.sub.MaxBody = int64(len(body) - 1)
		if status := f.deliver(t, topic, ct, body, websub.Signature(secret, body)); status != http.StatusRequestEntityTooLarge {
			t.Fatalf("status %d", status)
		}
		if st := f.sub.Stats(); st.TooLarge != 1 || len(f.records()) != 0 {
			t.Fatalf("stats %+v", st)
		}
	})
	t.Run("no secret asked", func(t *testing.T) {
		f := newWSFixture(t, a.keys)
		f.sub.NoSecret = true
		f.subscribed(t, topic)
		f.deliver(t, topic, ct, body, "")
		if len(f.records()) != 1 {
			t.Fatalf("stats %+v", f.sub.Stats())
		}
	})
}

func TestWebSubDeliveryFormatsAndDeduplication(t *testing.T) {
	for _, format := range []string{hub.FormatAtom, hub.FormatJSON} {
		t.Run(format, func(t *testing.T) {
			a := newWSAgent(t)
			topic := a.topic(format)
			f := newWSFixture(t, a.keys)
			secret := f.subscribed(t, topic)
			r1, r2, r3 := a.record(t, "one & <two>"), a.record(t, "two"), a.record(t, "three")
			for _, batch := range [][]store.Record{{r1, r2}, {r1, r2}, {r2, r3}} { // a retry, then an overlap
				body, ct := render(t, topic, batch...)
				if status := f.deliver(t, topic, ct, body, websub.Signature(secret, body)); status != http.StatusNoContent {
					t.Fatalf("status %d", status)
				}
			}
			got := f.records()
			if len(got) != 3 {
				t.Fatalf("%d records, want 3; stats %+v", len(got), f.sub.Stats())
			}
			for i, want := range []store.Record{r1, r2, r3} {
				r := got[i]
				if r.Event.ID != want.EventID || !bytes.Equal(r.Raw, want.Event) || !r.Verified ||
					r.Receipt.ReceivedSeq != want.ReceivedSeq || r.Receipt.ReceivedAt != correspondence.FormatTimestamp(want.ReceivedAt) {
					t.Fatalf("record %d: %s seq %d at %s verified %v", i, r.Event.ID, r.Receipt.ReceivedSeq, r.Receipt.ReceivedAt, r.Verified)
				}
			}
			if f.topics[0] != topic {
				t.Fatalf("topic %q", f.topics[0])
			}
			if st := f.sub.Stats(); st.Delivered != 3 || st.Duplicates != 3 || st.Dropped() != 0 || st.Refused != 0 {
				t.Fatalf("stats %+v", st)
			}
		})
	}
	t.Run("bounded memory", func(t *testing.T) {
		a := newWSAgent(t)
		topic := a.topic(hub.FormatJSON)
		f := newWSFixture(t, a.keys)
		f.sub.RecentIDs = 2
		secret := f.subscribed(t, topic)
		r1, r2, r3 := a.record(t, "1"), a.record(t, "2"), a.record(t, "3")
		for _, batch := range [][]store.Record{{r1, r2, r3}, {r1}} { // r1 fell out of a window of 2
			body, ct := render(t, topic, batch...)
			f.deliver(t, topic, ct, body, websub.Signature(secret, body))
		}
		if st := f.sub.Stats(); st.Delivered != 4 || st.Duplicates != 0 {
			t.Fatalf("stats %+v", st)
		}
	})
}

func TestWebSubDeliveryRefusesEntries(t *testing.T) {
	a := newWSAgent(t)
	topic := a.topic(hub.FormatAtom)
	good := a.record(t, "untouched")
	tampered := a.record(t, "original words")
	tampered.Event = bytes.Replace(tampered.Event, []byte("original words"), []byte("forged   words"), 1)
	stranger := newWSAgent(t)
	strangers := stranger.record(t, "signed by a key the keyring lacks")
	strangers.ProjectID, strangers.RepositoryID = a.project, "repo:ws"
	misnamed := a.record(t, "misnamed")
	misnamedFeed := atom.Render(atom.Feed{ID: topic, Title: "t", Updated: time.Now(), Entries: []atom.Entry{{
		EventID: "sha256:" + strings.Repeat("0", 64), Kind: "intent", RepositoryID: "repo:ws", ThreadID: "t",
		ReceivedAt: misnamed.ReceivedAt, Record: misnamed.ImmutableJSON()}}})

	f := newWSFixture(t, a.keys)
	secret := f.subscribed(t, topic)
	body, ct := render(t, topic, tampered, strangers, good)
	f.deliver(t, topic, ct, body, websub.Signature(secret, body)) // a valid HMAC over a bad event
	f.deliver(t, topic, ct, misnamedFeed, websub.Signature(secret, misnamedFeed))
	f.deliver(t, topic, ct, []byte("<feed>not atom</feed>"), websub.Signature(secret, []byte("<feed>not atom</feed>")))
	f.deliver(t, topic, "text/html", body, websub.Signature(secret, body))
	got := f.records()
	if len(got) != 1 || got[0].Event.ID != good.EventID {
		t.Fatalf("%d records; stats %+v", len(got), f.sub.Stats())
	}
	if st := f.sub.Stats(); st.Refused != 3 || st.Malformed != 2 || st.Delivered != 1 {
		t.Fatalf("stats %+v", st)
	}
	// The tampered entry's id was not remembered: the genuine event still arrives.
	tampered2 := tampered
	tampered2.Event = bytes.Replace(tampered.Event, []byte("forged   words"), []byte("original words"), 1)
	body, ct = render(t, topic, tampered2)
	f.deliver(t, topic, ct, body, websub.Signature(secret, body))
	if len(f.records()) != 2 {
		t.Fatalf("stats %+v", f.sub.Stats())
	}

	t.Run("no keyring verifies nothing", func(t *testing.T) {
		g := newWSFixture(t, nil)
		secret := g.subscribed(t, topic)
		body, ct := render(t, topic, strangers)
		g.deliver(t, topic, ct, body, websub.Signature(secret, body))
		if got := g.records(); len(got) != 1 || got[0].Verified {
			t.Fatalf("records %+v stats %+v", got, g.sub.Stats())
		}
	})
}
