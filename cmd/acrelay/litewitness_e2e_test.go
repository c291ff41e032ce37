package main

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	fnote "github.com/transparency-dev/formats/note"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/acrelay/acrelay/correspondence"
)

// liteWitness is a litewitness (filippo.io/torchwood, C2SP tlog-witness)
// on a loopback port, with its own ssh-agent holding its key, behind a
// counting proxy: the witness the relay is configured with is the proxy.
type liteWitness struct {
	bin, dir, db string
	name, vkey   string
	proxy        *httptest.Server

	mu    sync.Mutex
	olds  []string // the "old N" line of every add-checkpoint request, in order
	codes []int
}

// startLiteWitness starts ssh-agent, litewitness and the proxy; all
// stop at the test's end. It skips when ACRELAY_LITEWITNESS_BIN is unset.
func startLiteWitness(t *testing.T) *liteWitness {
	t.Helper()
	bin := os.Getenv("ACRELAY_LITEWITNESS_BIN")
	if bin == "" {
		t.Skip("litewitness not provisioned: set ACRELAY_LITEWITNESS_BIN (scripts/test.sh provisions it: scripts/provision_litewitness.sh)")
	}
	for _, tool := range []string{"ssh-agent", "ssh-add", "ssh-keygen"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skip("litewitness needs " + tool + " (openssh-client)")
		}
	}
	// A short directory: the agent's socket path must fit sun_path.
	dir, err := os.MkdirTemp("", "lw")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	lw := &liteWitness{bin: bin, dir: dir, db: filepath.Join(dir, "lw.db"), name: "witness.test/litewitness"}
	run := func(name string, args ...string) string {
		t.Helper()
		out, err := exec.Command(name, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
		return string(out)
	}
	key := filepath.Join(dir, "key")
	run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "litewitness", "-f", key)
	fp := strings.Fields(run("ssh-keygen", "-l", "-E", "sha256", "-f", key+".pub"))[1]
	sock := filepath.Join(dir, "s")
	agent := exec.Command("ssh-agent", "-D", "-a", sock)
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = agent.Process.Kill(); _ = agent.Wait() })
	waitFor(t, 10*time.Second, func() bool { _, err := os.Stat(sock); return err == nil })
	add := exec.Command("ssh-add", key)
	add.Env = append(os.Environ(), "SSH_AUTH_SOCK="+sock)
	if out, err := add.CombinedOutput(); err != nil {
		t.Fatalf("ssh-add: %v\n%s", err, out)
	}
	addr := freeAddr(t)
	cmd := exec.Command(filepath.Join(bin, "litewitness"), "-listen", addr, "-ssh-agent", sock, "-name", lw.name, "-key", fp, "-db", lw.db)
	var stderr syncBuffer
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Signal(os.Interrupt); _ = cmd.Wait() })
	vkeyRE := regexp.MustCompile(`msg="verifier key" vkey=(\S+)`)
	waitFor(t, 20*time.Second, func() bool {
		m := vkeyRE.FindStringSubmatch(stderr.String())
		if m == nil {
			return false
		}
		lw.vkey = m[1]
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	target := "http://" + addr
	lw.proxy = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, target+r.URL.Path, bytes.NewReader(body))
		req.Header = r.Header.Clone()
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		answer, _ := io.ReadAll(resp.Body)
		if r.URL.Path == "/add-checkpoint" {
			first, _, _ := strings.Cut(string(body), "\n")
			lw.mu.Lock()
			lw.olds, lw.codes = append(lw.olds, first), append(lw.codes, resp.StatusCode)
			lw.mu.Unlock()
		}
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(answer)
	}))
	t.Cleanup(lw.proxy.Close)
	return lw
}

// flag is the relay's --log-witness value for this witness (through the
// proxy, with a trailing "/").
func (lw *liteWitness) flag() string { return lw.vkey + " " + lw.proxy.URL + "/" }

// addLog registers a log with the witness (witnessctl add-log, add-key),
// as its operator would.
func (lw *liteWitness) addLog(t *testing.T, origin, logVkey string) {
	t.Helper()
	for _, args := range [][]string{{"add-log", "-db", lw.db, "-origin", origin}, {"add-key", "-db", lw.db, "-origin", origin, "-key", logVkey}} {
		if out, err := exec.Command(filepath.Join(lw.bin, "witnessctl"), args...).CombinedOutput(); err != nil {
			t.Fatalf("witnessctl %v: %v\n%s", args, err, out)
		}
	}
}

// requests returns the "old" lines and statuses seen so far.
func (lw *liteWitness) requests() ([]string, []int) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return append([]string(nil), lw.olds...), append([]int(nil), lw.codes...)
}

func waitFor(t *testing.T, within time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s", within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// cosignedCheckpoint reads the project's checkpoint (plain HTTP, no
// acrelay code) until it is of size and carries a cosignature by the
// witness, verified with x/mod's note and transparency-dev/formats'
// cosignature/v1 verifier; within bounds the wait.
func cosignedCheckpoint(t *testing.T, url, projectID, token, logVkey, witnessVkey string, size int64, within time.Duration) (note.Signature, time.Duration) {
	t.Helper()
	lv, err := note.NewVerifier(logVkey)
	if err != nil {
		t.Fatal(err)
	}
	wv, err := fnote.NewVerifierForCosignatureV1(witnessVkey)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var last string
	for time.Since(start) < within {
		req, _ := http.NewRequest("GET", url+"/v1/log/"+projectID+"/checkpoint", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			last = string(b)
			if n, err := note.Open(b, note.VerifierList(lv, wv)); err == nil {
				lines := strings.Split(n.Text, "\n")
				var got int64
				fmt.Sscan(lines[1], &got)
				for _, s := range n.Sigs {
					if s.Name == wv.Name() && s.Hash == wv.KeyHash() && got == size {
						if at, err := fnote.CoSigV1Timestamp(s); err != nil || time.Since(at) > time.Minute {
							t.Fatalf("cosignature time %v, %v", at, err)
						}
						if root, err := tlog.ParseHash(lines[2]); err != nil || len(lines) != 4 || root == (tlog.Hash{}) {
							t.Fatalf("checkpoint text %q", n.Text)
						}
						return s, time.Since(start)
					}
				}
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("no checkpoint of size %d cosigned by %s within %s; last served:\n%s", size, wv.Name(), within, last)
	return note.Signature{}, 0
}

// registerPublicProject is registerProject for a public project (the
// witnesses' default scope).
func registerPublicProject(t *testing.T, url, op string) *testProject {
	t.Helper()
	status, m := httpJSON(t, "POST", url+"/v1/admin/projects", op, map[string]any{"visibility": "public"})
	if status != 201 || m["visibility"] != "public" {
		t.Fatalf("public project: %d %v", status, m)
	}
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

func logKeyOf(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url + "/v1/log-key")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return strings.TrimSpace(string(b))
}

func stopRelay(t *testing.T, p *relayProc) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	_ = p.cmd.Wait()
}

func olds(lines []string) string { return strings.Join(lines, ",") }

// TestLogWitnessLitewitness: `serve --log-witness` with a real
// litewitness (C2SP tlog-witness) as the witness, on each engine. A
// public project's checkpoint is served carrying litewitness's
// cosignature within 30 s of its records (default pacing), verified with
// x/mod's note and transparency-dev/formats, not acrelay's code; later
// checkpoints go with the consistency proof from the size the witness
// holds; a restarted process (SQLite) and a second process on PostgreSQL
// resume from the stored size (the witness sees "old 0" only once); and
// a stored size behind the witness's gets its 409 text/x.tlog.size
// answer and resubmits from the size it names.
func TestLogWitnessLitewitness(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary and litewitness; skipped with -short")
	}
	lw := startLiteWitness(t)
	bin := acrelayBinary(t)
	const op = "lw-operator-token"
	for _, eng := range logEngines(t) {
		t.Run(eng.name, func(t *testing.T) {
			seen, _ := lw.requests()
			from := len(seen)
			addrA := freeAddr(t)
			args := append([]string{"--public-url", "http://" + addrA, "--log-witness", lw.flag()}, eng.args...)
			a := startRelayAt(t, bin, addrA, args, "ACRELAY_OPERATOR_TOKEN="+op)
			p := registerPublicProject(t, a.url, op)
			logVkey := logKeyOf(t, a.url)
			origin := addrA + "/" + p.id
			lw.addLog(t, origin, logVkey)

			for i := range 5 {
				p.post(t, a.url, fmt.Sprintf("event %d", i))
			}
			_, took := cosignedCheckpoint(t, a.url, p.id, "", logVkey, lw.vkey, 5, 30*time.Second)
			t.Logf("size 5 cosigned by litewitness %s after the last 201", took.Round(time.Millisecond))
			for i := range 3 {
				p.post(t, a.url, fmt.Sprintf("more %d", i))
			}
			cosignedCheckpoint(t, a.url, p.id, "", logVkey, lw.vkey, 8, 30*time.Second)

			// Another process takes over: a restart on SQLite, a second
			// serve on PostgreSQL (started beside A, A then stopped).
			next := a
			if eng.name == "postgres" {
				addrB := freeAddr(t)
				next = startRelayAt(t, bin, addrB, args, "ACRELAY_OPERATOR_TOKEN="+op)
				stopRelay(t, a)
			} else {
				stopRelay(t, a)
				next = startRelayAt(t, bin, addrA, args, "ACRELAY_OPERATOR_TOKEN="+op)
			}
			p.post(t, next.url, "after the handover")
			p.post(t, next.url, "after the handover 2")
			cosignedCheckpoint(t, next.url, p.id, "", logVkey, lw.vkey, 10, 30*time.Second)
			got, codes := lw.requests()
			got, codes = got[from:], codes[from:]
			if got[0] != "old 0" || strings.Count(olds(got), "old 0") != 1 {
				t.Fatalf("add-checkpoint old lines %s: want one \"old 0\", the first", olds(got))
			}
			for i, c := range codes {
				if c != 200 {
					t.Fatalf("request %d (%s) answered %d; all: %v", i, got[i], c, codes)
				}
			}
			t.Logf("requests: %s", olds(got))

			// The stored size falls behind the witness's (as after a
			// restore): the witness answers 409 with its size, the relay
			// resubmits from it.
			stopRelay(t, next)
			eng.exec(t, `UPDATE log_witness_states SET known_size = 0, cosigned_size = 0 WHERE project_id = ?`,
				`UPDATE log_witness_states SET known_size = 0, cosigned_size = 0 WHERE project_id = $1`, p.id)
			last := startRelayAt(t, bin, next.url[len("http://"):], args, "ACRELAY_OPERATOR_TOKEN="+op)
			p.post(t, last.url, "after the rollback")
			cosignedCheckpoint(t, last.url, p.id, "", logVkey, lw.vkey, 11, 30*time.Second)
			all, codes := lw.requests()
			tail, tailCodes := all[from+len(got):], codes[from+len(got):]
			// (old 10 twice when the pass ran before record 11 was
			// integrated: tree 10 again, then 11.)
			if !(olds(tail) == "old 0,old 10" && fmt.Sprint(tailCodes) == "[409 200]" || olds(tail) == "old 0,old 10,old 10" && fmt.Sprint(tailCodes) == "[409 200 200]") {
				t.Fatalf("after the rollback: %s answered %v; want old 0 → 409, old 10 → 200", olds(tail), tailCodes)
			}

			// The operator's view.
			stopRelay(t, last)
			view, err := exec.Command(bin, append([]string{"log", "witnesses"}, eng.args...)...).CombinedOutput()
			if err != nil {
				t.Fatalf("log witnesses: %v\n%s", err, view)
			}
			row := regexp.MustCompile(p.id + ` +` + regexp.QuoteMeta(lw.name) + ` +11 +\S+Z +11 +-\n`)
			if !strings.HasPrefix(string(view), "PROJECT ") || !row.Match(view) {
				t.Fatalf("acrelay log witnesses:\n%s", view)
			}
		})
	}
}

// TestRelayWitnessesRelay: one acrelay as the C2SP witness of another's
// log through the two flags: B lists A's project log (serve --witness-log
// '<origin> <vkey>'), A submits to B (serve --log-witness '<B's witness
// key> <B>/v1/witness/'); A serves its checkpoint with B's cosignature,
// verified with x/mod's note and transparency-dev/formats.
func TestRelayWitnessesRelay(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary; skipped with -short")
	}
	bin := acrelayBinary(t)
	const op = "rw-operator-token"
	// A first, without witnesses, to learn its log key and a project's
	// origin; then B, listing it; then A again, submitting to B.
	addrA, addrB := freeAddr(t), freeAddr(t)
	dirA := t.TempDir()
	argsA := []string{"--data-dir", dirA, "--public-url", "http://" + addrA}
	a := startRelayAt(t, bin, addrA, argsA, "ACRELAY_OPERATOR_TOKEN="+op)
	p := registerPublicProject(t, a.url, op)
	logVkey := logKeyOf(t, a.url)
	stopRelay(t, a)
	b := startRelayAt(t, bin, addrB, []string{"--data-dir", t.TempDir(), "--witness-log", addrA + "/" + p.id + " " + logVkey},
		"ACRELAY_OPERATOR_TOKEN="+op)
	resp, err := http.Get(b.url + "/v1/witness-key")
	if err != nil {
		t.Fatal(err)
	}
	wk, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	witnessVkey := strings.TrimSpace(string(wk))
	a = startRelayAt(t, bin, addrA, append(argsA, "--log-witness", witnessVkey+" "+b.url+"/v1/witness/"), "ACRELAY_OPERATOR_TOKEN="+op)
	for i := range 4 {
		p.post(t, a.url, fmt.Sprintf("event %d", i))
	}
	sig, took := cosignedCheckpoint(t, a.url, p.id, "", logVkey, witnessVkey, 4, 30*time.Second)
	if sig.Name != addrB+"/witness" {
		t.Fatalf("cosigned by %q", sig.Name)
	}
	t.Logf("size 4 cosigned by relay B %s after the last 201", took.Round(time.Millisecond))
}
