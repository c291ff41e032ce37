package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/acrelay/acrelay/internal/pgtest"
	"github.com/acrelay/acrelay/registry"
)

// TestFirstStartTokensOnceAndGracefulStop: an empty store's first start
// prints a project id, a project token and an operator token once; only
// hashes reach the database file; SIGTERM drains and exits 0; a restart
// prints no tokens and the old ones still work.
func TestFirstStartTokensOnceAndGracefulStop(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary; skipped with -short")
	}
	bin := acrelayBinary(t)
	data := t.TempDir()
	addr := freeAddr(t)
	start := func() (*exec.Cmd, *syncBuffer) {
		cmd := exec.Command(bin, "serve", "--addr", addr, "--data-dir", data, "--log-level", "warn")
		cmd.Env = os.Environ()
		out := &syncBuffer{}
		cmd.Stdout = out
		cmd.Stderr = io.Discard
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			if res, err := http.Get("http://" + addr + "/healthz"); err == nil {
				res.Body.Close()
				return cmd, out
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatal("relay did not start")
		return nil, nil
	}
	cmd, out := start()
	text := out.String()
	re := regexp.MustCompile(`project_id:\s+(\S+)\n\s+project token:\s+(acr_\S+).*\n\s+operator token:\s+(acr_\S+)`)
	m := re.FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("first start did not print the tokens:\n%s", text)
	}
	projectID, projectToken, operatorToken := m[1], m[2], m[3]

	status, who := httpJSON(t, "GET", "http://"+addr+"/v1/whoami", projectToken, nil)
	if status != 200 || who["project_id"] != projectID {
		t.Fatalf("whoami: %d %v", status, who)
	}
	if status, _ := httpJSON(t, "POST", "http://"+addr+"/v1/admin/projects", operatorToken, map[string]any{}); status != 201 {
		t.Fatalf("operator token cannot create a project: %d", status)
	}

	// An open wake stream does not hold shutdown up: it is ended.
	_, ident := httpJSON(t, "POST", "http://"+addr+"/v1/admin/projects/"+projectID+"/identities", projectToken, map[string]any{})
	wreq, _ := http.NewRequest("GET", "http://"+addr+"/v1/wake/voice?identity_id="+ident["identity_id"].(string)+"&keys=correspondence", nil)
	wreq.Header.Set("Authorization", "Bearer "+projectToken)
	wres, err := http.DefaultClient.Do(wreq)
	if err != nil || wres.StatusCode != 200 {
		t.Fatalf("wake stream: %v", err)
	}
	streamEnded := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, wres.Body); close(streamEnded) }()

	// A request in flight when SIGTERM arrives is answered.
	pr, pw := io.Pipe()
	req, _ := http.NewRequest("POST", "http://"+addr+"/v1/admin/projects/"+projectID+"/identities", pr)
	req.Header.Set("Authorization", "Bearer "+projectToken)
	req.Header.Set("Content-Type", "application/json")
	got := make(chan int, 1)
	go func() {
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			got <- -1
			return
		}
		res.Body.Close()
		got <- res.StatusCode
	}()
	_, _ = pw.Write([]byte(`{"display_name":`))
	time.Sleep(100 * time.Millisecond)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	_, _ = pw.Write([]byte(`"drained"}`))
	pw.Close()
	if s := <-got; s != 201 {
		t.Fatalf("in-flight request during SIGTERM: %d", s)
	}
	stopped := time.Now()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("SIGTERM exit: %v", err)
	}
	if d := time.Since(stopped); d > 10*time.Second {
		t.Fatalf("shutdown took %v with a wake stream open", d)
	}
	select {
	case <-streamEnded:
	case <-time.After(5 * time.Second):
		t.Fatal("the wake stream was not ended by shutdown")
	}

	// Only hashes are stored.
	for _, f := range []string{"acrelay.db", "acrelay.db-wal"} {
		b, _ := os.ReadFile(filepath.Join(data, f))
		for _, tok := range []string{projectToken, operatorToken} {
			if bytes.Contains(b, []byte(tok)) || bytes.Contains(b, []byte(strings.SplitN(tok, "_", 3)[2])) {
				t.Fatalf("%s holds a token in the clear", f)
			}
		}
	}

	_, out2 := start()
	time.Sleep(100 * time.Millisecond)
	if strings.Contains(out2.String(), "token") {
		t.Fatalf("a restart printed tokens again:\n%s", out2.String())
	}
	if status, _ := httpJSON(t, "GET", "http://"+addr+"/v1/whoami", projectToken, nil); status != 200 {
		t.Fatalf("project token lost across restart: %d", status)
	}
	if status, _ := httpJSON(t, "POST", "http://"+addr+"/v1/admin/projects", operatorToken, map[string]any{}); status != 201 {
		t.Fatalf("operator token lost across restart: %d", status)
	}
}

// syncBuffer is a bytes.Buffer safe for the exec goroutine that writes a
// child's output while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestLocalAdminCommands drives project/identity/key/token create and
// revoke on the local store, as JSON.
func TestLocalAdminCommands(t *testing.T) {
	data := servedStore(t)
	run := func(args ...string) map[string]any {
		t.Helper()
		cmd := rootCmd
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(io.Discard)
		cmd.SetArgs(append(args, "--data-dir", data, "--json"))
		if err := cmd.Execute(); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		var m map[string]any
		sc := bufio.NewScanner(&out)
		sc.Scan()
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("%v: output %q", args, out.String())
		}
		return m
	}
	p := run("project", "create", "--project-id", "11111111-1111-4111-8111-111111111111")
	if p["project_id"] != "11111111-1111-4111-8111-111111111111" {
		t.Fatalf("project %v", p)
	}
	i := run("identity", "create", "--project-id", "11111111-1111-4111-8111-111111111111", "--identity-id", "22222222-2222-4222-8222-222222222222")
	if i["status"] != "active" {
		t.Fatalf("identity %v", i)
	}
	k := run("key", "add", "--project-id", "11111111-1111-4111-8111-111111111111", "--identity-id", "22222222-2222-4222-8222-222222222222", "--signing-key-id", "33333333-3333-4333-8333-333333333333",
		"--public-key", "A6EHv_POEL4dcN0Y50vAmWfk1jCbpQ1fHdyGZBJVMbg")
	if k["status"] != "active" || k["signing_key_id"] != "33333333-3333-4333-8333-333333333333" {
		t.Fatalf("key %v", k)
	}
	tok := run("token", "create", "--project-id", "11111111-1111-4111-8111-111111111111", "--scopes", "read,append")
	if !strings.HasPrefix(tok["token"].(string), "acr_") {
		t.Fatalf("token %v", tok)
	}
	if r := run("key", "revoke", "--project-id", "11111111-1111-4111-8111-111111111111", "33333333-3333-4333-8333-333333333333"); r["status"] != "revoked" {
		t.Fatalf("revoke key %v", r)
	}
	if r := run("identity", "deactivate", "--project-id", "11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222"); r["status"] != "inactive" {
		t.Fatalf("deactivate %v", r)
	}
	if r := run("token", "revoke", tok["token_id"].(string)); r["status"] != "revoked" {
		t.Fatalf("revoke token %v", r)
	}
	// The listings show every status; a token's secret never.
	const pid = "11111111-1111-4111-8111-111111111111"
	second := run("token", "create", "--project-id", pid, "--scopes", "admin")
	tl := run("token", "list", "--project-id", pid)
	rows, _ := tl["tokens"].([]any)
	if len(rows) != 2 || strings.Contains(fmt.Sprint(tl), tok["token"].(string)) || strings.Contains(fmt.Sprint(tl), second["token"].(string)) {
		t.Fatalf("token list %v", tl)
	}
	for _, row := range rows {
		m := row.(map[string]any)
		if want := m["token_id"] == tok["token_id"]; m["revoked"] != want || len(m) != 4 {
			t.Fatalf("token row %v: want revoked %v and exactly token_id, scopes, revoked, created_at", m, want)
		}
	}
	il := run("identity", "list", "--project-id", pid)
	if rows, _ := il["identities"].([]any); len(rows) != 1 || rows[0].(map[string]any)["status"] != "inactive" {
		t.Fatalf("identity list %v", il)
	}
	kl := run("key", "list", "--project-id", pid, "--identity-id", "22222222-2222-4222-8222-222222222222")
	if rows, _ := kl["keys"].([]any); len(rows) != 1 || rows[0].(map[string]any)["status"] != "revoked" ||
		rows[0].(map[string]any)["public_key_b64url"] != "A6EHv_POEL4dcN0Y50vAmWfk1jCbpQ1fHdyGZBJVMbg" {
		t.Fatalf("key list %v", kl)
	}
	// A duplicate id is refused.
	cmd := rootCmd
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	cmd.SetArgs([]string{"project", "create", "--project-id", "11111111-1111-4111-8111-111111111111", "--data-dir", data})
	if err := cmd.Execute(); err == nil {
		t.Fatal("duplicate project accepted")
	}
	// Listing an unknown project or identity is an error, not an empty
	// list; every not-found error names what was looked up, quoted.
	const none = "00000000-0000-4000-8000-000000000000"
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"token", "list", "--project-id", none}, `project "` + none + `": not found`},
		{[]string{"key", "list", "--project-id", pid, "--identity-id", none}, `identity "` + none + `" in project "` + pid + `": not found`},
		{[]string{"identity", "list", "--project-id", "a\x1b[31mb"}, `project (not an id, not shown): not found`},
		{[]string{"token", "list", "--project-id", " acr_abcdefghijklmnopqrstuvwxyz_" + strings.Repeat("S", 43)}, `project (not an id, not shown): not found`},
		{[]string{"identity", "create", "--project-id", none}, `project "` + none + `": not found`},
		{[]string{"identity", "deactivate", "--project-id", pid, none}, `identity "` + none + `" in project "` + pid + `": not found`},
		{[]string{"key", "add", "--project-id", pid, "--identity-id", none, "--public-key", "A6EHv_POEL4dcN0Y50vAmWfk1jCbpQ1fHdyGZBJVMbg"}, `identity "` + none + `" in project "` + pid + `": not found`},
		{[]string{"key", "revoke", "--project-id", pid, none}, `signing key "` + none + `" in project "` + pid + `": not found`},
		{[]string{"token", "create", "--project-id", none}, `project "` + none + `": not found`},
		{[]string{"token", "revoke", "abcdefghijklmnopqrstuvwxyz"}, `token "abcdefghijklmnopqrstuvwxyz": not found`},
	} {
		cmd.SetArgs(append(c.args, "--data-dir", data))
		if err := cmd.Execute(); err == nil || !strings.HasSuffix(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error ending %s", c.args, err, c.want)
		}
	}
	// A whole token, or its secret, where a token id belongs is refused
	// without echoing it.
	secret := strings.Repeat("S", 43)
	for _, arg := range []string{"acr_abcdefghijklmnopqrstuvwxyz_" + secret, " acr_abcdefghijklmnopqrstuvwxyz_" + secret,
		"Bearer acr_abcdefghijklmnopqrstuvwxyz_" + secret, "ACR_ABCDEFGHIJKLMNOPQRSTUVWXYZ_" + secret, secret} {
		cmd.SetArgs([]string{"token", "revoke", arg, "--data-dir", data})
		if err := cmd.Execute(); err == nil || strings.Contains(err.Error(), "SSSS") || !strings.Contains(err.Error(), "the argument is not one") {
			t.Errorf("token revoke %.12q…: %v, want a refusal that does not echo it", arg, err)
		}
	}
}

// TestErrorText: what main prints for an error never carries a token's
// secret or a raw control character.
func TestErrorText(t *testing.T) {
	secret := "AbC-_" + strings.Repeat("z", 38)
	for in, want := range map[string]string{
		"unknown shorthand flag: 'a' in -acr_abcdefghijklmnopqrstuvwxyz_" + secret: "unknown shorthand flag: 'a' in -acr_abcdefghijklmnopqrstuvwxyz_<redacted>",
		"x ACR_ABCDEFGHIJKLMNOPQRSTUVWXYZ_" + secret + " y":                        "x ACR_ABCDEFGHIJKLMNOPQRSTUVWXYZ_<redacted> y",
		"bad \x1b[31mflag\x07 \u0085 \xff\xfe end\ttab\nline":                      `bad \x1b[31mflag\a \u0085 \xff\xfe end` + "\ttab\nline",
		"plain \ufffd ümlaut": "plain \ufffd ümlaut",
	} {
		if got := errorText(errors.New(in)); got != want {
			t.Errorf("errorText(%q)\n got %q\nwant %q", in, got, want)
		}
	}
}

// servedStore returns a data directory holding the store serve's first
// start leaves: opened with serve's opener and given its default project.
// The local admin commands need one (TestAdminCommandsNeedAStore).
func servedStore(t *testing.T) string {
	t.Helper()
	data := t.TempDir()
	ctx := context.Background()
	st, err := openStore(ctx, storeConfig{DataDir: data, SQLiteSync: "fdatasync", SQLiteMaxBatch: 128, Create: true}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := registry.FirstStart(ctx, st, false); err != nil {
		t.Fatal(err)
	}
	return data
}

// TestAdminCommandsNeedAStore: run where there is no store, a local admin
// command says so and creates neither the data directory nor a file in
// it; on PostgreSQL the data directory plays no part.
func TestAdminCommandsNeedAStore(t *testing.T) {
	t.Setenv("ACRELAY_DATABASE_URL", "") // empty counts as unset
	t.Setenv("ACRELAY_DATABASE_URL_FILE", "")
	const (
		project  = "11111111-1111-4111-8111-111111111111"
		identity = "22222222-2222-4222-8222-222222222222"
		key      = "33333333-3333-4333-8333-333333333333"
	)
	commands := [][]string{
		{"project", "create"},
		{"identity", "create", "--project-id", project},
		{"identity", "deactivate", "--project-id", project, identity},
		{"key", "add", "--project-id", project, "--identity-id", identity, "--public-key", "A6EHv_POEL4dcN0Y50vAmWfk1jCbpQ1fHdyGZBJVMbg"},
		{"key", "revoke", "--project-id", project, key},
		{"token", "create", "--project-id", project},
		{"token", "revoke", "abcdefghijklmnopqrstuvwxyz"},
	}
	run := func(args ...string) error {
		root := newTestRoot(newAdminCmds()...)
		root.SetOut(io.Discard)
		root.SetErr(io.Discard)
		root.SetArgs(args)
		return root.Execute()
	}
	for _, c := range commands {
		name := strings.Join(c[:2], " ")
		t.Run(name+"/missing dir", func(t *testing.T) {
			data := filepath.Join(t.TempDir(), "acrelay-data")
			err := run(slices.Concat(c, []string{"--data-dir", data})...)
			want := "no acrelay store in " + data + " (run acrelay serve once to create it, or pass --data-dir / ACRELAY_DATA_DIR)"
			if !errors.Is(err, errNoStore) || err.Error() != want {
				t.Fatalf("got %v\nwant %s", err, want)
			}
			if _, err := os.Stat(data); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("the data directory was created: %v", err)
			}
		})
		t.Run(name+"/empty dir", func(t *testing.T) {
			data := t.TempDir()
			if err := run(slices.Concat(c, []string{"--data-dir", data})...); !errors.Is(err, errNoStore) {
				t.Fatalf("got %v, want %v", err, errNoStore)
			}
			if names, _ := os.ReadDir(data); len(names) != 0 {
				t.Fatalf("files were created: %v", names)
			}
		})
	}
	t.Run("default data dir", func(t *testing.T) {
		t.Chdir(t.TempDir())
		t.Setenv("ACRELAY_DATA_DIR", "")
		os.Unsetenv("ACRELAY_DATA_DIR") // restored by t.Setenv
		err := run("project", "create")
		want := "no acrelay store in ./acrelay-data (run acrelay serve once to create it, or pass --data-dir / ACRELAY_DATA_DIR)"
		if err == nil || err.Error() != want {
			t.Fatalf("got %v\nwant %s", err, want)
		}
		if _, err := os.Stat("acrelay-data"); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("./acrelay-data was created: %v", err)
		}
	})
	t.Run("postgres", func(t *testing.T) {
		if postgresOpener == nil {
			t.Skip("PostgreSQL store not built in")
		}
		url := pgtest.FreshDatabase(t)
		data := filepath.Join(t.TempDir(), "acrelay-data")
		if err := run("project", "create", "--data-dir", data, "--database-url", url); err != nil {
			t.Fatalf("--database-url: %v", err)
		}
		t.Setenv("ACRELAY_DATABASE_URL", url)
		if err := run("project", "create", "--data-dir", data); err != nil {
			t.Fatalf("ACRELAY_DATABASE_URL: %v", err)
		}
		if _, err := os.Stat(data); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("the data directory was created: %v", err)
		}
	})
}
