package main

import (
	"context"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/acrelay/acrelay/relay"
	"github.com/acrelay/acrelay/sequencer"
	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/sqlite"
	acrtlog "github.com/acrelay/acrelay/tlog"
)

const auditOperator = "audit-operator-token-not-a-secret"

// auditRelay is the real relay in this process over SQLite, with a log
// key and a sequencer the test runs when it wants a new checkpoint.
type auditRelay struct {
	url, dbPath string
	st          store.Store
	key         acrtlog.LogKey
	seq         *sequencer.Sequencer
}

func newAuditRelay(t *testing.T) *auditRelay {
	t.Helper()
	ctx := context.Background()
	ar := &auditRelay{dbPath: filepath.Join(t.TempDir(), "acrelay.db")}
	var err error
	if ar.st, err = sqlite.Open(ctx, ar.dbPath, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ar.st.Close() })
	skey, _, err := acrtlog.NewLogKey("relay.test")
	if err != nil {
		t.Fatal(err)
	}
	if ar.key, err = acrtlog.OpenLogKey(skey); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ar.url = "http://" + ln.Addr().String()
	srv := httptest.NewUnstartedServer(relay.New(ar.st, relay.Config{OperatorToken: auditOperator, PublicURL: ar.url, LogVerifierKey: ar.key.VerifierKey}).Handler())
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	ar.seq = sequencer.New(ar.st, sequencer.Options{PublicURL: ar.url, Key: ar.key})
	return ar
}

func (ar *auditRelay) integrate(t *testing.T, pid string) store.TreeHead {
	t.Helper()
	h, err := ar.seq.Integrate(context.Background(), pid)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func b64(h [32]byte) string { return base64.StdEncoding.EncodeToString(h[:]) }

// TestAuditCommand: acrelay audit on a relay in this process — the first
// run pins the key (trusted on first use) and checks every entry; the next
// proves consistency and checks the new entries; a record edited in the
// store is caught by --all with exit status 1 and the failure named; a
// state holding a checkpoint of another history gets both notes printed
// as split-view evidence; a --log-key other than the pinned one is refused.
func TestAuditCommand(t *testing.T) {
	ar := newAuditRelay(t)
	p := registerProject(t, ar.url, auditOperator)
	for i := range 10 {
		p.post(t, ar.url, fmt.Sprintf("event %d", i))
	}
	h10 := ar.integrate(t, p.id)
	state := filepath.Join(t.TempDir(), "audit.json")
	args := []string{"--url", ar.url, "--project", p.id, "--token", p.token, "--state", state}
	origin := acrtlog.Origin(ar.url, p.id)

	stdout, stderr, err := runAgent(t, newAuditCmd(), "", args...)
	if err != nil {
		t.Fatalf("first audit: %v\n%s%s", err, stdout, stderr)
	}
	want := "log key      " + ar.key.VerifierKey + "\n" +
		"origin       " + origin + "\n" +
		"checkpoint   size 10, root " + b64(h10.Root) + ": signature verified\n" +
		"consistency  first audit: no earlier checkpoint\n" +
		"entries      received_seq 1..10: 10 checked (leaf hash, canonical record, received_seq)\n" +
		"OK\n"
	if stdout != want {
		t.Fatalf("first audit:\n%s\nwant\n%s", stdout, want)
	}
	if stderr != "acrelay: note: trusting the relay's log key on first use: "+ar.key.VerifierKey+" (pin it with --log-key or --state)\n" {
		t.Fatalf("stderr %q", stderr)
	}

	for i := 10; i < 15; i++ {
		p.post(t, ar.url, fmt.Sprintf("event %d", i))
	}
	h15 := ar.integrate(t, p.id)
	stdout, stderr, err = runAgent(t, newAuditCmd(), "", args...)
	want = "log key      " + ar.key.VerifierKey + "\n" +
		"origin       " + origin + "\n" +
		"checkpoint   size 15, root " + b64(h15.Root) + ": signature verified\n" +
		"consistency  size 10 → 15: proved\n" +
		"entries      received_seq 11..15: 5 checked (leaf hash, canonical record, received_seq)\n" +
		"OK\n"
	if err != nil || stdout != want || stderr != "" {
		t.Fatalf("second audit: %v\n%s\nwant\n%s\nstderr %q", err, stdout, want, stderr)
	}
	kept, err := os.ReadFile(state)
	if err != nil || !strings.Contains(string(kept), `"entries_checked": 15`) {
		t.Fatalf("state %s, %v", kept, err)
	}

	// One byte of record 3 changed in the store: an audit reads the
	// bundle holding the new entries, which holds record 3 too (fails),
	// and --all reads every entry (fails).
	raw, err := sql.Open("sqlite", ar.dbPath)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`UPDATE events SET canonical = CAST(replace(CAST(canonical AS TEXT), 'event 2', 'event X') AS BLOB) WHERE project_id = ? AND received_seq = 3`, p.id); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	var ee *exitError
	if _, _, err := runAgent(t, newAuditCmd(), "", args...); !errors.As(err, &ee) || ee.code != 1 {
		t.Fatalf("audit after the edit: %v, want exit 1", err)
	}
	stdout, _, err = runAgent(t, newAuditCmd(), "", append(args, "--all")...)
	if !errors.As(err, &ee) || ee.code != 1 {
		t.Fatalf("audit --all after the edit: %v, want exit 1\n%s", err, stdout)
	}
	wantTail := "consistency  size 15 unchanged, same root\n" +
		"entries      2 of received_seq 1..15 checked before the failure\n" +
		"FAIL         record not included in the log: entry 2 (received_seq 3) of bundle tile/entries/000.p/15 does not hash to the tree's leaf\n"
	if !strings.HasSuffix(stdout, wantTail) {
		t.Fatalf("audit --all output:\n%s\nwant the tail\n%s", stdout, wantTail)
	}
	if after, _ := os.ReadFile(state); string(after) != string(kept) {
		t.Fatal("a failed audit changed the state")
	}

	// A state holding a checkpoint of size 15 with another root, signed by
	// the log key (what a relay showing this reader another history would
	// have given it).
	forged, err := acrtlog.SignCheckpoint(ar.key.Signer, acrtlog.Checkpoint{Origin: origin, Size: 15, Root: tlog.RecordHash([]byte("another history"))})
	if err != nil {
		t.Fatal(err)
	}
	forkState := filepath.Join(t.TempDir(), "fork.json")
	if err := os.WriteFile(forkState, []byte(fmt.Sprintf(`{"origin":%q,"log_key":%q,"checkpoint":%q}`, origin, ar.key.VerifierKey, forged)), 0o600); err != nil {
		t.Fatal(err)
	}
	stdout, _, err = runAgent(t, newAuditCmd(), "", "--url", ar.url, "--project", p.id, "--token", p.token, "--state", forkState)
	if !errors.As(err, &ee) || ee.code != 1 || !strings.Contains(stdout, `"reason": "two roots for one tree size"`) ||
		!strings.Contains(stdout, fmt.Sprintf("%q", string(forged))[1:20]) || !strings.Contains(stdout, "FAIL         split view of log "+origin+": two roots for one tree size") {
		t.Fatalf("forked state: %v\n%s", err, stdout)
	}

	// A --log-key other than the pinned one.
	_, other, _ := acrtlog.NewLogKey("relay.test")
	stdout, _, err = runAgent(t, newAuditCmd(), "", append(args, "--log-key", other)...)
	if !errors.As(err, &ee) || ee.code != 1 || !strings.HasPrefix(stdout, "FAIL         --log-key "+other+" is not the key pinned in "+state) {
		t.Fatalf("other key: %v\n%s", err, stdout)
	}
}

// TestAuditCommandPublicWithoutToken: a public project is audited with
// no token at all; a private one without a token is a refusal (exit 1).
func TestAuditCommandPublicWithoutToken(t *testing.T) {
	ar := newAuditRelay(t)
	p := registerProject(t, ar.url, auditOperator)
	p.post(t, ar.url, "one")
	ar.integrate(t, p.id)
	t.Setenv("ACRELAY_TOKEN", "")
	_, _, err := runAgent(t, newAuditCmd(), "", "--url", ar.url, "--project", p.id, "--log-key", ar.key.VerifierKey)
	var ee *exitError
	if !errors.As(err, &ee) || !strings.Contains(err.Error(), "relay answered 401 unauthorized") {
		t.Fatalf("private without a token: %v", err)
	}
	if status, _ := httpJSON(t, "PATCH", ar.url+"/v1/admin/projects/"+p.id, auditOperator, map[string]any{"visibility": "public"}); status != http.StatusOK {
		t.Fatalf("make public: %d", status)
	}
	stdout, _, err := runAgent(t, newAuditCmd(), "", "--url", ar.url, "--project", p.id, "--log-key", ar.key.VerifierKey)
	if err != nil || !strings.HasSuffix(stdout, "entries      received_seq 1..1: 1 checked (leaf hash, canonical record, received_seq)\nOK\n") {
		t.Fatalf("public: %v\n%s", err, stdout)
	}
}

// TestFollowVerifyLog: follow --verify-log prints the records whose
// inclusion holds, waiting for the sequencer's next checkpoint when a
// record is newer, and ends with exit status 1 at a record edited in the
// store after it was logged.
func TestFollowVerifyLog(t *testing.T) {
	ar := newAuditRelay(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); _ = ar.seq.Run(ctx) }()
	defer func() { cancel(); <-done }()
	p := registerProject(t, ar.url, auditOperator)
	for i := range 4 {
		p.post(t, ar.url, fmt.Sprintf("event %d", i))
	}
	follow := func(after string) (string, error) {
		fctx, fcancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer fcancel()
		cmd := newFollowCmd()
		var out, errb syncBuffer
		cmd.SetArgs([]string{"--url", ar.url, "--token", p.token, "--repository-id", "repo:mp", "--identity-id", p.identity,
			"--after", after, "--verify-log", "--log-key", ar.key.VerifierKey})
		cmd.SetOut(&out)
		cmd.SetErr(&errb)
		cmd.SilenceErrors, cmd.SilenceUsage = true, true
		errc := make(chan error, 1)
		go func() { errc <- cmd.ExecuteContext(fctx) }()
		for fctx.Err() == nil && strings.Count(out.String(), "\n") < 4 {
			select {
			case err := <-errc:
				return out.String(), err
			case <-time.After(20 * time.Millisecond):
			}
		}
		fcancel()
		return out.String(), <-errc
	}
	out, err := follow("0")
	if err != nil || strings.Count(out, "\n") != 4 {
		t.Fatalf("honest follow: %v\n%s", err, out)
	}
	raw, err := sql.Open("sqlite", ar.dbPath)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`UPDATE events SET received_at = '2020-01-02T03:04:05.678Z' WHERE project_id = ? AND received_seq = 3`, p.id); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	out, err = follow("0")
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != 1 || strings.Count(out, "\n") != 2 ||
		!strings.HasPrefix(err.Error(), "--verify-log: record received_seq 3: record not included in the log: leaf 2 in tree 4") {
		t.Fatalf("follow over an edited receipt: %v\n%s", err, out)
	}
}
