package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/acrelay/acrelay/client"
	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/registry"
	"github.com/acrelay/acrelay/relay"
	"github.com/acrelay/acrelay/store/sqlite"
)

// runAgent runs a freshly built command with stdin, returning stdout and
// stderr apart.
func runAgent(t *testing.T, cmd *cobra.Command, stdin string, args ...string) (string, string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd.SetArgs(args)
	cmd.SetIn(strings.NewReader(stdin))
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	err := cmd.Execute()
	return out.String(), errb.String(), err
}

// testRelay serves the real relay on a fresh SQLite store and returns its
// URL and the first-start project token (read, append, admin).
func testRelay(t *testing.T) (string, string, string) {
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
	srv := httptest.NewServer(relay.New(st, relay.Config{PublicURL: "http://relay.test"}).Handler())
	t.Cleanup(srv.Close)
	return srv.URL, boot.ProjectToken, boot.ProjectID
}

func TestAgentCommandsHaveHelpAndExamples(t *testing.T) {
	for _, name := range []string{"keygen", "sign", "post", "events", "follow", "claims", "voice", "demo"} {
		cmd, _, err := rootCmd.Find([]string{name})
		if err != nil || cmd.Name() != name {
			t.Fatalf("%s not registered: %v", name, err)
		}
		if !strings.Contains(cmd.Example, "acrelay "+name) {
			t.Errorf("%s: example does not show the command: %q", name, cmd.Example)
		}
	}
}

func TestKeygen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agent.pem")
	out, _, err := runAgent(t, newKeygenCmd(), "", "--out", path)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(path)
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", st.Mode().Perm())
	}
	priv, err := client.LoadPrivateKey(path)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := client.NewSigner(priv, "", correspondence.Sender{})
	if strings.TrimSpace(out) != s.PublicKeyB64URL() || len(strings.TrimSpace(out)) != 43 {
		t.Fatalf("printed %q, key file's public key %s", out, s.PublicKeyB64URL())
	}
	if _, _, err := runAgent(t, newKeygenCmd(), "", "--out", path); err == nil || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("overwrite: %v", err)
	}
	_ = os.Chmod(path, 0o644)
	out2, _, err := runAgent(t, newKeygenCmd(), "", "--out", path, "--force")
	if err != nil || out2 == out {
		t.Fatalf("--force: %v (same key: %v)", err, out2 == out)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Fatalf("mode after --force %v", st.Mode().Perm())
	}
}

// TestSignPostEvents runs keygen → register → sign (flags and core) →
// post → events against the real relay, all in process.
func TestSignPostEvents(t *testing.T) {
	url, token, project := testRelay(t)
	dir := t.TempDir()
	keyPath := filepath.Join(dir, "agent.pem")
	pub, _, err := runAgent(t, newKeygenCmd(), "", "--out", keyPath)
	if err != nil {
		t.Fatal(err)
	}
	admin, _ := client.New(url, token)
	ident, err := admin.CreateIdentity(t.Context(), project, "", "cli")
	if err != nil {
		t.Fatal(err)
	}
	key, err := admin.AddKey(t.Context(), ident.IdentityID, "", strings.TrimSpace(pub))
	if err != nil {
		t.Fatal(err)
	}
	keyring := filepath.Join(dir, "keys.json")
	kb, _ := json.Marshal([]client.KeyEntry{{SigningKeyID: key.SigningKeyID, IdentityID: ident.IdentityID, PublicKeyB64URL: strings.TrimSpace(pub)}})
	_ = os.WriteFile(keyring, kb, 0o600)

	t.Setenv("ACRELAY_URL", url)
	t.Setenv("ACRELAY_TOKEN", token)
	t.Setenv("ACRELAY_KEY_FILE", keyPath)
	t.Setenv("ACRELAY_PROJECT_ID", project)
	t.Setenv("ACRELAY_IDENTITY_ID", ident.IdentityID)
	t.Setenv("ACRELAY_SIGNING_KEY_ID", key.SigningKeyID)
	t.Setenv("ACRELAY_DEVICE_ID", uuid.NewString())
	t.Setenv("ACRELAY_SESSION_ID", uuid.NewString())
	seq := filepath.Join(dir, "seq")

	open, _, err := runAgent(t, newSignCmd(), "", "--kind", "claim.open", "--repository-id", "repo:cli", "--thread-id", "t", "--path", "src", "--seq-file", seq)
	if err != nil {
		t.Fatal(err)
	}
	openFile := filepath.Join(dir, "open.json")
	_ = os.WriteFile(openFile, []byte(open), 0o600)
	renew, _, err := runAgent(t, newSignCmd(), "", "--kind", "claim.renew", "--predecessor", openFile, "--repository-id", "repo:cli", "--thread-id", "t", "--seq-file", seq)
	if err != nil {
		t.Fatal(err)
	}
	// A core event from stdin: the flags fill sender, project and seq.
	core, _, err := runAgent(t, newSignCmd(), `{"repository_id":"repo:cli","thread_id":"t","kind":"progress","scope":{"base_revision":null,"branch":null,"paths":["."]},"body":{"summary":"from a core"}}`, "--seq-file", seq)
	if err != nil {
		t.Fatal(err)
	}
	posted, _, err := runAgent(t, newPostCmd(), open+renew+core)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(posted), "\n")
	if len(lines) != 3 {
		t.Fatalf("post printed %d lines", len(lines))
	}
	var pl postLine
	_ = json.Unmarshal([]byte(lines[1]), &pl)
	renewEv, _ := client.DecodeEvent([]byte(renew))
	if !pl.Created || pl.LineageStatus != "valid" || pl.EventID != renewEv.ID || pl.Receipt["received_seq"] != "2" {
		t.Fatalf("renew posted as %+v", pl)
	}
	if c, _ := renewEv.Claim(); c.Generation != 2 || renewEv.SessionSeq != 2 {
		t.Fatalf("renew %+v seq %d", c, renewEv.SessionSeq)
	}
	// The same event again: 200, the original receipt.
	again, _, err := runAgent(t, newPostCmd(), renew)
	if err != nil || !strings.Contains(again, `"created":false`) || !strings.Contains(again, `"received_seq":"2"`) {
		t.Fatalf("exact retry: %s %v", again, err)
	}

	out, stderr, err := runAgent(t, newEventsCmd(), "", "--repository-id", "repo:cli", "--keyring", keyring, "--limit", "2")
	if err != nil || strings.Count(out, "\n") != 2 || stderr != "next_after=2 has_more=true\n" {
		t.Fatalf("one page: %q %q %v", out, stderr, err)
	}
	out, _, err = runAgent(t, newEventsCmd(), "", "--repository-id", "repo:cli", "--keyring", keyring, "--all", "--limit", "2")
	if err != nil || strings.Count(out, "\n") != 3 {
		t.Fatalf("all: %q %v", out, err)
	}
	var rec struct {
		Event   json.RawMessage   `json:"event"`
		Receipt map[string]string `json:"receipt"`
	}
	_ = json.Unmarshal([]byte(strings.Split(out, "\n")[1]), &rec)
	if string(rec.Event) != strings.TrimSpace(renew) || rec.Receipt["received_seq"] != "2" {
		t.Fatalf("record 2 is not the signed renew byte for byte")
	}

	// Local validation lists every issue before anything is signed.
	_, _, err = runAgent(t, newSignCmd(), `{"repository_id":"repo:cli","thread_id":"t","kind":"progress","scope":{"base_revision":null,"branch":null,"paths":["/abs"]},"body":{"summary":"x","extra":1}}`, "--session-seq", "9")
	if err == nil || !strings.Contains(err.Error(), "/scope/paths/0 path_invalid") || !strings.Contains(err.Error(), "/body/extra unknown_body_field") {
		t.Fatalf("invalid core: %v", err)
	}
	// The relay's refusal shows its code and message.
	t.Setenv("ACRELAY_TOKEN", "acr_not_a_real_token")
	_, _, err = runAgent(t, newPostCmd(), core)
	if err == nil || !strings.Contains(err.Error(), "relay answered 401") {
		t.Fatalf("bad token: %v", err)
	}
}

func TestDemoAgainstRealRelay(t *testing.T) {
	url, token, project := testRelay(t)
	out, _, err := runAgent(t, newDemoCmd(), "", "--url", url, "--token", token, "--repository-id", "repo:example.com/demo")
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out)
	}
	for _, want := range []string{
		"read back 25 of 25 records; every signature and event id verified",
		"ada#2  claim.renew",
		"brook  ack.applied",
		"ada    conflict.resolve",
		"voice: overlapping claims on [src/parser]: ",
		"6. Left open for you to look at: a live claim and an overlapping one",
		"  web view:      " + url + "/ui/projects/" + project + "?repository_id=repo%3Aexample.com%2Fdemo\n",
		"generation 2 is conflicted: 2 tips, one per device",
		url + "/v1/correspondence/voice?repository_id=repo%3Aexample.com%2Fdemo",
		// The relay's alternate link, which names the project.
		"/v1/correspondence/events.atom?project_id=",
		"&repository_id=repo%3Aexample.com%2Fdemo\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, token) {
		t.Error("demo printed the token")
	}
}
