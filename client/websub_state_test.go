package client_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/acrelay/acrelay/client"
	"github.com/acrelay/acrelay/hub"
)

// mapState is a client.WebSubState in a map, shared by the subscribers
// of one test as a store would share it between processes; fail makes
// every call fail.
type mapState struct {
	mu   sync.Mutex
	m    map[string]client.WebSubStored
	fail bool
}

var errStateDown = errors.New("state unavailable")

func (s *mapState) LoadWebSubTopic(_ context.Context, topic string) (client.WebSubStored, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail {
		return client.WebSubStored{}, false, errStateDown
	}
	st, ok := s.m[topic]
	return st, ok, nil
}

func (s *mapState) SaveWebSubTopic(_ context.Context, st client.WebSubStored) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail {
		return errStateDown
	}
	s.m[st.Topic] = st
	return nil
}

func (s *mapState) ReplaceWebSubTopic(_ context.Context, st client.WebSubStored, requestID string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail {
		return false, errStateDown
	}
	k := st.Topic
	if cur, ok := s.m[k]; !ok || cur.RequestID != requestID {
		return false, nil
	}
	s.m[k] = st
	return true, nil
}

// TestWebSubSharedState: two subscribers on one WebSubState, as two
// processes behind one callback URL (its topics are canonical, so the
// map's key is the topic as given). The first subscribes; the second
// answers the hub's verification and the first's Wait learns of it;
// the second authenticates a delivery with the secret the first sent;
// a renewal by the second sends the same secret; a State that fails
// sends nothing and answers 503.
func TestWebSubSharedState(t *testing.T) {
	a := newWSAgent(t)
	state := &mapState{m: map[string]client.WebSubStored{}}
	f1, f2 := newWSFixture(t, a.keys), newWSFixture(t, a.keys)
	f1.sub.State, f2.sub.State = state, state
	topic := a.topic(hub.FormatJSON)

	if err := f1.sub.Subscribe(t.Context(), topic, time.Hour); err != nil {
		t.Fatal(err)
	}
	secret := []byte(f1.hub.last(t).form.Get("hub.secret"))
	if len(secret) != 43 {
		t.Fatalf("secret of %d bytes, want 43", len(secret))
	}
	if status, _, _ := f2.verify(t, url.Values{"hub.mode": {"unsubscribe"}, "hub.topic": {topic}, "hub.challenge": {"x"}}); status != http.StatusNotFound {
		t.Fatalf("verification of a mode not requested: %d, want 404", status)
	}
	status, ct, body := f2.verify(t, url.Values{"hub.mode": {"subscribe"}, "hub.topic": {topic}, "hub.challenge": {"ch-2"}, "hub.lease_seconds": {"600"}})
	if status != http.StatusOK || ct != "text/plain" || body != "ch-2" {
		t.Fatalf("verification on the other subscriber: %d %q %q, want 200 text/plain ch-2", status, ct, body)
	}
	wctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	lease, err := f1.sub.Wait(wctx, topic)
	cancel()
	if err != nil || lease != 10*time.Minute {
		t.Fatalf("Wait on the subscriber that sent the request = %v, %v; want 10m0s, nil", lease, err)
	}
	if s, ok := f1.sub.Subscription(topic); !ok || s.State != client.WebSubActive || s.Lease != 10*time.Minute {
		t.Fatalf("Subscription = %+v %v, want active 10m0s", s, ok)
	}

	rec := a.record(t, "pushed")
	raw, ctype := render(t, topic, rec)
	if got := f2.deliver(t, topic, ctype, raw, "sha256="+hmacHex(sha256.New, []byte("another secret"), raw)); got != http.StatusNoContent {
		t.Fatalf("delivery with a bad signature: %d, want 204", got)
	}
	if n := len(f2.records()); n != 0 || f2.sub.Stats().BadSignature != 1 {
		t.Fatalf("a bad signature: %d records, stats %+v; want 0, BadSignature 1", n, f2.sub.Stats())
	}
	if got := f2.deliver(t, topic, ctype, raw, "sha256="+hmacHex(sha256.New, secret, raw)); got != http.StatusNoContent {
		t.Fatalf("delivery: %d, want 204", got)
	}
	if got := f2.records(); len(got) != 1 || got[0].Event.ID != rec.EventID {
		t.Fatalf("records on the other subscriber: %d, want 1 (%s)", len(got), rec.EventID)
	}

	if err := f2.sub.Subscribe(t.Context(), topic, time.Hour); err != nil {
		t.Fatal(err)
	}
	if got := f2.hub.last(t).form.Get("hub.secret"); got != string(secret) {
		t.Fatalf("renewal by the other subscriber sent another secret")
	}

	state.mu.Lock()
	state.fail = true
	state.mu.Unlock()
	f1.hub.mu.Lock()
	before := len(f1.hub.reqs)
	f1.hub.mu.Unlock()
	if err := f1.sub.Subscribe(t.Context(), topic, time.Hour); !errors.Is(err, errStateDown) {
		t.Fatalf("Subscribe with the State down: %v, want errStateDown", err)
	}
	f1.hub.mu.Lock()
	after := len(f1.hub.reqs)
	f1.hub.mu.Unlock()
	if after != before {
		t.Fatalf("Subscribe with the State down sent %d hub requests, want 0", after-before)
	}
	if got := f2.deliver(t, topic, ctype, raw, "sha256="+hmacHex(sha256.New, secret, raw)); got != http.StatusServiceUnavailable {
		t.Fatalf("delivery with the State down: %d, want 503", got)
	}
	if status, _, _ := f2.verify(t, url.Values{"hub.mode": {"subscribe"}, "hub.topic": {topic}, "hub.challenge": {"c"}, "hub.lease_seconds": {"60"}}); status != http.StatusServiceUnavailable {
		t.Fatalf("verification with the State down: %d, want 503", status)
	}
}
