package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/acrelay/acrelay/client"
	"github.com/acrelay/acrelay/correspondence"
)

// agentEnvClear empties every ACRELAY_* variable an agent command reads,
// so a test sees only what it sets (the developer's shell may set some).
func agentEnvClear(t *testing.T) {
	t.Helper()
	for _, name := range []string{"ACRELAY_URL", "ACRELAY_TOKEN", "ACRELAY_TOKEN_FILE", "ACRELAY_KEYRING",
		"ACRELAY_KEY_FILE", "ACRELAY_PROJECT_ID", "ACRELAY_IDENTITY_ID", "ACRELAY_SIGNING_KEY_ID",
		"ACRELAY_DEVICE_ID", "ACRELAY_SESSION_ID", "ACRELAY_PROFILE", "ACRELAY_ADMIN_TOKEN",
		"ACRELAY_REPOSITORY_ID", "ACRELAY_GUARD_BYPASS"} {
		t.Setenv(name, "")
	}
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(t.TempDir(), "xdg"))
}

// gitRepo makes a git work tree with one commit and returns its path.
func gitRepo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	git(t, dir, "init", "-q", "-b", "main")
	git(t, dir, "config", "user.email", "agent@example.org")
	git(t, dir, "config", "user.name", "Agent")
	git(t, dir, "config", "commit.gpgsign", "false")
	if err := os.WriteFile(filepath.Join(dir, "README"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, dir, "add", "README")
	git(t, dir, "commit", "-q", "-m", "first")
	return dir
}

// git runs git in dir and returns its stdout; a failure fails the test.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func readProfileT(t *testing.T, path string) (*agentProfile, string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	p, err := parseProfile(data)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	p.path = path
	return p, string(data)
}

// TestAgentInitRegistersAndIsIdempotent: with an admin token, init in a
// git work tree writes .acrelay/agent.json (0600, excluded from git, the
// token only by reference), creates the key, registers identity and key
// (the relay's registry lists them under the display name), issues a
// token into a 0600 file, and prints no secret; a second run changes
// nothing; every agent command then runs from the profile alone, and a
// flag or ACRELAY_* still wins over it.
func TestAgentInitRegistersAndIsIdempotent(t *testing.T) {
	agentEnvClear(t)
	url, adminTok, projectID := testRelay(t)
	repo := gitRepo(t)
	t.Chdir(repo)
	t.Setenv("ACRELAY_ADMIN_TOKEN", adminTok)

	args := []string{"--url", url, "--display-name", "parser-agent", "--repository-id", "repo:example/app", "--issue-token", "--json"}
	out, _, err := runAgent(t, newAgentInitCmd(), "", args...)
	if err != nil {
		t.Fatal(err)
	}
	var res agentInitResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	profPath := filepath.Join(repo, ".acrelay", "agent.json")
	if res.Profile != profPath || res.ProfileStatus != "created" || res.KeyStatus != "created" || res.Registration != "registered" || res.ProjectID != projectID {
		t.Fatalf("first run: %+v", res)
	}
	p, raw := readProfileT(t, profPath)
	tokBytes, err := os.ReadFile(filepath.Join(repo, ".acrelay", "token"))
	if err != nil {
		t.Fatal(err)
	}
	agentTok := strings.TrimSpace(string(tokBytes))
	for _, secret := range []string{agentTok, adminTok} {
		if strings.Contains(raw, secret) || strings.Contains(out, secret) {
			t.Fatal("a token is in the profile or in init's output")
		}
	}
	if p.TokenFile != "token" || p.KeyFile != "agent.pem" || p.URL != url || p.RepositoryID != "repo:example/app" ||
		p.IdentityID != res.IdentityID || p.SigningKeyID != res.SigningKeyID || uuid.Validate(p.DeviceID) != nil {
		t.Fatalf("profile %s", raw)
	}
	for _, f := range []string{profPath, filepath.Join(repo, ".acrelay", "token"), filepath.Join(repo, ".acrelay", "agent.pem")} {
		if st, err := os.Stat(f); err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v %v", f, err, st)
		}
	}
	if st := git(t, repo, "status", "--porcelain"); st != "" {
		t.Fatalf("the profile shows in git status (not excluded):\n%s", st)
	}
	c, _ := client.New(url, agentTok)
	ids, keys, err := c.Identities(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if k, ok := keys[res.SigningKeyID]; !ok || k.IdentityID != res.IdentityID || correspondence.EncodePublicKey(k.PublicKey) != res.PublicKey ||
		ids[res.IdentityID].DisplayName != "parser-agent" || ids[res.IdentityID].Status != "active" {
		t.Fatalf("registry does not list the agent's key: %+v %+v", keys, ids)
	}

	// Again: nothing changes, nothing is registered twice.
	out2, _, err := runAgent(t, newAgentInitCmd(), "", args...)
	if err != nil {
		t.Fatal(err)
	}
	var res2 agentInitResult
	_ = json.Unmarshal([]byte(out2), &res2)
	if res2.ProfileStatus != "unchanged" || res2.KeyStatus != "existing" || res2.Registration != "already_registered" ||
		res2.IdentityID != res.IdentityID || res2.SigningKeyID != res.SigningKeyID || res2.DeviceID != res.DeviceID {
		t.Fatalf("second run: %+v", res2)
	}
	if _, raw2 := readProfileT(t, profPath); raw2 != raw {
		t.Fatalf("profile rewritten:\n%s\nvs\n%s", raw, raw2)
	}
	_, keys2, _ := c.Identities(context.Background())
	if len(keys2) != len(keys) {
		t.Fatalf("second run registered again: %d keys, then %d", len(keys), len(keys2))
	}

	// The profile is the lowest layer: sign and post run from it alone
	// (plus the session id, one per run).
	t.Setenv("ACRELAY_ADMIN_TOKEN", "")
	t.Setenv("ACRELAY_SESSION_ID", uuid.NewString())
	signed, _, err := runAgent(t, newSignCmd(), "", "--kind", "intent", "--repository-id", "repo:example/app",
		"--thread-id", "task:parser", "--path", "src/parser", "--summary", "rewrite the lexer", "--session-seq", "1")
	if err != nil {
		t.Fatal(err)
	}
	posted, _, err := runAgent(t, newPostCmd(), signed)
	if err != nil || !strings.Contains(posted, `"created":true`) {
		t.Fatalf("post from the profile: %v %s", err, posted)
	}
	ev, err := client.DecodeEvent([]byte(strings.TrimSpace(signed)))
	if err != nil || ev.Sender.IdentityID != res.IdentityID || ev.Sender.SigningKeyID != res.SigningKeyID || ev.Sender.DeviceID != res.DeviceID || ev.ProjectID != projectID {
		t.Fatalf("signed from the profile: %v %+v", err, ev)
	}
	// A flag wins over the profile; so does ACRELAY_*.
	if _, _, err := runAgent(t, newClaimsCmd(), "", "--repository-id", "repo:example/app", "--url", "relay.invalid"); err == nil || !strings.Contains(err.Error(), "want an absolute http(s) URL") {
		t.Fatal("--url did not win over the profile")
	}
	t.Setenv("ACRELAY_TOKEN", "acr_wrong")
	if _, _, err := runAgent(t, newClaimsCmd(), "", "--repository-id", "repo:example/app"); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("ACRELAY_TOKEN did not win over the profile's token_file: %v", err)
	}
	t.Setenv("ACRELAY_TOKEN", "")
	// "none" turns the profile off.
	if _, _, err := runAgent(t, newClaimsCmd(), "", "--repository-id", "repo:example/app", "--profile", "none"); err == nil || err.Error() != "no relay URL: set --url or ACRELAY_URL, or run acrelay agent init here (its profile names the relay)" {
		t.Fatalf("--profile none: %v", err)
	}
	// A subdirectory finds the profile of its work tree.
	sub := filepath.Join(repo, "src", "parser")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(sub)
	if out, _, err := runAgent(t, newClaimsCmd(), "", "--repository-id", "repo:example/app"); err != nil || !strings.Contains(out, `"claims":[]`) {
		t.Fatalf("claims from a subdirectory: %v %s", err, out)
	}
}

// TestAgentInitWithoutAdminPrintsOperatorCalls: without an admin token,
// init chooses the ids, writes the profile and prints the two admin
// calls; once an operator made them, a second run finds the key in the
// registry and keeps the same ids.
func TestAgentInitWithoutAdminPrintsOperatorCalls(t *testing.T) {
	agentEnvClear(t)
	url, adminTok, projectID := testRelay(t)
	dir := t.TempDir()
	t.Chdir(dir)
	admin, _ := client.New(url, adminTok)
	ctx := context.Background()
	tok, err := admin.CreateToken(ctx, projectID, []string{"read", "append"})
	if err != nil {
		t.Fatal(err)
	}
	tokFile := filepath.Join(dir, "agent.token")
	if err := os.WriteFile(tokFile, []byte(tok.Token), 0o600); err != nil {
		t.Fatal(err)
	}
	prof := filepath.Join(dir, "conf", "agent.json")
	args := []string{"--profile", prof, "--url", url, "--token-file", tokFile, "--display-name", "docs agent"}
	out, _, err := runAgent(t, newAgentInitCmd(), "", args...)
	if err != nil {
		t.Fatal(err)
	}
	p, raw := readProfileT(t, prof)
	if strings.Contains(out, tok.Token) || strings.Contains(raw, tok.Token) {
		t.Fatal("token printed or written inline")
	}
	if p.ProjectID != projectID || p.TokenFile != tokFile {
		t.Fatalf("profile %s", raw)
	}
	wantCalls := []string{
		"acrelay identity create --project-id " + projectID + " --identity-id " + p.IdentityID + " --display-name 'docs agent'",
		"acrelay key add --project-id " + projectID + " --identity-id " + p.IdentityID + " --signing-key-id " + p.SigningKeyID + " --public-key ",
		"registration  pending",
	}
	for _, w := range wantCalls {
		if !strings.Contains(out, w) {
			t.Fatalf("output lacks %q:\n%s", w, out)
		}
	}
	// The operator makes the two calls (here through the HTTP admin routes).
	priv, err := client.LoadPrivateKey(p.resolve(p.KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	pub := strings.Fields(out[strings.Index(out, "public key"):])[2]
	if _, err := admin.CreateIdentity(ctx, projectID, p.IdentityID, "docs agent"); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.AddKey(ctx, p.IdentityID, p.SigningKeyID, pub); err != nil {
		t.Fatal(err)
	}
	_ = priv
	out, _, err = runAgent(t, newAgentInitCmd(), "", args...)
	if err != nil || !strings.Contains(out, "registration  already_registered") || !strings.Contains(out, "("+"unchanged)") {
		t.Fatalf("second run: %v\n%s", err, out)
	}
}

// TestParseProfile: the profile is a closed object with the token only by
// reference; errors never quote a value.
func TestParseProfile(t *testing.T) {
	const secret = "acr_aaaaaaaaaaaaaaaaaaaaaaaaaa_bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	for _, tc := range []struct {
		name, in, want string
	}{
		{"ok", `{"profile_version":1,"url":"http://r","project_id":"p","identity_id":"i","signing_key_id":"k","device_id":"d","key_file":"agent.pem","token_env":"AGENT_TOKEN"}`, ""},
		{"inline token", `{"profile_version":1,"token":"` + secret + `"}`, `the profile holds a "token"`},
		{"unknown member", `{"profile_version":1,"tokn":"` + secret + `"}`, `unknown field "tokn"`},
		{"two references", `{"profile_version":1,"token_file":"t","token_env":"T"}`, `"token_file" and "token_env" are both set`},
		{"bad env name", `{"profile_version":1,"token_env":"1X"}`, `"token_env" is not an environment variable name`},
		{"version", `{"profile_version":2}`, "profile_version 2: this acrelay reads version 1"},
		{"not json", `[`, "not a JSON object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseProfile([]byte(tc.in))
			switch {
			case tc.want == "" && err != nil:
				t.Fatal(err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got %v, want %q", err, tc.want)
			case err != nil && strings.Contains(err.Error(), secret):
				t.Fatal("error quotes the token")
			}
		})
	}
}

func FuzzParseProfile(f *testing.F) {
	f.Add([]byte(`{"profile_version":1,"url":"http://r","token_file":"t"}`))
	f.Add([]byte(`{"profile_version":1,"token":"x"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := parseProfile(data)
		if err != nil {
			return
		}
		if p.TokenFile != "" && p.TokenEnv != "" {
			t.Fatal("both references accepted")
		}
		b, err := marshalProfile(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := parseProfile(b); err != nil {
			t.Fatalf("a written profile does not read back: %v", err)
		}
	})
}

// TestAgentInitRevokedKey: once an operator revoked the agent's key,
// init no longer answers "already_registered" (every event the key signs
// would be refused): it fails naming the revocation and the way out; a
// new key given with --key is registered for the same identity and the
// profile names it.
func TestAgentInitRevokedKey(t *testing.T) {
	agentEnvClear(t)
	url, adminTok, _ := testRelay(t)
	repo := gitRepo(t)
	t.Chdir(repo)
	t.Setenv("ACRELAY_ADMIN_TOKEN", adminTok)
	args := []string{"--url", url, "--display-name", "parser-agent", "--repository-id", "repo:example/app", "--issue-token", "--json"}
	out, _, err := runAgent(t, newAgentInitCmd(), "", args...)
	if err != nil {
		t.Fatal(err)
	}
	var res agentInitResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/admin/keys/"+res.SigningKeyID+"/revoke", nil)
	req.Header.Set("Authorization", "Bearer "+adminTok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("revoke: %d", resp.StatusCode)
	}

	_, _, err = runAgent(t, newAgentInitCmd(), "", args...)
	if err == nil || !strings.Contains(err.Error(), "the relay lists this key (signing key "+res.SigningKeyID+") as revoked") || !strings.Contains(err.Error(), "--key NEW.pem") {
		t.Fatalf("init with a revoked key: %v", err)
	}

	out, _, err = runAgent(t, newAgentInitCmd(), "", append(args, "--key", filepath.Join(repo, ".acrelay", "agent2.pem"))...)
	if err != nil {
		t.Fatal(err)
	}
	var res2 agentInitResult
	if err := json.Unmarshal([]byte(out), &res2); err != nil {
		t.Fatal(err)
	}
	p, _ := readProfileT(t, filepath.Join(repo, ".acrelay", "agent.json"))
	if res2.Registration != "registered" || res2.KeyStatus != "created" || res2.IdentityID != res.IdentityID || res2.SigningKeyID == res.SigningKeyID ||
		p.SigningKeyID != res2.SigningKeyID || p.resolve(p.KeyFile) != filepath.Join(repo, ".acrelay", "agent2.pem") {
		t.Fatalf("new key: %+v, profile %+v", res2, p)
	}
}

// TestProfileOverriddenBy: the ACRELAY_* variables that differ from the
// profile are named (acrelay mcp warns with them), the same values or a
// path naming the same file are not, and the token variable counts only
// when the profile does not itself name it.
func TestProfileOverriddenBy(t *testing.T) {
	dir := t.TempDir()
	p := &agentProfile{URL: "http://127.0.0.1:8080", ProjectID: "p", IdentityID: "me", SigningKeyID: "k", DeviceID: "d",
		KeyFile: "agent.pem", TokenFile: "token", path: filepath.Join(dir, "agent.json")}
	env := map[string]string{}
	get := func(n string) string { return env[n] }
	if got := p.overriddenBy(get); len(got) != 0 {
		t.Fatalf("empty environment: %v", got)
	}
	env = map[string]string{"ACRELAY_URL": p.URL, "ACRELAY_IDENTITY_ID": "me", "ACRELAY_KEY_FILE": filepath.Join(dir, "sub", "..", "agent.pem"),
		"ACRELAY_TOKEN_FILE": filepath.Join(dir, "token")}
	if got := p.overriddenBy(get); len(got) != 0 {
		t.Fatalf("same values: %v", got)
	}
	env = map[string]string{"ACRELAY_IDENTITY_ID": "someone-else", "ACRELAY_KEY_FILE": "other.pem", "ACRELAY_TOKEN": "acr_x", "ACRELAY_PROJECT_ID": "p"}
	if got := strings.Join(p.overriddenBy(get), ","); got != "ACRELAY_IDENTITY_ID,ACRELAY_KEY_FILE,ACRELAY_TOKEN" {
		t.Fatalf("overrides: %s", got)
	}
	p.TokenFile, p.TokenEnv = "", "ACRELAY_TOKEN"
	if got := strings.Join(p.overriddenBy(get), ","); got != "ACRELAY_IDENTITY_ID,ACRELAY_KEY_FILE" {
		t.Fatalf("token_env ACRELAY_TOKEN: %s", got)
	}
}

// TestSignMissingIdsSayWhere: a missing sender id names its flag, its
// variable and the profile; the session id, which no profile holds, says
// how to make one.
func TestSignMissingIdsSayWhere(t *testing.T) {
	agentEnvClear(t)
	t.Chdir(t.TempDir())
	key := filepath.Join(t.TempDir(), "agent.pem")
	if _, _, err := runAgent(t, newKeygenCmd(), "", "--out", key); err != nil {
		t.Fatal(err)
	}
	args := []string{"--kind", "intent", "--repository-id", "r", "--thread-id", "t", "--summary", "s", "--session-seq", "1", "--key", key}
	_, _, err := runAgent(t, newSignCmd(), "", args...)
	if err == nil || err.Error() != "--project-id (or ACRELAY_PROJECT_ID, or the agent profile: acrelay agent init) is required" {
		t.Fatalf("no project: %v", err)
	}
	ids := []string{"--project-id", uuid.NewString(), "--identity-id", uuid.NewString(), "--signing-key-id", uuid.NewString(), "--device-id", uuid.NewString()}
	_, _, err = runAgent(t, newSignCmd(), "", append(args, ids...)...)
	if err == nil || !strings.HasPrefix(err.Error(), "--session-id (or ACRELAY_SESSION_ID) is required: a new UUID for each run of the agent") {
		t.Fatalf("no session: %v", err)
	}
}
