package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// pingHomeserver is a homeserver's edge of the appservice ping
// (POST /_matrix/client/v1/appservice/{id}/ping, Matrix v1.7): on each
// ping it POSTs the registration's url /_matrix/app/v1/ping with the
// hs_token, as Synapse does. The first ping it answers 502 without
// trying (a homeserver still starting), then for real.
type pingHomeserver struct {
	asURL, hsToken, asID string
	mu                   sync.Mutex
	pings                []int // per ping: the listener's status, or 0 when not tried
}

func (h *pingHomeserver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == "GET" && r.URL.Path == "/_matrix/client/v3/account/whoami":
		_, _ = io.WriteString(w, `{"user_id":"@acrelay:acrelay.test"}`)
	case r.Method == "POST" && r.URL.Path == "/_matrix/client/v1/appservice/"+h.asID+"/ping":
		h.mu.Lock()
		first := len(h.pings) == 0
		h.mu.Unlock()
		status := 0
		if !first {
			req, _ := http.NewRequest("POST", h.asURL+"/_matrix/app/v1/ping", bytes.NewReader([]byte(`{"transaction_id":"t"}`)))
			req.Header.Set("Authorization", "Bearer "+h.hsToken)
			req.Header.Set("Content-Type", "application/json")
			if res, err := http.DefaultClient.Do(req); err == nil {
				status = res.StatusCode
				res.Body.Close()
			}
		}
		h.mu.Lock()
		h.pings = append(h.pings, status)
		h.mu.Unlock()
		if status != 200 {
			w.WriteHeader(502)
			_, _ = io.WriteString(w, `{"errcode":"M_CONNECTION_FAILED","error":"appservice unreachable"}`)
			return
		}
		_, _ = io.WriteString(w, `{"duration_ms":3}`)
	default:
		w.WriteHeader(404)
		_, _ = io.WriteString(w, `{"errcode":"M_UNRECOGNIZED","error":"Unrecognized request"}`)
	}
}

func (h *pingHomeserver) seen() []int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]int(nil), h.pings...)
}

// TestServeAppservicePing: serve (the real binary, application-service
// mode) asks the homeserver to ping it once its listener is up, and asks
// again after a failed ping; the homeserver's ping reaches the listener
// with the hs_token and gets 200. Dendrite 0.13.8 has no ping endpoint,
// hence a homeserver's edge here.
func TestServeAppservicePing(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary; skipped with -short")
	}
	bin := acrelayBinary(t)
	asAddr := freeAddr(t)
	out, err := exec.Command(bin, "matrix", "registration", "--url", "http://"+asAddr, "--homeserver-name", "acrelay.test", "--id", "acrelay-ping").Output()
	if err != nil {
		t.Fatalf("matrix registration: %v", err)
	}
	regPath := filepath.Join(t.TempDir(), "reg.yaml")
	if err := os.WriteFile(regPath, out, 0o600); err != nil {
		t.Fatal(err)
	}
	fake := &pingHomeserver{asURL: "http://" + asAddr, hsToken: yamlValue(t, string(out), "hs_token"), asID: "acrelay-ping"}
	hs := httptest.NewServer(fake)
	defer hs.Close()
	startRelay(t, bin, []string{"--data-dir", filepath.Join(t.TempDir(), "data"), "--matrix-homeserver", hs.URL, "--matrix-registration", regPath},
		"ACRELAY_OPERATOR_TOKEN=ping-test-operator-token")
	deadline := time.Now().Add(20 * time.Second)
	for len(fake.seen()) < 2 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(3 * time.Second) // a third ping would come within 2 s
	got, _ := json.Marshal(fake.seen())
	if string(got) != "[0,200]" {
		t.Fatalf("pings (the listener's status each) = %s, want [0,200]: one refused, then one answered, then no more", got)
	}
}
