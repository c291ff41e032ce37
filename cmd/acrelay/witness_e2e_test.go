package main

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	acrtlog "github.com/acrelay/acrelay/tlog"
	"github.com/acrelay/acrelay/witness"
)

// TestFederationWitnessE2E: two `acrelay serve` processes share a project
// and link both ways (B on PostgreSQL in the second run). After A's
// records reach B, A's checkpoint, read through its public routes,
// carries B's cosignature: it verifies with the log key A publishes
// (/v1/log-key) and the witness key B publishes (/v1/witness-key), at the
// size of every record.
func TestFederationWitnessE2E(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test builds and runs the binary; skipped with -short")
	}
	bin := acrelayBinary(t)
	t.Run("sqlite", func(t *testing.T) { testWitnessE2E(t, bin, []string{"--data-dir", t.TempDir()}) })
	t.Run("postgres", func(t *testing.T) { testWitnessE2E(t, bin, postgresArgs(t)) })
}

func getPlain(url, token string) (int, string) {
	req, _ := http.NewRequest("GET", url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

func testWitnessE2E(t *testing.T, bin string, bStore []string) {
	const op = "witness-operator-token"
	args := append(append([]string{}, fedArgs...), "--federation-witness-interval", "200ms")
	a := startRelay(t, bin, append([]string{"--data-dir", t.TempDir()}, args...), "ACRELAY_OPERATOR_TOKEN="+op)
	b := startRelay(t, bin, append(append([]string{}, bStore...), args...), "ACRELAY_OPERATOR_TOKEN="+op)
	p := registerProject(t, a.url, op)
	if st, m := httpJSON(t, "POST", b.url+"/v1/admin/projects", op, map[string]any{"project_id": p.id}); st != 201 {
		t.Fatalf("create the shared project on B: %d %v", st, m)
	}
	_, m := httpJSON(t, "POST", b.url+"/v1/admin/projects/"+p.id+"/tokens", op, map[string]any{"scopes": []string{"read"}})
	readB := m["token"].(string)
	_, m = httpJSON(t, "POST", a.url+"/v1/admin/projects/"+p.id+"/tokens", op, map[string]any{"scopes": []string{"read"}})
	readA := m["token"].(string)
	for _, l := range []struct{ on, remote, token string }{{b.url, a.url, readA}, {a.url, b.url, readB}} {
		if st, m := httpJSON(t, "POST", l.on+"/v1/admin/projects/"+p.id+"/peers", op, map[string]any{"remote_url": l.remote, "token": l.token}); st != 201 {
			t.Fatalf("peer add on %s: %d %v", l.on, st, m)
		}
	}
	const n = 5
	for range n {
		p.post(t, a.url, "witnessed")
	}
	waitCount(t, b.url, readB, p.id, n, 20*time.Second)

	st, logKey := getPlain(a.url+"/v1/log-key", "")
	lv, err := note.NewVerifier(strings.TrimSpace(logKey))
	if st != http.StatusOK || err != nil {
		t.Fatalf("A's /v1/log-key: %d %q %v", st, logKey, err)
	}
	st, wkey := getPlain(b.url+witness.KeyPath, "")
	wv, err := witness.NewVerifier(strings.TrimSpace(wkey))
	if st != http.StatusOK || err != nil {
		t.Fatalf("B's %s: %d %q %v", witness.KeyPath, st, wkey, err)
	}
	origin := acrtlog.Origin(a.url, p.id)
	deadline := time.Now().Add(30 * time.Second)
	last := ""
	for time.Now().Before(deadline) {
		st, body := getPlain(a.url+"/v1/log/"+p.id+"/checkpoint", readA)
		c, _, cs, err := witness.OpenCosigned([]byte(body), lv, origin, []note.Verifier{wv}, time.Now(), time.Minute)
		if st == http.StatusOK && err == nil && c.Size == n && len(cs) == 1 {
			return
		}
		last = fmt.Sprintf("%d %q: %v", st, body, err)
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("A's checkpoint never carried B's cosignature at size %d: last %s", n, last)
}
