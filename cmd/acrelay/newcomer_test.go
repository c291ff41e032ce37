package main

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/acrelay/acrelay/registry"
	"github.com/acrelay/acrelay/relay"
	"github.com/acrelay/acrelay/store/sqlite"
)

// demoRelay runs the demo on a fresh relay and returns the relay URL, the
// project token, the repository and ada's identity id.
func demoRelay(t *testing.T) (url, token, repo, ada string) {
	t.Helper()
	url, token = liveRelay(t)
	repo = "repo:example.com/newcomer"
	out, _, err := runAgent(t, newDemoCmd(), "", "--url", url, "--token", token, "--repository-id", repo)
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`(?m)^identity ada\s+(\S+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("demo printed no identity for ada:\n%s", out)
	}
	return url, token, repo, m[1]
}

// liveRelay is testRelay with the public URL its own address, so the
// wake stream's Link-Template (built from the public URL) reaches it.
func liveRelay(t *testing.T) (url, token string) {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "acrelay.db"), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	boot, err := registry.FirstStart(ctx, st, false)
	if err != nil || boot == nil {
		t.Fatalf("first start: %v", err)
	}
	srv := httptest.NewUnstartedServer(nil)
	r := relay.New(st, relay.Config{PublicURL: "http://" + srv.Listener.Addr().String()})
	srv.Config.Handler = r.Handler()
	srv.Start()
	t.Cleanup(srv.Close)
	t.Cleanup(r.CloseStreams)
	return srv.URL, boot.ProjectToken
}

// TestTokenFileWinsOverEnv: an explicit --token-file is used even when
// ACRELAY_TOKEN is set; ACRELAY_TOKEN still wins over ACRELAY_TOKEN_FILE;
// the refused environment token's error says the token was not accepted.
func TestTokenFileWinsOverEnv(t *testing.T) {
	url, token, _ := testRelay(t)
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good"), filepath.Join(dir, "bad")
	if err := os.WriteFile(good, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("acr_not_a_real_token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("ACRELAY_URL", url)
	t.Setenv("ACRELAY_TOKEN", "acr_stale_token_from_the_environment")
	t.Setenv("ACRELAY_TOKEN_FILE", "")

	out, _, err := runAgent(t, newEventsCmd(), "", "--repository-id", "repo:x", "--token-file", good)
	if err != nil || out != "" {
		t.Fatalf("--token-file with a stale ACRELAY_TOKEN: %q %v", out, err)
	}
	_, _, err = runAgent(t, newEventsCmd(), "", "--repository-id", "repo:x")
	if err == nil || !strings.Contains(err.Error(), "relay answered 401 unauthorized") || !strings.Contains(err.Error(), "the bearer token sent is not accepted") {
		t.Fatalf("stale ACRELAY_TOKEN alone: %v", err)
	}
	// The environment among itself: the token wins over the token file.
	t.Setenv("ACRELAY_TOKEN", token)
	t.Setenv("ACRELAY_TOKEN_FILE", bad)
	if _, _, err := runAgent(t, newEventsCmd(), "", "--repository-id", "repo:x"); err != nil {
		t.Fatalf("ACRELAY_TOKEN over ACRELAY_TOKEN_FILE: %v", err)
	}
	t.Setenv("ACRELAY_TOKEN", "")
	t.Setenv("ACRELAY_TOKEN_FILE", good)
	if _, _, err := runAgent(t, newEventsCmd(), "", "--repository-id", "repo:x"); err != nil {
		t.Fatalf("ACRELAY_TOKEN_FILE alone: %v", err)
	}
	// subscribe's own flags follow the same rule.
	rf := relayFlags{tokenFile: good}
	t.Setenv("ACRELAY_TOKEN", "acr_stale_token_from_the_environment")
	if tok, err := optionalToken(&rf); err != nil || tok != token {
		t.Fatalf("subscribe's --token-file: %q %v", tok, err)
	}
}

// TestReadingCommandsFormat: events, claims and voice print text for
// --format text (display names, claims named by owner and id) and the
// relay's JSON when piped or with --format json; a bad value is refused.
func TestReadingCommandsFormat(t *testing.T) {
	url, token, repo, _ := demoRelay(t)
	t.Setenv("ACRELAY_URL", url)
	t.Setenv("ACRELAY_TOKEN", token)

	for _, tc := range []struct {
		name string
		cmd  func() *cobra.Command
		args []string
		text []*regexp.Regexp
	}{
		{"events", newEventsCmd, []string{"--all"}, []*regexp.Regexp{
			regexp.MustCompile(`(?m)^#1 \d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ demo agent ada +intent +\[task:parser-errors\] \S.* \(paths src/parser\)$`),
			regexp.MustCompile(`(?m)^#8 .* demo agent brook +ack\.seen +\[task:parser-errors\] on sha256:[0-9a-f]{12}…`),
		}},
		{"claims", newClaimsCmd, nil, []*regexp.Regexp{
			regexp.MustCompile(`(?m)^active claims of repo:example\.com/newcomer: \d+ \(evaluated .*, cursor \d+, projection complete\)$`),
		}},
		{"voice", newVoiceCmd, nil, []*regexp.Regexp{
			regexp.MustCompile(`(?m)^voice of repo:example\.com/newcomer \(evaluated .*\)$`),
			regexp.MustCompile(`(?m)^recent events \(newest first\): \d+$`),
			regexp.MustCompile(`(?m)^  #\d+ .* demo agent (ada|brook) `),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"--repository-id", repo}, tc.args...)
			text, _, err := runAgent(t, tc.cmd(), "", append(args, "--format", "text")...)
			if err != nil {
				t.Fatal(err)
			}
			for _, re := range tc.text {
				if !re.MatchString(text) {
					t.Errorf("text lacks %s:\n%s", re, text)
				}
			}
			if strings.Contains(text, `{"`) {
				t.Errorf("text output has JSON:\n%s", text)
			}
			piped, _, err := runAgent(t, tc.cmd(), "", args...)
			if err != nil {
				t.Fatal(err)
			}
			explicit, _, err := runAgent(t, tc.cmd(), "", append(args, "--format", "json")...)
			if err != nil {
				t.Fatal(err)
			}
			if tc.name != "voice" && tc.name != "claims" && piped != explicit { // voice and claims carry evaluated_at
				t.Errorf("piped output differs from --format json")
			}
			for _, line := range strings.Split(strings.TrimSpace(piped), "\n") {
				if !json.Valid([]byte(line)) {
					t.Fatalf("piped output is not JSON lines: %q", line)
				}
			}
			if _, _, err := runAgent(t, tc.cmd(), "", append(args, "--format", "yaml")...); err == nil || !strings.Contains(err.Error(), `--format "yaml": want text or json`) {
				t.Errorf("--format yaml: %v", err)
			}
		})
	}
}

// TestVoiceTextNamesConflicts: the overlapping claims of the demo's first
// act are named by owner and claim id, not by event hash.
func TestVoiceTextNamesConflicts(t *testing.T) {
	url, token, _ := testRelay(t)
	t.Setenv("ACRELAY_URL", url)
	t.Setenv("ACRELAY_TOKEN", token)
	repo := "repo:example.com/conflicts"
	if out, _, err := runAgent(t, newDemoCmd(), "", "--repository-id", repo); err != nil {
		t.Fatalf("demo: %v\n%s", err, out)
	}
	out, _, err := runAgent(t, newVoiceCmd(), "", "--repository-id", repo, "--format", "text")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`(?m)^  overlapping claims on src/lexer: demo agent (ada|brook)'s claim [0-9a-f-]{36} and demo agent (ada|brook)'s claim [0-9a-f-]{36}$`)
	if !re.MatchString(out) {
		t.Errorf("voice text does not name the open conflict by owner and claim:\n%s", out)
	}
}

// runContext runs a command under ctx with stdout and stderr apart.
func runContext(ctx context.Context, cmd *cobra.Command, out, errw *syncBuffer, args ...string) error {
	cmd.SetArgs(args)
	cmd.SetIn(strings.NewReader(""))
	cmd.SetOut(out)
	cmd.SetErr(errw)
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	return cmd.ExecuteContext(ctx)
}

// TestFollowUnknownIdentity: an --identity-id that is no identity of the
// project is a clear error at once, not a silent poll.
func TestFollowUnknownIdentity(t *testing.T) {
	url, token, repo, _ := demoRelay(t)
	t.Setenv("ACRELAY_URL", url)
	t.Setenv("ACRELAY_TOKEN", token)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	var out, errw syncBuffer
	err := runContext(ctx, newFollowCmd(), &out, &errw, "--repository-id", repo, "--identity-id", "00000000-0000-4000-8000-000000000000")
	var ie *identityError
	if !errors.As(err, &ie) || ctx.Err() != nil {
		t.Fatalf("follow with an unknown identity: %v (ctx %v)", err, ctx.Err())
	}
	if want := "--identity-id 00000000-0000-4000-8000-000000000000 is no identity of this token's project"; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error %q", err)
	}
}

// TestFollowSaysReconnecting: follow in text mode prints records as text,
// says "reconnecting…" on stderr while the relay is down, "reconnected"
// when it is back, and then prints what was posted meanwhile.
func TestFollowSaysReconnecting(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "acrelay.db"), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	boot, err := registry.FirstStart(ctx, st, false)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	url := "http://" + addr
	serve := func(ln net.Listener) *http.Server {
		r := relay.New(st, relay.Config{PublicURL: url})
		srv := &http.Server{Handler: r.Handler()}
		srv.RegisterOnShutdown(r.CloseStreams)
		go func() { _ = srv.Serve(ln) }()
		return srv
	}
	srv := serve(ln)
	t.Cleanup(func() { _ = srv.Close() })
	t.Setenv("ACRELAY_URL", url)
	t.Setenv("ACRELAY_TOKEN", boot.ProjectToken)
	repo := "repo:example.com/away"
	demo, _, err := runAgent(t, newDemoCmd(), "", "--repository-id", repo)
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, demo)
	}
	ada := regexp.MustCompile(`(?m)^identity ada\s+(\S+)`).FindStringSubmatch(demo)[1]

	fctx, cancel := context.WithCancel(ctx)
	var out, errw syncBuffer
	done := make(chan struct{}) // closed when follow returns, with ferr set
	var ferr error
	go func() {
		defer close(done)
		ferr = runContext(fctx, newFollowCmd(), &out, &errw, "--repository-id", repo, "--identity-id", ada, "--format", "text")
	}()
	defer func() {
		cancel()
		<-done
	}()
	waitFor := func(what string, w *syncBuffer, sub string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !strings.Contains(w.String(), sub) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: no %q in\nstdout:\n%s\nstderr:\n%s", what, sub, out.String(), errw.String())
			}
			select {
			case <-done:
				t.Fatalf("follow ended: %v\nstderr:\n%s", ferr, errw.String())
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	waitFor("the demo's records", &out, "#22 ")
	if !regexp.MustCompile(`(?m)^#1 .* demo agent ada +intent `).MatchString(out.String()) {
		t.Errorf("text lines:\n%s", out.String())
	}
	if err := srv.Close(); err != nil { // the relay goes away: listener and streams
		t.Fatal(err)
	}
	waitFor("relay down", &errw, "reconnecting…")
	if strings.Contains(errw.String(), "/v1/wake/voice") {
		t.Errorf("the reconnecting line repeats the URL: %s", errw.String())
	}
	ln2, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen again on %s: %v", addr, err)
	}
	srv2 := serve(ln2)
	t.Cleanup(func() { _ = srv2.Close() })
	waitFor("relay back", &errw, "acrelay: reconnected")
}

// TestAuditFeedURLAndTokenProject: audit --feed takes the whole URL that
// POST /v1/feeds answered (its relay is the default --url), and without
// --project a project token audits its own project, as the README's
// example right after the Quick start does.
func TestAuditFeedURLAndTokenProject(t *testing.T) {
	ar := newAuditRelay(t)
	p := registerProject(t, ar.url, auditOperator)
	p.post(t, ar.url, "one")
	ar.integrate(t, p.id)
	_, m := httpJSON(t, "POST", ar.url+"/v1/feeds", p.token, map[string]any{"repository_id": "repo:mp"})
	feedURL, _ := m["url"].(string)
	if !strings.Contains(feedURL, "?repository_id=") {
		t.Fatalf("feed url %q", feedURL)
	}
	t.Setenv("ACRELAY_URL", "")
	t.Setenv("ACRELAY_TOKEN", "")
	stdout, _, err := runAgent(t, newAuditCmd(), "", "--project", p.id, "--feed", feedURL, "--log-key", ar.key.VerifierKey)
	if err != nil || !strings.HasSuffix(stdout, "entries      not read: entry bundles hold every repository, a feed capability reads one\nOK\n") {
		t.Fatalf("audit --feed <url>: %v\n%s", err, stdout)
	}
	if _, _, err := runAgent(t, newAuditCmd(), "", "--feed", ar.url+"/v1/other"); err == nil || !strings.Contains(err.Error(), "not a feed capability") {
		t.Fatalf("--feed outside /v1/feeds/: %v", err)
	}

	t.Setenv("ACRELAY_URL", ar.url)
	t.Setenv("ACRELAY_TOKEN", p.token)
	state := filepath.Join(t.TempDir(), "audit.json")
	stdout, _, err = runAgent(t, newAuditCmd(), "", "--state", state, "--log-key", ar.key.VerifierKey)
	if err != nil || !strings.HasSuffix(stdout, "entries      received_seq 1..1: 1 checked (leaf hash, canonical record, received_seq)\nOK\n") {
		t.Fatalf("audit with the token's project: %v\n%s", err, stdout)
	}
	t.Setenv("ACRELAY_TOKEN", "")
	if _, _, err := runAgent(t, newAuditCmd(), ""); err == nil || !strings.Contains(err.Error(), "--project is required without a token") {
		t.Fatalf("no project, no token: %v", err)
	}
}

// TestFirstStartMigrationSummary: a first start's output, stdout and
// stderr interleaved as a terminal shows them, has the token banner first
// and then one "migrations applied" line naming how many, instead of one
// line per migration before the banner.
func TestFirstStartMigrationSummary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary; skipped with -short")
	}
	migrations, err := os.ReadDir("../../store/sqlite/migrations")
	if err != nil {
		t.Fatal(err)
	}
	bin := acrelayBinary(t)
	addr := freeAddr(t)
	cmd := exec.Command(bin, "serve", "--addr", addr, "--data-dir", t.TempDir())
	cmd.Env = os.Environ()
	both := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = both, both
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(both.String(), "relay listening") {
		if time.Now().After(deadline) {
			t.Fatalf("relay did not start:\n%s", both.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	text := both.String()
	if n := strings.Count(text, "migration applied"); n != 0 {
		t.Errorf("%d per-migration lines at the default level:\n%s", n, text)
	}
	banner := strings.Index(text, "operator token:")
	summary := regexp.MustCompile(`level=INFO msg="migrations applied" dialect=sqlite count=(\d+) from_version=0 to_version=(\d+) duration=`).FindStringSubmatchIndex(text)
	if banner < 0 || summary == nil {
		t.Fatalf("no banner or no summary line:\n%s", text)
	}
	if summary[0] < banner {
		t.Errorf("the summary comes before the banner:\n%s", text)
	}
	if count := text[summary[2]:summary[3]]; count != strconv.Itoa(len(migrations)) || text[summary[4]:summary[5]] != count {
		t.Errorf("summary says %s migrations, to version %s; the store has %d:\n%s", count, text[summary[4]:summary[5]], len(migrations), text)
	}
	if strings.Count(text, "migrations applied") != 1 {
		t.Errorf("more than one summary line:\n%s", text)
	}
}

// TestTokenWithLineBreak: a token pasted with a line break (two lines of
// the first start's banner in ACRELAY_TOKEN) is refused at once with a
// clear message that does not echo it, not retried for seconds.
func TestTokenWithLineBreak(t *testing.T) {
	url, token, _ := testRelay(t)
	t.Setenv("ACRELAY_URL", url)
	t.Setenv("ACRELAY_TOKEN", token+"\n  try: ACRELAY_URL=…")
	start := time.Now()
	_, _, err := runAgent(t, newEventsCmd(), "", "--repository-id", "repo:x")
	if err == nil || !strings.Contains(err.Error(), "the bearer token contains a line break") || strings.Contains(err.Error(), token) {
		t.Fatalf("token with a line break: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("took %v: the refusal was retried", d)
	}
}
