package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	toml "github.com/pelletier/go-toml/v2"

	"github.com/acrelay/acrelay/client"
)

// mcpEntry is the part of a client's MCP server entry that starts it.
type mcpEntry struct {
	Command string            `json:"command" toml:"command"`
	Args    []string          `json:"args" toml:"args"`
	Env     map[string]string `json:"env" toml:"env"`
	EnvVars []string          `json:"-" toml:"env_vars"`
	Type    string            `json:"type" toml:"-"`
}

func readJSONFile(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v\n%s", path, err, data)
	}
}

// TestSetupMergesAndIsIdempotent: for each client, setup keeps the
// servers, hooks, settings and (in TOML) comments already there, adds
// acrelay's entry and hook, prints the diff, and a second run changes
// nothing; --print writes nothing; a profile naming its token by
// variable gets that variable passed (Codex env_vars, Gemini env) and
// its value is never written.
func TestSetupMergesAndIsIdempotent(t *testing.T) {
	agentEnvClear(t)
	repo := gitRepo(t)
	t.Chdir(repo)
	const secret = "acr_secretsecretsecretsecretsecre_0123456789012345678901234567890123456789012"
	t.Setenv("AGENT_TOKEN", secret)
	prof := filepath.Join(repo, ".acrelay", "agent.json")
	if err := os.MkdirAll(filepath.Dir(prof), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(prof, []byte(`{"profile_version":1,"url":"http://127.0.0.1:9","project_id":"p","identity_id":"i","signing_key_id":"k","device_id":"d","key_file":"agent.pem","token_env":"AGENT_TOKEN","repository_id":"repo:x"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		".mcp.json":             `{"mcpServers": {"other": {"command": "other-server", "args": ["--x"]}}, "keep": true}`,
		".claude/settings.json": `{"permissions": {"allow": ["Bash(ls)"]}, "hooks": {"SessionStart": [{"matcher": "startup", "hooks": [{"type": "command", "command": "echo hi"}]}]}}`,
		".codex/config.toml":    "# team settings\nmodel = \"o3\" # the model\n\n[mcp_servers.other]\ncommand = \"other-server\"\n\n[features]\nweb_search = true\n",
		".cursor/mcp.json":      `{"mcpServers": {"other": {"url": "http://127.0.0.1:3000/mcp"}}}`,
		".gemini/settings.json": `{"theme": "Default", "mcpServers": {"other": {"command": "o"}}}`,
	}
	for rel, content := range files {
		path := filepath.Join(repo, rel)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("ACRELAY_URL", "http://127.0.0.1:9") // Codex must be told to pass it
	const bin = "/opt/acrelay/bin/acrelay"
	for _, cl := range setupClients {
		t.Run(cl, func(t *testing.T) {
			snapshot := map[string]string{}
			for rel := range files {
				b, _ := os.ReadFile(filepath.Join(repo, rel))
				snapshot[rel] = string(b)
			}
			out, _, err := runAgent(t, newSetupCmd(), "", cl, "--command", bin, "--print")
			if err != nil || !strings.Contains(out, "would change (--print: nothing written)") {
				t.Fatalf("--print: %v\n%s", err, out)
			}
			for rel, content := range snapshot {
				if b, _ := os.ReadFile(filepath.Join(repo, rel)); string(b) != content {
					t.Fatalf("--print wrote %s", rel)
				}
			}
			out, _, err = runAgent(t, newSetupCmd(), "", cl, "--command", bin)
			if err != nil || !strings.Contains(out, "+++ b/") {
				t.Fatalf("setup: %v\n%s", err, out)
			}
			again, _, err := runAgent(t, newSetupCmd(), "", cl, "--command", bin)
			if err != nil || strings.Contains(again, "+++") || strings.Count(again, ": unchanged\n") != strings.Count(again, "\n") {
				t.Fatalf("second run changed something: %v\n%s", err, again)
			}
		})
	}
	for rel := range files {
		if b, _ := os.ReadFile(filepath.Join(repo, rel)); strings.Contains(string(b), secret) {
			t.Fatalf("%s holds the token", rel)
		}
	}

	// Claude Code: both servers; the user's hook kept beside acrelay's.
	var claude struct {
		MCPServers map[string]mcpEntry `json:"mcpServers"`
		Keep       bool                `json:"keep"`
	}
	readJSONFile(t, filepath.Join(repo, ".mcp.json"), &claude)
	if e := claude.MCPServers["acrelay"]; e.Command != bin || strings.Join(e.Args, " ") != "mcp" || e.Type != "stdio" || len(e.Env) != 0 ||
		claude.MCPServers["other"].Command != "other-server" || !claude.Keep {
		t.Fatalf(".mcp.json: %+v", claude)
	}
	type hookGroup struct {
		Matcher string `json:"matcher"`
		Hooks   []struct {
			Type, Command string
		} `json:"hooks"`
	}
	var settings struct {
		Permissions map[string][]string    `json:"permissions"`
		Hooks       map[string][]hookGroup `json:"hooks"`
	}
	readJSONFile(t, filepath.Join(repo, ".claude", "settings.json"), &settings)
	ss := settings.Hooks["SessionStart"]
	if len(ss) != 2 || ss[0].Hooks[0].Command != "echo hi" || ss[1].Hooks[0].Command != bin+" inbox --hook claude-code" ||
		settings.Hooks["UserPromptSubmit"][0].Hooks[0].Command != bin+" inbox --hook claude-code" || settings.Permissions["allow"][0] != "Bash(ls)" {
		t.Fatalf(".claude/settings.json: %+v", settings)
	}

	// Codex: comments and other tables kept, env_vars names the token.
	raw, _ := os.ReadFile(filepath.Join(repo, ".codex", "config.toml"))
	for _, keep := range []string{"# team settings\n", "model = \"o3\" # the model\n", "[mcp_servers.other]\ncommand = \"other-server\"\n", "[features]\ncodex_hooks = true\nweb_search = true\n"} {
		if !strings.Contains(string(raw), keep) {
			t.Fatalf("config.toml lost %q:\n%s", keep, raw)
		}
	}
	var codex struct {
		MCPServers map[string]mcpEntry `toml:"mcp_servers"`
	}
	if err := toml.Unmarshal(raw, &codex); err != nil {
		t.Fatal(err)
	}
	if e := codex.MCPServers["acrelay"]; e.Command != bin || strings.Join(e.Args, " ") != "mcp" || strings.Join(e.EnvVars, ",") != "AGENT_TOKEN,ACRELAY_URL" {
		t.Fatalf("codex entry: %+v\n%s", e, raw)
	}

	// Cursor: the profile named through ${workspaceFolder}, the token by ${env:}.
	var cursor struct {
		MCPServers map[string]map[string]any `json:"mcpServers"`
	}
	readJSONFile(t, filepath.Join(repo, ".cursor", "mcp.json"), &cursor)
	env, _ := cursor.MCPServers["acrelay"]["env"].(map[string]any)
	if env["ACRELAY_PROFILE"] != "${workspaceFolder}/.acrelay/agent.json" || env["AGENT_TOKEN"] != "${env:AGENT_TOKEN}" || cursor.MCPServers["other"]["url"] != "http://127.0.0.1:3000/mcp" {
		t.Fatalf("cursor: %+v", cursor)
	}

	// Gemini: the token variable passed explicitly, hooks on both events.
	var gemini struct {
		Theme      string                 `json:"theme"`
		MCPServers map[string]mcpEntry    `json:"mcpServers"`
		Hooks      map[string][]hookGroup `json:"hooks"`
	}
	readJSONFile(t, filepath.Join(repo, ".gemini", "settings.json"), &gemini)
	if e := gemini.MCPServers["acrelay"]; e.Env["AGENT_TOKEN"] != "$AGENT_TOKEN" || gemini.Theme != "Default" || gemini.MCPServers["other"].Command != "o" ||
		gemini.Hooks["BeforeAgent"][0].Hooks[0].Command != bin+" inbox --hook gemini" || gemini.Hooks["SessionStart"][0].Hooks[0].Command != bin+" inbox --hook gemini" {
		t.Fatalf("gemini: %+v", gemini)
	}

	// A file that is not JSON is refused, not overwritten.
	if err := os.WriteFile(filepath.Join(repo, ".mcp.json"), []byte("{// comment\n}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runAgent(t, newSetupCmd(), "", "claude-code", "--command", bin); err == nil || !strings.Contains(err.Error(), ".mcp.json: not JSON") {
		t.Fatalf("broken .mcp.json: %v", err)
	}
}

// TestInitSetupHookAndServer: agent init, then setup claude-code with
// the real binary; the hook command setup wrote, run by a shell in the
// repository as Claude Code runs it, prints the inbox (the other
// identity's overlapping claim); the server command line setup wrote is
// the binary with "mcp", and, where this build has acrelay mcp, it
// answers an MCP initialize request over stdio.
func TestInitSetupHookAndServer(t *testing.T) {
	bin := acrelayBinary(t)
	r := newAgentRepo(t)
	me := r.selfSession(t)
	claimWithSummary(t, r.admin, me, "repo:example/app", "task:lexer", "lexer", time.Hour, "src/parser/lexer")
	if _, _, err := runAgent(t, newSetupCmd(), "", "claude-code", "--command", bin); err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		MCPServers map[string]mcpEntry `json:"mcpServers"`
	}
	readJSONFile(t, filepath.Join(r.dir, ".mcp.json"), &cfg)
	e := cfg.MCPServers["acrelay"]
	if e.Command != bin || strings.Join(e.Args, " ") != "mcp" {
		t.Fatalf("entry %+v", e)
	}
	var settings struct {
		Hooks map[string][]struct {
			Hooks []struct{ Command string } `json:"hooks"`
		} `json:"hooks"`
	}
	readJSONFile(t, filepath.Join(r.dir, ".claude", "settings.json"), &settings)
	hook := exec.Command("sh", "-c", settings.Hooks["SessionStart"][0].Hooks[0].Command)
	hook.Dir = r.dir
	hook.Stdin = strings.NewReader(`{"hook_event_name":"SessionStart"}`)
	out, err := hook.Output()
	if err != nil || !strings.Contains(string(out), "- [claim.open] identity \"bob\"") || !strings.Contains(string(out), "overlapping your active claim on src/parser/lexer") {
		t.Fatalf("hook: %v\n%s", err, out)
	}

	if err := exec.Command(bin, "mcp", "--help").Run(); err != nil {
		t.Skipf("this build has no acrelay mcp (it lands with the mcp branch): the config is checked, the start is not")
	}
	srv := exec.Command(e.Command, e.Args...)
	srv.Dir = r.dir
	srv.Env = os.Environ()
	for k, v := range e.Env {
		srv.Env = append(srv.Env, k+"="+v)
	}
	stdin, _ := srv.StdinPipe()
	stdout, _ := srv.StdoutPipe()
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); srv.Process.Kill(); srv.Wait() })
	if _, err := stdin.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"setup-test","version":"0"}}}` + "\n")); err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReader(stdout)
	line, err := rd.ReadString('\n')
	var resp struct {
		ID     int `json:"id"`
		Result struct {
			ServerInfo struct{ Name string } `json:"serverInfo"`
		} `json:"result"`
	}
	if err != nil || json.Unmarshal([]byte(line), &resp) != nil || resp.ID != 1 || resp.Result.ServerInfo.Name == "" {
		t.Fatalf("initialize: %v %q", err, line)
	}
	// The server signs as the profile says: a claim made through it is
	// the agent's, from the profile's device.
	for _, msg := range []string{
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"claim_paths","arguments":{"repository_id":"repo:example/app","paths":["docs"],"ttl_seconds":600}}}`,
	} {
		if _, err := stdin.Write([]byte(msg + "\n")); err != nil {
			t.Fatal(err)
		}
	}
	for {
		line, err = rd.ReadString('\n')
		if err != nil {
			t.Fatalf("claim_paths: %v", err)
		}
		if strings.HasPrefix(line, `{"jsonrpc":"2.0","id":2,`) {
			break
		}
	}
	if strings.Contains(line, `"isError":true`) {
		t.Fatalf("claim_paths: %s", line)
	}
	prof, _ := readProfileT(t, filepath.Join(r.dir, ".acrelay", "agent.json"))
	claims, err := r.admin.Claims(t.Context(), client.ClaimsQuery{RepositoryID: "repo:example/app", Path: "docs"})
	if err != nil || len(claims.Claims) != 1 {
		t.Fatalf("claims on docs: %v %s", err, claims.Raw)
	}
	if c := claims.Claims[0]; c.OwnerIdentityID != prof.IdentityID || c.DeviceID != prof.DeviceID {
		t.Fatalf("the claim made through acrelay mcp has identity %s device %s; the profile says %s and %s", c.OwnerIdentityID, c.DeviceID, prof.IdentityID, prof.DeviceID)
	}
}

// TestAgentDoorsHaveHelp: every command of the agent's doors has a help
// page with an example naming it.
func TestAgentDoorsHaveHelp(t *testing.T) {
	for _, path := range [][]string{{"agent"}, {"agent", "init"}, {"setup"}, {"guard"}, {"guard", "install"}, {"guard", "check"}, {"inbox"}} {
		cmd, _, err := rootCmd.Find(path)
		name := strings.Join(path, " ")
		if err != nil || cmd.CommandPath() != "acrelay "+name {
			t.Fatalf("%s not registered: %v", name, err)
		}
		if !strings.Contains(cmd.Example, "acrelay "+name) || cmd.Long == "" {
			t.Errorf("%s: no example or long help", name)
		}
		var out strings.Builder
		cmd.SetOut(&out)
		if err := cmd.Help(); err != nil || !strings.Contains(out.String(), "Usage:") {
			t.Errorf("%s --help: %v", name, err)
		}
	}
}

// FuzzParseJSONObject: whatever parses keeps its members and order
// through compact and indent.
func FuzzParseJSONObject(f *testing.F) {
	f.Add([]byte(`{"mcpServers":{"a":{"command":"x"}},"z":[1,2,{"q":null}]}`))
	f.Add([]byte(`{"a":1,"a":2}`))
	f.Add([]byte(" "))
	f.Fuzz(func(t *testing.T, data []byte) {
		o, err := parseJSONObject(data)
		if err != nil {
			return
		}
		again, err := parseJSONObject(o.indented())
		if err != nil {
			t.Fatalf("indented form does not parse: %v", err)
		}
		if string(again.compact()) != string(o.compact()) || strings.Join(again.names, "\x00") != strings.Join(o.names, "\x00") {
			t.Fatalf("round trip changed the object: %s vs %s", o.compact(), again.compact())
		}
	})
}

// FuzzTOMLReplaceTable: an edit either refuses or yields TOML whose
// acrelay table is exactly the one asked for (the function checks that
// nothing else changed), and a second edit changes nothing.
func FuzzTOMLReplaceTable(f *testing.F) {
	f.Add([]byte("model = \"o3\"\n[mcp_servers.acrelay]\ncommand = \"old\"\n[x]\ny = 1\n"))
	f.Add([]byte("[mcp_servers]\nacrelay = { command = \"inline\" }\n"))
	f.Add([]byte(""))
	body := []byte("command = 'acrelay'\nargs = ['mcp']\n")
	f.Fuzz(func(t *testing.T, doc []byte) {
		out, err := tomlReplaceTable(doc, "mcp_servers.acrelay", body)
		if err != nil {
			return
		}
		var m map[string]any
		if err := toml.Unmarshal(out, &m); err != nil {
			t.Fatalf("result is not TOML: %v", err)
		}
		again, err := tomlReplaceTable(out, "mcp_servers.acrelay", body)
		if err != nil || string(again) != string(out) {
			t.Fatalf("second edit: %v\n%q\n%q", err, out, again)
		}
	})
}

// TestSetupKeepsUserMembersOfItsEntry: what a user added to acrelay's own
// server entry (Codex's startup_timeout_sec, Gemini's timeout and trust,
// an env variable of theirs) survives a later setup run; the ACRELAY_*
// variables are setup's (a stale ACRELAY_PROFILE goes), and the
// members setup owns are rewritten.
func TestSetupKeepsUserMembersOfItsEntry(t *testing.T) {
	agentEnvClear(t)
	repo := gitRepo(t)
	t.Chdir(repo)
	files := map[string]string{
		".codex/config.toml": "[mcp_servers.acrelay]\ncommand = 'old-acrelay'\nargs = ['mcp']\nstartup_timeout_sec = 30\nenv = { RUST_LOG = 'info', ACRELAY_PROFILE = 'stale.json' }\n",
		".gemini/settings.json": `{"mcpServers": {"acrelay": {"command": "old-acrelay", "args": ["mcp"], "timeout": 60000, "trust": true, ` +
			`"env": {"HTTPS_PROXY": "http://proxy:3128", "ACRELAY_PROFILE": "stale.json"}}}}`,
	}
	for rel, content := range files {
		path := filepath.Join(repo, rel)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const bin = "/opt/acrelay/bin/acrelay"
	for _, cl := range []string{"codex", "gemini"} {
		if _, _, err := runAgent(t, newSetupCmd(), "", cl, "--command", bin, "--no-hooks"); err != nil {
			t.Fatalf("%s: %v", cl, err)
		}
		again, _, err := runAgent(t, newSetupCmd(), "", cl, "--command", bin, "--no-hooks")
		if err != nil || strings.Contains(again, "+++") {
			t.Fatalf("%s: second run changed something: %v\n%s", cl, err, again)
		}
	}
	data, err := os.ReadFile(filepath.Join(repo, ".codex", "config.toml"))
	if err != nil {
		t.Fatal(err)
	}
	var codex struct {
		MCPServers map[string]map[string]any `toml:"mcp_servers"`
	}
	if err := toml.Unmarshal(data, &codex); err != nil {
		t.Fatal(err)
	}
	e := codex.MCPServers["acrelay"]
	if env, _ := e["env"].(map[string]any); e["command"] != bin || e["startup_timeout_sec"] != int64(30) || len(env) != 1 || env["RUST_LOG"] != "info" {
		t.Fatalf("codex entry: %#v\n%s", e, data)
	}
	var gemini struct {
		MCPServers map[string]map[string]any `json:"mcpServers"`
	}
	readJSONFile(t, filepath.Join(repo, ".gemini", "settings.json"), &gemini)
	g := gemini.MCPServers["acrelay"]
	if env, _ := g["env"].(map[string]any); g["command"] != bin || g["timeout"] != float64(60000) || g["trust"] != true || len(env) != 1 || env["HTTPS_PROXY"] != "http://proxy:3128" {
		t.Fatalf("gemini entry: %#v", g)
	}
}

// TestGoRunBuildIsNotACommand: the temporary binary of go run (the
// README runs acrelay that way) is recognised, so setup and guard
// install refuse to write its soon-deleted path into a client's
// configuration or a git hook; an installed binary is not mistaken for
// one.
func TestGoRunBuildIsNotACommand(t *testing.T) {
	for exe, want := range map[string]bool{
		"/tmp/go-build2314027682/b001/exe/acrelay":                  true,
		"/var/folders/x/T/go-build123/b001/exe/acrelay":             true,
		"/root/go/bin/acrelay":                                      false,
		"/usr/local/bin/acrelay":                                    false,
		"/home/me/exe/acrelay":                                      false,
		"/tmp/go-build2314027682/b001/acrelay.test":                 false,
		"/opt/acrelay/go-build-cache/acrelay":                       false,
		"/tmp/TestInitSetupHookAndServer123/001/acrelay-under-test": false,
	} {
		if got := goRunBuild(exe); got != want {
			t.Errorf("%s: %v, want %v", exe, got, want)
		}
	}
}
