package relay_test

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/acrelay/acrelay/internal/ssrf"
	"github.com/acrelay/acrelay/relay"
)

// TestPeerRemoteSSRF: a peer link's remote_url goes through the hub's
// SSRF guard at creation: loopback, metadata, private and odd spellings
// are 400 remote_url_invalid and nothing is stored; an allowlisted
// loopback host (tests) and a public name pass.
func TestPeerRemoteSSRF(t *testing.T) {
	st := openTestStore(t)
	guard, err := ssrf.NewGuard(ssrf.GuardOptions{AllowHosts: []string{"127.0.0.2"}})
	if err != nil {
		t.Fatal(err)
	}
	h := relay.New(st, relay.Config{OperatorToken: operatorToken, PublicURL: "http://relay.test",
		CheckRemote: func(ctx context.Context, raw string) error {
			_, err := guard.CheckCallback(raw) // no DNS in tests: literal checks only
			return err
		}})
	srv := httptest.NewServer(h.Handler())
	t.Cleanup(srv.Close)
	e := &env{t: t, st: st, srv: srv, url: srv.URL}
	pid, tok := e.newProject("")
	for _, tc := range []struct {
		remote string
		status int
	}{
		{"http://169.254.169.254", 400},
		{"http://127.0.0.1:18080", 400},
		{"http://[::1]", 400},
		{"http://localhost:8080", 400},
		{"http://127.1", 400},
		{"http://10.0.0.7", 400},
		{"http://[::ffff:127.0.0.1]", 400},
		{"http://127.0.0.2:9000", 201}, // allowlisted
		{"https://relay-b.example.org", 201},
	} {
		r := e.do("POST", "/v1/admin/projects/"+pid+"/peers", tok, []byte(`{"remote_url":"`+tc.remote+`","token":"acr_x"}`))
		if r.Status != tc.status {
			t.Errorf("%s: %d %s, want %d", tc.remote, r.Status, r.Body, tc.status)
			continue
		}
		if tc.status == 400 && r.code(t) != "remote_url_invalid" {
			t.Errorf("%s: code %q", tc.remote, r.code(t))
		}
	}
	peers, err := st.Peers(context.Background(), pid)
	if err != nil || len(peers) != 2 {
		t.Fatalf("stored peers %+v %v, want the two allowed", peers, err)
	}
}
