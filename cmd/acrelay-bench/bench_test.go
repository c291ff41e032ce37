package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"io"
	"math"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acrelay/acrelay/canonicaljson"
	"github.com/acrelay/acrelay/correspondence"
)

// TestBenchRounds runs the load tool end to end, small (it starts its own
// relay processes): two rounds of group commit interleaved with one
// transaction per event, then the median of each. It checks the shape of
// what the tool reports, not how fast this machine is.
func TestBenchRounds(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four relay processes")
	}
	bin := benchBinary(t)
	cmd := exec.Command(bin, "--events", "200", "--clients", "4", "--rounds", "2", "--compare-one-tx", "--json")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("acrelay-bench: %v\n%s", err, stderr.String())
	}
	var results []benchResult
	var ratio string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, `{"comparison"`) {
			ratio = line
			continue
		}
		if strings.HasPrefix(line, "{") {
			var r benchResult
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatalf("result line %q: %v", line, err)
			}
			results = append(results, r)
			continue
		}
		t.Errorf("--json printed a line that is not JSON: %q", line)
	}
	// Round 1 (group, one-tx), round 2 (group, one-tx), then the medians.
	wantLabels := []string{
		"sqlite group commit", "sqlite one-tx-per-event", "sqlite group commit", "sqlite one-tx-per-event",
		"sqlite group commit, median of 2 rounds", "sqlite one-tx-per-event, median of 2 rounds",
	}
	if len(results) != len(wantLabels) {
		t.Fatalf("%d result lines, want %d:\n%s", len(results), len(wantLabels), out)
	}
	for i, r := range results {
		if r.Label != wantLabels[i] {
			t.Errorf("line %d label %q, want %q", i, r.Label, wantLabels[i])
		}
		if r.Events != 200 || r.Clients != 4 || r.Errors != 0 {
			t.Errorf("line %d: %d events, %d clients, %d errors; want 200, 4, 0", i, r.Events, r.Clients, r.Errors)
		}
		if r.EventsPerSecond <= 0 || r.CeilingPerSec <= 0 || r.P99Millis < r.P50Millis || r.RatioToCeiling <= 0 {
			t.Errorf("line %d: implausible figures %+v", i, r)
		}
		if wantRounds := map[bool]int{true: 2, false: 0}[i >= 4]; r.Rounds != wantRounds {
			t.Errorf("line %d: rounds %d, want %d", i, r.Rounds, wantRounds)
		}
	}
	// Each median lies within its rounds.
	for i := 0; i < 2; i++ {
		a, b, m := results[i].EventsPerSecond, results[i+2].EventsPerSecond, results[i+4].EventsPerSecond
		if m != (a+b)/2 {
			t.Errorf("median events/s %v of %v and %v, want their mean", m, a, b)
		}
	}
	var cmp struct {
		Comparison string  `json:"comparison"`
		Ratio      float64 `json:"ratio"`
	}
	if err := json.Unmarshal([]byte(ratio), &cmp); err != nil || cmp.Comparison != "group commit / one-tx-per-event" ||
		math.Abs(cmp.Ratio-results[4].EventsPerSecond/results[5].EventsPerSecond) > 0.001 {
		t.Errorf("last line %q (%v), want the group commit / one-tx ratio of the medians as JSON", ratio, err)
	}
}

// TestBenchBounds: --compare-http-bound and --compare-durable-bound
// each measure their bound after the relay, with no errors (every event
// verified, and stored by the durable one), and report the relay's share
// of it.
func TestBenchBounds(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two server processes")
	}
	for _, c := range []struct{ flag, label string }{
		{"--compare-http-bound", "http bound (no store)"},
		{"--compare-durable-bound", "durable bound (log + fdatasync)"},
	} {
		cmd := exec.Command(benchBinary(t), "--events", "200", "--clients", "4", c.flag, "--json")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("acrelay-bench %s: %v\n%s", c.flag, err, stderr.String())
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if len(lines) != 3 {
			t.Fatalf("%s: %d lines, want 3:\n%s", c.flag, len(lines), out)
		}
		for i, want := range []string{"sqlite group commit", c.label} {
			var r benchResult
			if err := json.Unmarshal([]byte(lines[i]), &r); err != nil {
				t.Fatalf("line %q: %v", lines[i], err)
			}
			if r.Label != want || r.Events != 200 || r.Errors != 0 || r.EventsPerSecond <= 0 {
				t.Errorf("%s line %d: %+v; want label %q, 200 events, no errors", c.flag, i, r, want)
			}
		}
		if want := `{"comparison":"relay / ` + c.label + `","ratio":`; !strings.HasPrefix(lines[2], want) {
			t.Errorf("%s: last line %q, want %q…", c.flag, lines[2], want)
		}
	}
}

// TestBenchBoundHandler: the bound does the ceiling's work for real: a
// signed event is accepted, a tampered one or one under another project
// is refused, and every route needs its token.
func TestBenchBoundHandler(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "bound.log")
	blog, err := openBoundLog(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer blog.close()
	srv := httptest.NewServer(newBoundHandler("op-token", blog))
	defer srv.Close()
	call := func(path, token, body string) (int, map[string]any) {
		t.Helper()
		return httpJSON(t, "POST", srv.URL+path, token, json.RawMessage(body))
	}
	if code, _ := call("/v1/admin/projects", "wrong", "{}"); code != 401 {
		t.Fatalf("project with a wrong token: %d, want 401", code)
	}
	_, m := call("/v1/admin/projects", "op-token", "{}")
	pid, _ := m["project_id"].(string)
	_, m = call("/v1/admin/projects/"+pid+"/tokens", "op-token", `{"scopes":["read","append","admin"]}`)
	tok, _ := m["token"].(string)
	if code, _ := call("/v1/admin/projects", tok, "{}"); code != 401 {
		t.Fatalf("project with the project token: %d, want 401 (operator only)", code)
	}
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	if code, _ := call("/v1/admin/identities/x/keys", tok, `{"public_key_b64url":"`+correspondence.EncodePublicKey(pub)+`"}`); code != 201 {
		t.Fatalf("key: %d, want 201", code)
	}
	event := func(projectID, summary string) string {
		ev := &correspondence.Event{
			ProjectID: projectID, RepositoryID: "repo:bench", ThreadID: "t",
			Sender: correspondence.Sender{IdentityID: newBenchUUID(), SigningKeyID: newBenchUUID(), DeviceID: newBenchUUID(), SessionID: newBenchUUID()},
			Kind:   correspondence.KindProgress, Parents: []string{}, SessionSeq: 1, IssuedAt: correspondence.FormatTimestamp(time.Now()),
			Scope: correspondence.Scope{Paths: []string{"docs"}},
			Body:  canonicaljson.ObjectValue(canonicaljson.Member{Name: "summary", Value: canonicaljson.StringValue(summary)}),
		}
		if err := ev.Sign(priv); err != nil {
			t.Fatal(err)
		}
		b, err := ev.CanonicalJSON()
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	good := event(pid, "hello")
	code, m := call("/v1/correspondence/events", tok, good)
	if id, _ := m["event_id"].(string); code != 201 || !strings.HasPrefix(id, "sha256:") || !strings.Contains(good, id) {
		t.Fatalf("signed event: %d %v, want 201 with its event_id", code, m)
	}
	if b, err := os.ReadFile(logPath); err != nil || !bytes.HasPrefix(b, []byte(good+"\n\x00")) {
		t.Fatalf("durable log after one 201: %q… (%v), want exactly the canonical event", b[:min(len(b), 80)], err)
	}
	if code, _ := call("/v1/correspondence/events", "wrong", good); code != 401 {
		t.Fatalf("event with a wrong token: %d, want 401", code)
	}
	if code, _ := call("/v1/correspondence/events", tok, strings.Replace(good, "hello", "hullo", 1)); code != 400 && code != 403 {
		t.Fatalf("tampered event: %d, want 400 or 403", code)
	}
	if code, _ := call("/v1/correspondence/events", tok, event(newBenchUUID(), "other project")); code != 403 {
		t.Fatalf("event of another project: %d, want 403", code)
	}
	if b, err := os.ReadFile(logPath); err != nil || !bytes.HasPrefix(b, []byte(good+"\n\x00")) {
		t.Fatalf("durable log after refused events: %q… (%v), want only the accepted event", b[:min(len(b), 80)], err)
	}
}

// TestBenchCompareNeedsOwnServers: the comparisons start their own
// servers, so with --url they are refused rather than measuring the
// external relay twice.
func TestBenchCompareNeedsOwnServers(t *testing.T) {
	for _, c := range []benchConfig{
		{URL: "http://127.0.0.1:1", Events: 1, Clients: 1, Rounds: 1, CompareOneTx: true},
		{URL: "http://127.0.0.1:1", Events: 1, Clients: 1, Rounds: 1, CompareBound: true},
		{URL: "http://127.0.0.1:1", Events: 1, Clients: 1, Rounds: 1, CompareDurable: true},
	} {
		err := runBench(context.Background(), c, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "not with --url") {
			t.Fatalf("%+v: %v, want the --url refusal", c, err)
		}
	}
}

// TestBenchServerArgs: each run starts the server it is labelled as; the
// durable bound gets its directory, and only relays get the database.
func TestBenchServerArgs(t *testing.T) {
	const addr, dir, db = "127.0.0.1:1", "/tmp/d", "postgres://x"
	for _, c := range []struct {
		maxBatch int
		db       string
		want     string
	}{
		{0, "", "serve --addr 127.0.0.1:1 --data-dir /tmp/d --log-level warn"},
		{1, "", "serve --addr 127.0.0.1:1 --data-dir /tmp/d --log-level warn --sqlite-max-batch 1"},
		{0, db, "serve --addr 127.0.0.1:1 --data-dir /tmp/d --log-level warn --database-url postgres://x"},
		{boundRun, db, "http-bound --addr 127.0.0.1:1"},
		{durableBoundRun, db, "http-bound --addr 127.0.0.1:1 --durable-dir /tmp/d"},
	} {
		if got := strings.Join(benchServerArgs(c.maxBatch, addr, dir, c.db), " "); got != c.want {
			t.Errorf("maxBatch %d, database %q:\n got %s\nwant %s", c.maxBatch, c.db, got, c.want)
		}
	}
}

// TestBenchServerExitsEarly: a server that exits before it is healthy
// (here: a relay on an unreachable database) fails the bench at once,
// naming it, and leaves no directory behind.
func TestBenchServerExitsEarly(t *testing.T) {
	before, _ := filepath.Glob(filepath.Join(os.TempDir(), "acrelay-bench-*"))
	start := time.Now()
	cmd := exec.Command(benchBinary(t), "--events", "10", "--clients", "1", "--database-url", "postgres://nobody@127.0.0.1:1/none")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), `bench server "serve" exited before it became healthy`) {
		t.Fatalf("bench against a relay that cannot start: %v\n%s", err, out)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %v: the bench waited for a server that had exited", d)
	}
	after, _ := filepath.Glob(filepath.Join(os.TempDir(), "acrelay-bench-*"))
	if len(after) > len(before) {
		t.Errorf("directories left behind: %v (before: %v)", after, before)
	}
}

// TestBenchAB: --relay-bin-b measures a second relay binary in every
// round after the first and reports each one's ratio to the durable bound
// and B / A, all from the same run.
func TestBenchAB(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three server processes")
	}
	bin := benchBinary(t)
	relay := filepath.Join(filepath.Dir(bin), "acrelay")
	cmd := exec.Command(bin, "--events", "200", "--clients", "4", "--relay-bin", relay, "--relay-bin-b", relay, "--compare-durable-bound", "--json")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("acrelay-bench: %v\n%s", err, stderr.String())
	}
	var labels, comparisons []string
	for line := range strings.Lines(strings.TrimSpace(string(out))) {
		var r struct {
			Label      string  `json:"label"`
			Errors     int64   `json:"errors"`
			Comparison string  `json:"comparison"`
			Ratio      float64 `json:"ratio"`
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		if r.Comparison != "" {
			if r.Ratio <= 0 {
				t.Errorf("%s: ratio %v", r.Comparison, r.Ratio)
			}
			comparisons = append(comparisons, r.Comparison)
			continue
		}
		if r.Errors != 0 {
			t.Errorf("%s: %d errors", r.Label, r.Errors)
		}
		labels = append(labels, r.Label)
	}
	wantLabels := []string{"sqlite group commit (A)", "sqlite group commit (B)", "durable bound (log + fdatasync)"}
	wantCmp := []string{"relay A / durable bound (log + fdatasync)", "relay B / durable bound (log + fdatasync)", "B / A"}
	if !slices.Equal(labels, wantLabels) || !slices.Equal(comparisons, wantCmp) {
		t.Errorf("results %q and comparisons %q, want %q and %q", labels, comparisons, wantLabels, wantCmp)
	}
}
