package main

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/acrelay/acrelay/canonicaljson"
	"github.com/acrelay/acrelay/correspondence"
)

// testProject registers a project, a token, an identity and a key through
// the admin API of the relay at url.
type testProject struct {
	id, token, identity, key string
	priv                     ed25519.PrivateKey
	seq                      int64
	session                  string
}

func registerProject(t *testing.T, url, op string) *testProject {
	t.Helper()
	_, m := httpJSON(t, "POST", url+"/v1/admin/projects", op, map[string]any{})
	p := &testProject{id: m["project_id"].(string), session: newTestUUID()}
	_, m = httpJSON(t, "POST", url+"/v1/admin/projects/"+p.id+"/tokens", op, map[string]any{"scopes": []string{"read", "append", "admin"}})
	p.token = m["token"].(string)
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	p.priv = priv
	_, m = httpJSON(t, "POST", url+"/v1/admin/projects/"+p.id+"/identities", p.token, map[string]any{})
	p.identity = m["identity_id"].(string)
	_, m = httpJSON(t, "POST", url+"/v1/admin/identities/"+p.identity+"/keys", p.token, map[string]any{"public_key_b64url": correspondence.EncodePublicKey(pub)})
	p.key = m["signing_key_id"].(string)
	return p
}

func (p *testProject) post(t *testing.T, url, summary string) string {
	t.Helper()
	id, status := p.send(t, url, summary)
	if status != 201 {
		t.Fatalf("post: %d", status)
	}
	return id
}

// postStatus posts a new event and returns the answer's status.
func (p *testProject) postStatus(t *testing.T, url, summary string) int {
	t.Helper()
	_, status := p.send(t, url, summary)
	return status
}

func (p *testProject) send(t *testing.T, url, summary string) (string, int) {
	t.Helper()
	id, status, err := p.trySend(url, summary)
	if err != nil {
		t.Fatal(err)
	}
	return id, status
}

// trySend posts a new event signed by p's key to the relay at url and
// returns its event_id and the answer's status, or the transport error (a
// relay that died): it is safe to call from any goroutine.
func (p *testProject) trySend(url, summary string) (string, int, error) {
	p.seq++
	ev := &correspondence.Event{ProjectID: p.id, RepositoryID: "repo:mp", ThreadID: "t",
		Sender: correspondence.Sender{IdentityID: p.identity, SigningKeyID: p.key, DeviceID: p.session, SessionID: p.session},
		Kind:   correspondence.KindProgress, Parents: []string{}, SessionSeq: p.seq,
		IssuedAt: correspondence.FormatTimestamp(time.Now()), Scope: correspondence.Scope{Paths: []string{"."}},
		Body: canonicaljson.ObjectValue(canonicaljson.Member{Name: "summary", Value: canonicaljson.StringValue(summary)})}
	if err := ev.Sign(p.priv); err != nil {
		return "", 0, err
	}
	b, _ := ev.CanonicalJSON()
	req, _ := http.NewRequest("POST", url+"/v1/correspondence/events", bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+p.token)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return ev.ID, 0, err
	}
	res.Body.Close()
	return ev.ID, res.StatusCode, nil
}

func postgresArgs(t *testing.T) []string {
	t.Helper()
	if testing.Short() {
		t.Skip("multi-process test builds and runs the binary; skipped with -short")
	}
	url := os.Getenv("ACRELAY_TEST_DATABASE_URL")
	if url == "" {
		t.Skip("ACRELAY_TEST_DATABASE_URL not set; scripts/test.sh provisions a throwaway PostgreSQL")
	}
	if postgresOpener == nil {
		t.Skip("PostgreSQL store not built in")
	}
	return []string{"--database-url", freshDatabase(t, url)}
}

// TestTwoProcessesWake: an event appended through process A reaches an SSE
// subscriber connected to process B within one second (LISTEN/NOTIFY as
// invalidation only).
func TestTwoProcessesWake(t *testing.T) {
	args := postgresArgs(t)
	bin := acrelayBinary(t)
	const op = "mp-operator-token"
	a := startRelay(t, bin, args, "ACRELAY_OPERATOR_TOKEN="+op)
	b := startRelay(t, bin, args, "ACRELAY_OPERATOR_TOKEN="+op)
	p := registerProject(t, a.url, op)

	req, _ := http.NewRequest("GET", b.url+"/v1/wake/voice?identity_id="+p.identity+"&keys=correspondence", nil)
	req.Header.Set("Authorization", "Bearer "+p.token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("wake on B: %d", res.StatusCode)
	}
	frames := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			if line := sc.Text(); strings.HasPrefix(line, "data: ") {
				frames <- strings.TrimPrefix(line, "data: ")
			}
		}
		close(frames)
	}()
	// Warm up until B's LISTEN and the subscription are in place: post
	// through A until a frame arrives on B (no fixed sleep: a slow machine
	// may take longer than any guess).
	seq := 0
	deadline := time.After(20 * time.Second)
warmup:
	for {
		p.post(t, a.url, "warm-up "+strconv.Itoa(seq))
		seq++
		select {
		case <-frames:
			break warmup
		case <-time.After(250 * time.Millisecond):
		case <-deadline:
			t.Fatal("no change frame on B within 20s of posting through A")
		}
	}
	for i := 0; i < 3; i++ {
		posted := time.Now()
		p.post(t, a.url, "through A "+strconv.Itoa(i))
		seq++
		want := strconv.Itoa(seq)
		timeout := time.After(time.Second)
	frame:
		for {
			select {
			case f, ok := <-frames:
				if !ok {
					t.Fatal("B's stream ended")
				}
				var m map[string]any
				if err := json.Unmarshal([]byte(f), &m); err != nil {
					t.Fatalf("frame %q", f)
				}
				if m["_format"] != "wake_event/v1" {
					t.Fatalf("frame %s", f)
				}
				if _, hasBody := m["event"]; hasBody {
					t.Fatal("a wake frame carries the event")
				}
				ctx := m["context"].(map[string]any)
				if ctx["received_seq"] != want {
					continue // a late frame of the warm-up
				}
				t.Logf("POST on A → change frame on B in %v", time.Since(posted))
				break frame
			case <-timeout:
				t.Fatalf("no change frame for received_seq %s on B within 1s of its POST on A", want)
			}
		}
	}
}

// TestCourierLeaseHandover: two processes run the export courier on one
// database; exactly one holds the lease; SIGKILL of the holder hands the
// lease over within its lease time and the successor resumes from the
// durable cursor with nothing lost.
func TestCourierLeaseHandover(t *testing.T) {
	args := postgresArgs(t)
	bin := acrelayBinary(t)
	const op = "lease-operator-token"
	dir := t.TempDir()
	courier := []string{"--export-dir", dir, "--courier-lease", "2s"}
	a := startRelay(t, bin, append(append([]string{}, args...), courier...), "ACRELAY_OPERATOR_TOKEN="+op)
	p := registerProject(t, a.url, op)
	file := filepath.Join(dir, p.id+".jsonl")
	var ids []string
	for i := 0; i < 5; i++ {
		ids = append(ids, p.post(t, a.url, "before "+strconv.Itoa(i)))
	}
	waitLines(t, file, ids, 5*time.Second)

	b := startRelay(t, bin, append(append([]string{}, args...), courier...), "ACRELAY_OPERATOR_TOKEN="+op)
	for i := 0; i < 5; i++ {
		ids = append(ids, p.post(t, b.url, "while A holds "+strconv.Itoa(i)))
	}
	waitLines(t, file, ids, 5*time.Second)
	linesBefore := countLines(t, file)
	if linesBefore != len(ids) {
		t.Fatalf("%d lines for %d events while one process held the lease: two deliverers?", linesBefore, len(ids))
	}

	killed := time.Now()
	_ = a.cmd.Process.Signal(syscall.SIGKILL)
	_ = a.cmd.Wait()
	for i := 0; i < 5; i++ {
		ids = append(ids, p.post(t, b.url, "after the kill "+strconv.Itoa(i)))
	}
	waitLines(t, file, ids, 10*time.Second)
	t.Logf("successor delivered everything %v after SIGKILL of the holder (lease 2s)", time.Since(killed).Round(10*time.Millisecond))
}

func countLines(t *testing.T, file string) int {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	return bytes.Count(b, []byte("\n"))
}

// waitLines waits until the export file holds every id (duplicates are
// allowed: delivery is at-least-once).
func waitLines(t *testing.T, file string, ids []string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		b, _ := os.ReadFile(file)
		missing := 0
		for _, id := range ids {
			if !bytes.Contains(b, []byte(`"event_id":"`+id+`"`)) {
				missing++
			}
		}
		if missing == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d events not exported within %v", missing, len(ids), within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestExportCourierResumesAfterRestart (SQLite): the durable cursor means
// a restarted relay exports only what it had not, and loses nothing.
func TestExportCourierResumesAfterRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary; skipped with -short")
	}
	bin := acrelayBinary(t)
	const op = "export-operator-token"
	data, dir := t.TempDir(), t.TempDir()
	args := []string{"--data-dir", data, "--export-dir", dir, "--courier-lease", "1s"}
	a := startRelay(t, bin, args, "ACRELAY_OPERATOR_TOKEN="+op)
	p := registerProject(t, a.url, op)
	file := filepath.Join(dir, p.id+".jsonl")
	var ids []string
	for i := 0; i < 5; i++ {
		ids = append(ids, p.post(t, a.url, "first run "+strconv.Itoa(i)))
	}
	waitLines(t, file, ids, 5*time.Second)
	_ = a.cmd.Process.Signal(os.Interrupt)
	_ = a.cmd.Wait()
	b := startRelay(t, bin, args, "ACRELAY_OPERATOR_TOKEN="+op)
	for i := 0; i < 5; i++ {
		ids = append(ids, p.post(t, b.url, "second run "+strconv.Itoa(i)))
	}
	waitLines(t, file, ids, 5*time.Second)
	if n := countLines(t, file); n != len(ids) {
		b, _ := os.ReadFile(file)
		for i, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
			t.Logf("line %d: %.120s", i, line)
		}
		t.Logf("ids %v", ids)
		t.Fatalf("%d lines for %d events after a clean restart", n, len(ids))
	}
	// Every line is the immutable record JSON.
	b2, _ := os.ReadFile(file)
	for _, line := range bytes.Split(bytes.TrimSpace(b2), []byte("\n")) {
		if _, err := canonicaljson.Parse(line); err != nil || !bytes.HasPrefix(line, []byte(`{"event":{`)) {
			t.Fatalf("line is not record JSON: %s", line)
		}
	}
}
