package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// lockedBuffer is a bytes.Buffer a child process writes while the test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestBenchHonoursRetryAfter: against a relay with the default per-token
// write rate (100/s, burst 200), more posts than the burst are throttled
// with 429 and Retry-After; the bench waits, retries the same event and
// reports the throttling apart: no errors (every post was answered 2xx
// in the end), throttling counted and timed.
func TestBenchHonoursRetryAfter(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a relay process")
	}
	dir := filepath.Dir(benchBinary(t))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	relay := exec.Command(filepath.Join(dir, "acrelay"), "serve", "--addr", addr, "--data-dir", t.TempDir(), "--log-level", "warn")
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ACRELAY_RATE_") { // the defaults, as an operator runs it
			env = append(env, kv)
		}
	}
	relay.Env = env
	out := &lockedBuffer{}
	relay.Stdout = out
	if err := relay.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = relay.Process.Kill(); _ = relay.Wait() })
	tokenRe := regexp.MustCompile(`project token:\s+(acr_\S+)`)
	var token string
	for deadline := time.Now().Add(30 * time.Second); token == ""; {
		if m := tokenRe.FindStringSubmatch(out.String()); m != nil {
			if res, err := http.Get("http://" + addr + "/healthz"); err == nil {
				res.Body.Close()
				token = m[1]
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("relay did not start:\n%s", out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}

	var results bytes.Buffer
	const events = 400
	if err := runBench(context.Background(), benchConfig{URL: "http://" + addr, Token: token, Events: events, Clients: 8, Rounds: 1, JSON: true}, &results); err != nil {
		t.Fatal(err)
	}
	var r benchResult
	if err := json.Unmarshal(bytes.TrimSpace(results.Bytes()), &r); err != nil {
		t.Fatalf("result %q: %v", results.String(), err)
	}
	if r.Events != events || r.Errors != 0 || r.Throttled == 0 || r.ThrottledWaitMs <= 0 {
		t.Fatalf("events %d, errors %d, throttled %d (%.0f ms): want %d, 0, some", r.Events, r.Errors, r.Throttled, r.ThrottledWaitMs, events)
	}
}
