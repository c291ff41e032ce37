package federation

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/acrelay/acrelay/store"
)

// TestCosignRefusalSaidOnceBackoff: a remote answering 403 to our
// cosignatures (a one-way link) is said once at WARN, then offered again
// after 5 s, 10 s, 20 s … up to an hour; an accepted one forgets it.
func TestCosignRefusalSaidOnceBackoff(t *testing.T) {
	var logs bytes.Buffer
	m := &Manager{}
	l := &link{peer: store.Peer{ID: "peer-1"}, log: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))}
	t0 := time.Date(2026, 12, 6, 20, 0, 0, 0, time.UTC)
	if !m.cosignDue("peer-1", t0) {
		t.Fatal("a first cosignature is not due")
	}
	now := t0
	var waits []time.Duration
	for range 12 {
		m.cosignRefusedNow(l, now)
		next := m.refused["peer-1"].next
		if m.cosignDue("peer-1", next.Add(-time.Second)) || !m.cosignDue("peer-1", next) {
			t.Fatalf("due before %s, or not at it", next)
		}
		waits = append(waits, next.Sub(now))
		now = next
	}
	want := []time.Duration{5 * time.Second, 10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second, 160 * time.Second,
		320 * time.Second, 640 * time.Second, 1280 * time.Second, 2560 * time.Second, time.Hour, time.Hour}
	for i := range want {
		if waits[i] != want[i] {
			t.Fatalf("waits %v, want %v", waits, want)
		}
	}
	if n := strings.Count(logs.String(), "level=WARN"); n != 1 || strings.Count(logs.String(), "\n") != 1 {
		t.Fatalf("%d WARN lines in:\n%s", n, logs.String())
	}
	m.cosignAccepted(l)
	if !m.cosignDue("peer-1", now) || !strings.Contains(logs.String(), "now accepts") {
		t.Fatalf("not forgotten after acceptance:\n%s", logs.String())
	}
}
