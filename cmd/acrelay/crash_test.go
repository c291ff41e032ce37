package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/acrelay/acrelay/internal/pgtest"

	_ "modernc.org/sqlite"

	"github.com/acrelay/acrelay/canonicaljson"
	"github.com/acrelay/acrelay/correspondence"
)

// buildBinary builds acrelay once per test binary run.
var buildOnce struct {
	sync.Once
	path string
	err  error
}

// TestMain removes the binary acrelayBinary built (28 MB a run).
func TestMain(m *testing.M) {
	code := m.Run()
	if buildOnce.path != "" {
		os.RemoveAll(filepath.Dir(buildOnce.path))
	}
	os.Exit(code)
}

func acrelayBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "acrelay-bin-")
		if err != nil {
			buildOnce.err = err
			return
		}
		buildOnce.path = filepath.Join(dir, "acrelay")
		out, err := exec.Command("go", "build", "-tags", "goolm", "-o", buildOnce.path, ".").CombinedOutput()
		if err != nil {
			buildOnce.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildOnce.err != nil {
		t.Fatal(buildOnce.err)
	}
	return buildOnce.path
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

type relayProc struct {
	cmd *exec.Cmd
	url string
}

func startRelay(t *testing.T, bin string, args []string, env ...string) *relayProc {
	t.Helper()
	addr := freeAddr(t)
	cmd := exec.Command(bin, append([]string{"serve", "--addr", addr, "--log-level", "warn"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	stderr := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = io.Discard, stderr
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

func httpJSON(t *testing.T, method, url, token string, in any) (int, map[string]any) {
	t.Helper()
	var body io.Reader
	if in != nil {
		b, _ := json.Marshal(in)
		body = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, url, body)
	req.Header.Set("Authorization", "Bearer "+token)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(res.Body).Decode(&m)
	return res.StatusCode, m
}

type acked struct {
	eventID, seq, at string
}

// crashUnderLoad runs 16 clients against a relay, SIGKILLs it mid-load,
// restarts it on the same store and checks that every event that got a 2xx
// is present with its original receipt and that received_seq is strictly
// increasing (issue 3 item 7; issue 5 item 5).
func crashUnderLoad(t *testing.T, storeArgs []string) {
	bin := acrelayBinary(t)
	const op = "crash-test-operator-token"
	p := startRelay(t, bin, storeArgs, "ACRELAY_OPERATOR_TOKEN="+op)
	_, m := httpJSON(t, "POST", p.url+"/v1/admin/projects", op, map[string]any{})
	pid := m["project_id"].(string)
	_, m = httpJSON(t, "POST", p.url+"/v1/admin/projects/"+pid+"/tokens", op, map[string]any{"scopes": []string{"read", "append", "admin"}})
	tok := m["token"].(string)
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	_, m = httpJSON(t, "POST", p.url+"/v1/admin/projects/"+pid+"/identities", tok, map[string]any{})
	ident := m["identity_id"].(string)
	_, m = httpJSON(t, "POST", p.url+"/v1/admin/identities/"+ident+"/keys", tok, map[string]any{"public_key_b64url": correspondence.EncodePublicKey(pub)})
	key := m["signing_key_id"].(string)

	var mu sync.Mutex
	var got []acked
	stop := make(chan struct{})
	var wg sync.WaitGroup
	client := &http.Client{Timeout: 10 * time.Second}
	for c := 0; c < 16; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			session := newTestUUID()
			for i := 1; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				ev := &correspondence.Event{ProjectID: pid, RepositoryID: "repo:crash", ThreadID: "t" + strconv.Itoa(c),
					Sender: correspondence.Sender{IdentityID: ident, SigningKeyID: key, DeviceID: session, SessionID: session},
					Kind:   correspondence.KindProgress, Parents: []string{}, SessionSeq: int64(i),
					IssuedAt: correspondence.FormatTimestamp(time.Now()), Scope: correspondence.Scope{Paths: []string{"."}},
					Body: canonicaljson.ObjectValue(canonicaljson.Member{Name: "summary", Value: canonicaljson.StringValue("step " + strconv.Itoa(i))})}
				if err := ev.Sign(priv); err != nil {
					panic(err)
				}
				b, _ := ev.CanonicalJSON()
				req, _ := http.NewRequest("POST", p.url+"/v1/correspondence/events", bytes.NewReader(b))
				req.Header.Set("Authorization", "Bearer "+tok)
				req.Header.Set("Content-Type", "application/json")
				res, err := client.Do(req)
				if err != nil {
					return // the relay died
				}
				var out struct {
					Receipt struct {
						Seq string `json:"received_seq"`
						At  string `json:"received_at"`
					} `json:"receipt"`
				}
				_ = json.NewDecoder(res.Body).Decode(&out)
				res.Body.Close()
				if res.StatusCode/100 == 2 {
					mu.Lock()
					got = append(got, acked{ev.ID, out.Receipt.Seq, out.Receipt.At})
					mu.Unlock()
				}
			}
		}(c)
	}
	time.Sleep(1500 * time.Millisecond)
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = p.cmd.Wait()
	close(stop)
	wg.Wait()
	if len(got) < 50 {
		t.Fatalf("only %d events acknowledged before the kill; load too light to mean anything", len(got))
	}

	p2 := startRelay(t, bin, storeArgs, "ACRELAY_OPERATOR_TOKEN="+op)
	stored := map[string]acked{}
	var lastSeq int64
	after := ""
	for {
		q := "/v1/correspondence/events?repository_id=repo:crash&limit=200"
		if after != "" {
			q += "&after=" + after
		}
		_, page := httpJSON(t, "GET", p2.url+q, tok, nil)
		for _, r := range page["events"].([]any) {
			rec := r.(map[string]any)
			rc := rec["receipt"].(map[string]any)
			seq, _ := strconv.ParseInt(rc["received_seq"].(string), 10, 64)
			if seq <= lastSeq {
				t.Fatalf("received_seq not strictly increasing: %d after %d", seq, lastSeq)
			}
			lastSeq = seq
			id := rec["event"].(map[string]any)["event_id"].(string)
			stored[id] = acked{id, rc["received_seq"].(string), rc["received_at"].(string)}
		}
		pg := page["page"].(map[string]any)
		if !pg["has_more"].(bool) {
			break
		}
		after = pg["next_after"].(string)
	}
	for _, a := range got {
		s, ok := stored[a.eventID]
		if !ok {
			t.Fatalf("event %s got a 2xx before the crash but is gone", a.eventID)
		}
		if s != a {
			t.Fatalf("receipt changed across the crash: %+v vs %+v", a, s)
		}
	}
	t.Logf("%d events acknowledged before SIGKILL; %d stored after restart; all acknowledged present with their receipts", len(got), len(stored))
	_ = p2.cmd.Process.Signal(os.Interrupt)
	_ = p2.cmd.Wait()
}

func TestCrashUnderLoadSQLite(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test builds and runs the binary; skipped with -short")
	}
	dir := t.TempDir()
	crashUnderLoad(t, []string{"--data-dir", dir})
	db, err := sql.Open("sqlite", filepath.Join(dir, "acrelay.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var res string
	if err := db.QueryRowContext(context.Background(), "PRAGMA integrity_check").Scan(&res); err != nil {
		t.Fatal(err)
	}
	if res != "ok" {
		t.Fatalf("integrity_check: %s", res)
	}
}

func TestCrashUnderLoadPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test builds and runs the binary; skipped with -short")
	}
	url := os.Getenv("ACRELAY_TEST_DATABASE_URL")
	if url == "" {
		t.Skip("ACRELAY_TEST_DATABASE_URL not set; scripts/test.sh provisions a throwaway PostgreSQL")
	}
	if postgresOpener == nil {
		t.Skip("PostgreSQL store not built in")
	}
	crashUnderLoad(t, []string{"--database-url", freshDatabase(t, url)})
}

// freshDatabase returns the URL of a throwaway database (pgtest).
func freshDatabase(t *testing.T, _ string) string { return pgtest.FreshDatabase(t) }

// newTestUUID returns a random UUID (version 4), such as a session id.
func newTestUUID() string { return uuid.NewString() }
