package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// fedArgs are the serve flags of a federation test relay: loopback
// callbacks allowed, short polls and leases.
var fedArgs = []string{"--websub-allow-hosts", "127.0.0.1", "--federation-poll", "200ms", "--federation-idle-poll", "2s",
	"--federation-keys-interval", "300ms", "--courier-lease", "2s", "--websub-retry-initial", "100ms", "--websub-retry-max", "500ms"}

// countEvents reads how many records of project pid the relay at url
// serves through the project-wide replay.
func countEvents(t *testing.T, url, token, pid string) int {
	t.Helper()
	n, after := 0, ""
	for {
		q := "/v1/correspondence/events?project_id=" + pid + "&limit=200"
		if after != "" {
			q += "&after=" + after
		}
		req, _ := http.NewRequest("GET", url+q, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return -1
		}
		var page struct {
			Events []json.RawMessage `json:"events"`
			Page   struct {
				NextAfter *string `json:"next_after"`
				HasMore   bool    `json:"has_more"`
			} `json:"page"`
		}
		_ = json.NewDecoder(res.Body).Decode(&page)
		res.Body.Close()
		n += len(page.Events)
		if !page.Page.HasMore || page.Page.NextAfter == nil {
			return n
		}
		after = *page.Page.NextAfter
	}
}

func waitCount(t *testing.T, url, token, pid string, want int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	got := 0
	for time.Now().Before(deadline) {
		if got = countEvents(t, url, token, pid); got == want {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s holds %d records of the project, want %d", url, got, want)
}

// TestFederationRestartCatchesUp runs two acrelay serve processes (A on
// SQLite; B on PostgreSQL when ACRELAY_TEST_DATABASE_URL is set, else
// SQLite) linked both ways through the admin routes. B is stopped, A keeps
// taking events, B restarts on the same store and address and catches up
// from its durable remote cursor; events posted on B after the restart
// reach A. acrelay peer list on the stopped B shows the link with the
// token redacted.
func TestFederationRestartCatchesUp(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test builds and runs the binary; skipped with -short")
	}
	bin := acrelayBinary(t)
	const op = "fed-operator-token"
	aArgs := append([]string{"--data-dir", t.TempDir()}, fedArgs...)
	bStore := []string{"--data-dir", t.TempDir()}
	if url := os.Getenv("ACRELAY_TEST_DATABASE_URL"); url != "" && postgresOpener != nil {
		bStore = []string{"--database-url", freshDatabase(t, url)}
	}
	bArgs := append(append([]string{}, bStore...), fedArgs...)
	a := startRelay(t, bin, aArgs, "ACRELAY_OPERATOR_TOKEN="+op)
	bAddr := freeAddr(t)
	b := startRelayAt(t, bin, bAddr, bArgs, "ACRELAY_OPERATOR_TOKEN="+op)

	p := registerProject(t, a.url, op)
	if st, m := httpJSON(t, "POST", b.url+"/v1/admin/projects", op, map[string]any{"project_id": p.id}); st != 201 {
		t.Fatalf("create the shared project on B: %d %v", st, m)
	}
	_, m := httpJSON(t, "POST", b.url+"/v1/admin/projects/"+p.id+"/tokens", op, map[string]any{"scopes": []string{"read"}})
	readB := m["token"].(string)
	_, m = httpJSON(t, "POST", a.url+"/v1/admin/projects/"+p.id+"/tokens", op, map[string]any{"scopes": []string{"read"}})
	readA := m["token"].(string)
	if st, m := httpJSON(t, "POST", b.url+"/v1/admin/projects/"+p.id+"/peers", op, map[string]any{"remote_url": a.url, "token": readA}); st != 201 || m["token"] != "[redacted]" {
		t.Fatalf("peer add on B: %d %v", st, m)
	}
	if st, m := httpJSON(t, "POST", a.url+"/v1/admin/projects/"+p.id+"/peers", op, map[string]any{"remote_url": b.url, "token": readB}); st != 201 {
		t.Fatalf("peer add on A: %d %v", st, m)
	}
	for i := range 5 {
		p.post(t, a.url, "before "+string(rune('a'+i)))
	}
	waitCount(t, b.url, readB, p.id, 5, 15*time.Second)

	// Partition: B stops; A goes on.
	_ = b.cmd.Process.Signal(syscall.SIGTERM)
	_ = b.cmd.Wait()
	for i := range 20 {
		p.post(t, a.url, "during "+string(rune('a'+i)))
	}
	if bStore[0] == "--data-dir" {
		out, err := exec.Command(bin, "peer", "list", "--data-dir", bStore[1], "--json").CombinedOutput()
		if err != nil || !bytes.Contains(out, []byte(`"token":"[redacted]"`)) || bytes.Contains(out, []byte(readA)) {
			t.Fatalf("acrelay peer list: %v\n%s", err, out)
		}
	}
	b = startRelayAt(t, bin, bAddr, bArgs, "ACRELAY_OPERATOR_TOKEN="+op)
	waitCount(t, b.url, readB, p.id, 25, 20*time.Second)

	// B → A after the restart: an agent of A posting through B (its key
	// is on B as imported from A).
	_, m = httpJSON(t, "POST", b.url+"/v1/admin/projects/"+p.id+"/tokens", op, map[string]any{"scopes": []string{"append"}})
	tokenA := p.token
	p.token = m["token"].(string)
	p.post(t, b.url, "through B")
	p.token = tokenA
	waitCount(t, a.url, readA, p.id, 26, 20*time.Second)
	time.Sleep(time.Second)
	if n := countEvents(t, b.url, readB, p.id); n != 26 {
		t.Fatalf("B holds %d, want 26", n)
	}
}

// startRelayAt is startRelay on a given address (a restart keeps it, so
// the callback URL the remote's hub knows stays this relay's).
func startRelayAt(t *testing.T, bin, addr string, args []string, env ...string) *relayProc {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"serve", "--addr", addr, "--log-level", "warn"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	var stderr syncBuffer
	cmd.Stdout, cmd.Stderr = nil, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &relayProc{cmd: cmd, url: "http://" + addr}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if res, err := http.Get(p.url + "/healthz"); err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				return p
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("relay did not start: %s", stderr.String())
	return nil
}

// TestFederationSetupAndRevocation runs two acrelay serve processes (A on
// SQLite; B on SQLite, and on PostgreSQL when ACRELAY_TEST_DATABASE_URL is
// set) with backfill polls a minute apart and the registry interval at its
// default. Events posted to A every 50 ms from before B's link exists
// until 3 s after it was made (so through the link's first backfill,
// subscription and verification) are all on B within 2 s of the last
// post: no record waits for a poll. Then A's agent key works on B
// (imported), is revoked on A, and 5 s later an event signed by it is
// refused on B (403), while B keeps the history it signed before.
func TestFederationSetupAndRevocation(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test builds and runs the binary; skipped with -short")
	}
	bin := acrelayBinary(t)
	t.Run("sqlite", func(t *testing.T) { testSetupAndRevocation(t, bin, []string{"--data-dir", t.TempDir()}) })
	t.Run("postgres", func(t *testing.T) { testSetupAndRevocation(t, bin, postgresArgs(t)) })
}

func testSetupAndRevocation(t *testing.T, bin string, bStore []string) {
	const op = "fed-operator-token"
	args := []string{"--websub-allow-hosts", "127.0.0.1", "--federation-poll", "1m", "--federation-idle-poll", "1m",
		"--courier-lease", "2s", "--websub-retry-initial", "100ms", "--websub-retry-max", "500ms"}
	a := startRelay(t, bin, append([]string{"--data-dir", t.TempDir()}, args...), "ACRELAY_OPERATOR_TOKEN="+op)
	b := startRelay(t, bin, append(append([]string{}, bStore...), args...), "ACRELAY_OPERATOR_TOKEN="+op)
	p := registerProject(t, a.url, op)
	if st, m := httpJSON(t, "POST", b.url+"/v1/admin/projects", op, map[string]any{"project_id": p.id}); st != 201 {
		t.Fatalf("create the shared project on B: %d %v", st, m)
	}
	_, m := httpJSON(t, "POST", b.url+"/v1/admin/projects/"+p.id+"/tokens", op, map[string]any{"scopes": []string{"read", "append"}})
	tokenB := m["token"].(string)
	_, m = httpJSON(t, "POST", a.url+"/v1/admin/projects/"+p.id+"/tokens", op, map[string]any{"scopes": []string{"read"}})
	readA := m["token"].(string)

	n := 0
	for range 3 {
		p.post(t, a.url, "before the link")
		n++
	}
	if st, m := httpJSON(t, "POST", b.url+"/v1/admin/projects/"+p.id+"/peers", op, map[string]any{"remote_url": a.url, "token": readA}); st != 201 {
		t.Fatalf("peer add on B: %d %v", st, m)
	}
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); n++ {
		p.post(t, a.url, "while the link is made")
		time.Sleep(50 * time.Millisecond)
	}
	waitCount(t, b.url, tokenB, p.id, n, 2*time.Second)

	// A's key is on B as imported: an event signed by it is taken there.
	tokenA := p.token
	p.token = tokenB
	p.post(t, b.url, "through B")
	n++
	p.token = tokenA
	if st, m := httpJSON(t, "POST", a.url+"/v1/admin/keys/"+p.key+"/revoke", p.token, nil); st != 200 {
		t.Fatalf("revoke on A: %d %v", st, m)
	}
	revoked := time.Now()
	time.Sleep(time.Until(revoked.Add(5 * time.Second)))
	p.token = tokenB
	if st := p.postStatus(t, b.url, "after the revocation"); st != http.StatusForbidden {
		t.Fatalf("an event signed by the key revoked on A 5 s ago: %d on B, want 403", st)
	}
	p.token = tokenA
	if got := countEvents(t, b.url, tokenB, p.id); got != n {
		t.Fatalf("B holds %d records after the revocation, want the %d it had", got, n)
	}
}
