package federation_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acrelay/acrelay/store/storetest"
)

// TestRegistrySyncBacksOff: a peer whose remote answers every request
// with 404 (a misconfigured remote_url) is asked for its key registry
// less and less often — the wait doubles from KeysInterval up to
// PollInterval — instead of once per KeysInterval for ever (found by a
// hostile newcomer: a WARN line every 2 s per peer). With KeysInterval
// 20 ms and PollInterval 400 ms, 2 s hold at most 9 attempts (20, 40,
// 80, 160, 320, then every 400 ms); without the backoff, about 100.
func TestRegistrySyncBacksOff(t *testing.T) {
	var keys atomic.Int64
	remote := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/v1/correspondence/keys") {
			keys.Add(1)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"error":"not_found","message":"no such project"}`))
	}))
	defer remote.Close()
	tm := timing{poll: 400 * time.Millisecond, idlePoll: time.Minute, keys: 20 * time.Millisecond, subLease: time.Hour}
	pid := storetest.NewUUID()
	b := startRelay(t, "B", openStore(t, "sqlite", tempDB(t, "b")), "127.0.0.1:0", tm)
	b.project(pid)
	status, body := b.do("POST", "/v1/admin/projects/"+pid+"/peers", operatorToken,
		map[string]any{"remote_url": remote.URL, "token": "remote-read-token"})
	if status != http.StatusCreated {
		t.Fatalf("peer add: %d %s", status, body)
	}
	eventually(t, 10*time.Second, "a first registry request", func() (bool, string) { return keys.Load() > 0, "" })
	start := keys.Load()
	time.Sleep(2 * time.Second)
	if n := keys.Load() - start; n > 12 || n < 2 {
		t.Fatalf("registry requests in 2 s after the first: %d, want 2..12 (backing off to one per 400 ms)", n)
	}
}
