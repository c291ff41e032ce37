package relay_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"testing"

	"github.com/acrelay/acrelay/client"
	"github.com/acrelay/acrelay/federation"
	"github.com/acrelay/acrelay/relay"
)

// callbackLinks serves peer knownPeer's callback with a real
// client.WebSubSubscriber (subscribed to nothing) and every other peer
// with a real federation.Manager (which runs no link).
type callbackLinks struct {
	*federation.Manager
	sub *client.WebSubSubscriber
}

const knownPeer = "5f0c1d8e-7a7b-4c55-9a43-2a3b8d8f9e01"

func (l callbackLinks) ServeCallback(w http.ResponseWriter, r *http.Request, peerID string) {
	if peerID == knownPeer {
		l.sub.ServeHTTP(w, r)
		return
	}
	l.Manager.ServeCallback(w, r, peerID)
}

// TestFederationCallbackRefusalJSON: a verification of intent the
// callback refuses (unknown peer, unknown topic, no challenge) is the
// relay's JSON 404 not_found, as on every other route.
func TestFederationCallbackRefusalJSON(t *testing.T) {
	var links callbackLinks
	e, _, _ := newEnvWith(t, relay.Config{Peers: &links})
	links.Manager = federation.New(e.st, nil, federation.Options{PublicURL: "http://relay.test", Holder: "test",
		Logger: slog.New(slog.DiscardHandler)})
	links.sub = &client.WebSubSubscriber{Hub: "http://remote.test/websub/hub", Callback: "http://relay.test" + relay.CallbackPath + knownPeer}

	verify := url.Values{"hub.mode": {"subscribe"}, "hub.topic": {"http://remote.test/v1/correspondence/events.atom?project_id=p&repository_id=repo"},
		"hub.challenge": {"c"}, "hub.lease_seconds": {"60"}}.Encode()
	for _, tc := range []struct{ name, path string }{
		{"unknown peer", relay.CallbackPath + newUUID() + "?" + verify},
		{"unknown topic", relay.CallbackPath + knownPeer + "?" + verify},
		{"no challenge", relay.CallbackPath + knownPeer + "?hub.mode=subscribe&hub.topic=x"},
		{"unknown mode", relay.CallbackPath + knownPeer + "?hub.mode=publish&hub.topic=x&hub.challenge=c"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do("GET", tc.path, "", nil)
			if r.Status != 404 || r.Header.Get("Content-Type") != "application/json; charset=utf-8" ||
				r.Header.Get("Content-Length") != strconv.Itoa(len(r.Body)) {
				t.Fatalf("%d %v %q: want 404 application/json; charset=utf-8", r.Status, r.Header, r.Body)
			}
			if got := r.code(t); got != "not_found" {
				t.Fatalf("code %q, want not_found; body %s", got, r.Body)
			}
		})
	}
	t.Run("a denial is still 200", func(t *testing.T) {
		mustStatus(t, e.do("GET", relay.CallbackPath+knownPeer+"?hub.mode=denied&hub.topic=x", "", nil), 200)
	})
	t.Run("a delivery to an unknown peer is still 410", func(t *testing.T) {
		res, err := http.Post(e.url+relay.CallbackPath+newUUID(), "application/atom+xml", nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusGone {
			t.Fatalf("status %d, want 410", res.StatusCode)
		}
	})
}
