package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	toml "github.com/pelletier/go-toml/v2"
	"github.com/spf13/cobra"

	"github.com/acrelay/acrelay/client"
)

func init() { rootCmd.AddCommand(newSetupCmd()) }

// setupClients are the coding clients setup knows, in help order.
var setupClients = []string{"claude-code", "codex", "cursor", "gemini"}

// setupOptions are the inputs of setup.
type setupOptions struct {
	client  string
	dir     string // repository root; "" = the git work tree's top, else the working directory
	command string // the acrelay executable the client runs; "" = this one
	profile string // --profile / ACRELAY_PROFILE
	print   bool
	noHooks bool
}

func newSetupCmd() *cobra.Command {
	var o setupOptions
	cmd := &cobra.Command{
		Use:   "setup claude-code|codex|cursor|gemini",
		Short: "Write a coding client's MCP configuration (and inbox hook) for this repository",
		Long: `setup adds acrelay to one coding client's configuration for the current
repository: an MCP server entry named "acrelay" that runs "acrelay mcp",
and, where the client has one, a session-start and prompt-submit hook
that runs "acrelay inbox --hook CLIENT", so news reaches the agent's
next turn. It merges: other servers, hooks and settings are kept as
they are, and running it again changes nothing. It prints the diff of
every file it writes; --print prints the diffs and writes nothing.

  claude-code  .mcp.json (mcpServers.acrelay); hooks SessionStart and
               UserPromptSubmit in .claude/settings.json
  codex        .codex/config.toml ([mcp_servers.acrelay], with env_vars
               naming the profile's token_env and the ACRELAY_* variables
               set when setup runs, since Codex passes an MCP server only
               an allowlist of variables; [features]
               codex_hooks = true); hooks SessionStart and
               UserPromptSubmit in .codex/hooks.json. Codex reads a
               project's .codex/ only once the project is trusted.
  cursor       .cursor/mcp.json (mcpServers.acrelay). No hook: Cursor's
               prompt hook can allow or block a prompt, not add to it;
               the agent reads news with the MCP tools.
  gemini       .gemini/settings.json (mcpServers.acrelay, with the
               token variable passed explicitly: Gemini CLI withholds
               variables named like secrets from MCP servers); hooks
               SessionStart and BeforeAgent (enable hooks in Gemini's
               settings if your version keeps them off).

The server and the hooks find the agent profile the way every agent
command does (.acrelay/agent.json of the work tree; run acrelay agent
init first); a profile elsewhere is named by ACRELAY_PROFILE in the
entry. No token is ever written: only the name of the variable or the
file that holds it, through the profile.`,
		Example: `  acrelay agent init --url http://127.0.0.1:8080 --repository-id repo:example/app
  acrelay setup claude-code
  acrelay setup codex --print`,
		Args:      cobra.ExactArgs(1),
		ValidArgs: setupClients,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.client = args[0]
			return runSetup(o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.dir, "dir", "", "repository root to configure (default: the top of the current git work tree, else the working directory)")
	fs.StringVar(&o.command, "command", "", `acrelay executable the client starts (default "acrelay" when that is this executable on PATH, else this executable's absolute path)`)
	fs.StringVar(&o.profile, "profile", envOr("ACRELAY_PROFILE", ""), "agent profile the server and hooks read (env ACRELAY_PROFILE; default: the work tree's .acrelay/agent.json)")
	fs.BoolVar(&o.print, "print", false, "print the changes as diffs and write nothing")
	fs.BoolVar(&o.noHooks, "no-hooks", false, "configure the MCP server only, no inbox hook")
	return cmd
}

// fileEdit is one file setup writes: its path relative to the root, its
// bytes before (nil when absent) and after.
type fileEdit struct {
	rel           string
	before, after []byte
	mode          os.FileMode
}

// setupPlan is what setup would do for one client: the files and notes
// (what the client needs besides, what was left alone).
type setupPlan struct {
	edits []fileEdit
	notes []string
}

// runSetup plans the client's edits, prints each diff and writes them
// unless o.print.
func runSetup(o setupOptions, stdout, stderr io.Writer) error {
	if !slices.Contains(setupClients, o.client) {
		return fmt.Errorf("unknown client %q: want one of %s", o.client, strings.Join(setupClients, ", "))
	}
	root := o.dir
	if root == "" {
		cwd, err := os.Getwd()
		if err != nil {
			return err
		}
		if root = gitTopLevel(cwd); root == "" {
			root = cwd
		}
	}
	root, err := filepath.Abs(root)
	if err != nil {
		return err
	}
	if o.command == "" {
		if o.command, err = defaultAcrelayCommand(); err != nil {
			return err
		}
	}
	plan, err := planSetup(o, root)
	if err != nil {
		return err
	}
	for _, e := range plan.edits {
		d := unifiedDiff(e.rel, e.before, e.after)
		switch {
		case d == "":
			fmt.Fprintf(stdout, "%s: unchanged\n", e.rel)
			continue
		case o.print:
			fmt.Fprintf(stdout, "%s: would change (--print: nothing written)\n", e.rel)
		case e.before == nil:
			fmt.Fprintf(stdout, "%s: created\n", e.rel)
		default:
			fmt.Fprintf(stdout, "%s: updated\n", e.rel)
		}
		io.WriteString(stdout, d)
		if o.print {
			continue
		}
		path := filepath.Join(root, e.rel)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := client.WriteFileAtomic(path, e.after, e.mode); err != nil {
			return fmt.Errorf("write %s: %w", e.rel, err)
		}
	}
	for _, n := range plan.notes {
		fmt.Fprintf(stderr, "acrelay: note: %s\n", n)
	}
	return nil
}

// defaultAcrelayCommand is "acrelay" when PATH finds this executable
// under that name, else this executable's absolute path. An executable
// that go run built in a temporary directory is refused: the path would
// be gone when go run exits, leaving the client (or the git hook) a
// command that does not exist.
func defaultAcrelayCommand() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "acrelay", nil
	}
	if lp, err := exec.LookPath("acrelay"); err == nil {
		a, err1 := os.Stat(lp)
		b, err2 := os.Stat(exe)
		if err1 == nil && err2 == nil && os.SameFile(a, b) {
			return "acrelay", nil
		}
	}
	if goRunBuild(exe) {
		return "", errors.New("this acrelay runs from go run's temporary build, which is deleted when it exits: install it (go install ./cmd/acrelay, with $(go env GOPATH)/bin on PATH) and run this again, or pass --command /path/to/acrelay")
	}
	return exe, nil
}

// goRunBuild reports whether exe is a binary go run built and will
// delete: $TMPDIR/go-build<digits>/b<nnn>/exe/<name>.
func goRunBuild(exe string) bool {
	dir := filepath.Dir(exe)
	return filepath.Base(dir) == "exe" && strings.HasPrefix(filepath.Base(filepath.Dir(filepath.Dir(dir))), "go-build")
}

// serverEntry is what the MCP entry needs: the command, the variables to
// set in its environment (profile location; the token variable for
// clients that withhold it) and the token variable's name.
type serverEntry struct {
	command     string
	profileEnv  string // value for ACRELAY_PROFILE, "" when the default lookup finds it
	tokenEnv    string // the profile's token_env, "" when none
	hookCommand string // the shell command of the inbox hook, without its client word
}

// planSetup reads the files the client's configuration lives in and
// computes the new bytes.
func planSetup(o setupOptions, root string) (*setupPlan, error) {
	plan := &setupPlan{}
	var prof *agentProfile
	var err error
	if o.profile != "" && o.profile != profileNone {
		prof, err = loadProfile(absFrom(root, o.profile))
	} else if o.profile == "" {
		prof, err = findProfileFrom(root)
	}
	if err != nil {
		return nil, err
	}
	entry := serverEntry{command: o.command}
	if prof == nil {
		plan.notes = append(plan.notes, "no agent profile found: run acrelay agent init here before starting the client (acrelay mcp and inbox read it), or set the ACRELAY_* variables")
	} else {
		if prof.path != filepath.Join(root, profileDirName, profileFileName) {
			entry.profileEnv = prof.path
		}
		entry.tokenEnv = prof.TokenEnv
	}
	entry.hookCommand = shellQuote(o.command) + " inbox --hook"
	if entry.profileEnv != "" {
		entry.hookCommand = "ACRELAY_PROFILE=" + shellQuote(entry.profileEnv) + " " + entry.hookCommand
	}
	switch o.client {
	case "claude-code":
		err = planClaude(plan, root, entry, !o.noHooks)
	case "codex":
		err = planCodex(plan, root, entry, !o.noHooks)
	case "cursor":
		err = planCursor(plan, root, entry)
	case "gemini":
		err = planGemini(plan, root, entry, !o.noHooks)
	}
	if err != nil {
		return nil, err
	}
	return plan, nil
}

// findProfileFrom is findProfile's default lookup run from dir.
func findProfileFrom(dir string) (*agentProfile, error) {
	if v := os.Getenv("ACRELAY_PROFILE"); v != "" {
		return findProfile(v)
	}
	for _, path := range defaultProfilePaths(dir) {
		if _, err := os.Stat(path); err == nil {
			return loadProfile(path)
		}
	}
	return nil, nil
}

// readConfig returns a file's bytes, nil when it does not exist.
func readConfig(root, rel string) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(root, rel))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", rel, err)
	}
	return b, nil
}

// mustJSON encodes v (maps are written with sorted keys).
func mustJSON(v any) jsontext.Value {
	b, err := jsonv2.Marshal(v, jsonv2.Deterministic(true))
	if err != nil {
		panic(err)
	}
	return b
}

func jsonUnmarshal(b []byte, v any) error { return jsonv2.Unmarshal(b, v) }

// mergeMCPServer sets mcpServers.acrelay of the JSON file rel to server.
func mergeMCPServer(root, rel string, server map[string]any) (fileEdit, error) {
	before, err := readConfig(root, rel)
	if err != nil {
		return fileEdit{}, err
	}
	doc, err := parseJSONObject(before)
	if err != nil {
		return fileEdit{}, fmt.Errorf("%s: %w", rel, err)
	}
	servers, err := doc.object("mcpServers")
	if err != nil {
		return fileEdit{}, fmt.Errorf("%s: %w", rel, err)
	}
	if prev, ok := servers.get("acrelay"); ok {
		var was map[string]any
		if jsonUnmarshal(prev, &was) == nil {
			server = keepUserMembers(was, server)
		}
	}
	servers.set("acrelay", mustJSON(server))
	doc.setObject("mcpServers", servers)
	return keepIfSame(fileEdit{rel: rel, before: before, after: doc.indented(), mode: 0o644}, doc)
}

// setupOwnedMembers are the members of the acrelay server entry setup
// writes; every other member a user added (Gemini's timeout or trust,
// Codex's startup_timeout_sec, a cwd, …) is kept by a later run.
var setupOwnedMembers = []string{"type", "command", "args", "env", "env_vars"}

// keepUserMembers returns server (the entry setup writes) with what the
// user added to the previous entry was: members setup does not own, and
// env variables whose names are not ACRELAY_* (setup owns those, and
// drops the ones it no longer sets). Values of nested objects other than
// env are kept as they were.
func keepUserMembers(was, server map[string]any) map[string]any {
	out := maps.Clone(server)
	for k, v := range was {
		if !slices.Contains(setupOwnedMembers, k) {
			out[k] = v
		}
	}
	if oldEnv, ok := was["env"].(map[string]any); ok {
		env := map[string]any{}
		switch e := server["env"].(type) {
		case map[string]string:
			for k, v := range e {
				env[k] = v
			}
		case map[string]any:
			maps.Copy(env, e)
		}
		for k, v := range oldEnv {
			if _, set := env[k]; !set && !strings.HasPrefix(k, "ACRELAY_") {
				env[k] = v
			}
		}
		if len(env) > 0 {
			out["env"] = env
		}
	}
	return out
}

// keepIfSame keeps a file's bytes when the merge changed nothing in its
// content (formatting is left as the user had it).
func keepIfSame(e fileEdit, doc *jsonObject) (fileEdit, error) {
	if e.before == nil {
		return e, nil
	}
	old, err := parseJSONObject(e.before)
	if err == nil && string(old.compact()) == string(doc.compact()) {
		e.after = e.before
	}
	return e, nil
}

// hookMarker identifies acrelay's hook in a client's hook list.
const hookMarker = " inbox --hook"

// mergeHooks puts hook (one hook handler object) under each of events in
// the "hooks" member of the JSON file rel, in the event → [{matcher?,
// hooks: [handler]}] shape Claude Code, Codex and Gemini CLI share. An
// existing acrelay handler (its command runs "inbox --hook") is replaced
// where it stands; otherwise a new group is appended.
func mergeHooks(root, rel string, events []string, hook func(event string) map[string]any) (fileEdit, error) {
	before, err := readConfig(root, rel)
	if err != nil {
		return fileEdit{}, err
	}
	doc, err := parseJSONObject(before)
	if err != nil {
		return fileEdit{}, fmt.Errorf("%s: %w", rel, err)
	}
	if err := mergeHooksInto(doc, events, hook); err != nil {
		return fileEdit{}, fmt.Errorf("%s: %w", rel, err)
	}
	return keepIfSame(fileEdit{rel: rel, before: before, after: doc.indented(), mode: 0o644}, doc)
}

// mergeHooksInto is mergeHooks on a document already read.
func mergeHooksInto(doc *jsonObject, events []string, hook func(event string) map[string]any) error {
	hooks, err := doc.object("hooks")
	if err != nil {
		return err
	}
	for _, ev := range events {
		handler := mustJSON(hook(ev))
		groups, err := jsonArray(hooks.vals[ev])
		if err != nil {
			return fmt.Errorf("hooks.%s: %w", ev, err)
		}
		placed := false
		for gi, g := range groups {
			if g.Kind() != '{' {
				continue
			}
			gobj, err := parseJSONObject(g)
			if err != nil {
				continue
			}
			hs, err := jsonArray(gobj.vals["hooks"])
			if err != nil || hs == nil {
				continue
			}
			changed := false
			for hi, h := range hs {
				if !placed && isAcrelayHook(h) {
					hs[hi], placed, changed = handler, true, true
				}
			}
			if changed {
				gobj.set("hooks", arrayValue(hs))
				groups[gi] = gobj.compact()
			}
		}
		if !placed {
			groups = append(groups, mustJSON(map[string]any{"hooks": []any{hook(ev)}}))
		}
		hooks.set(ev, arrayValue(groups))
	}
	doc.setObject("hooks", hooks)
	return nil
}

// isAcrelayHook reports whether a hook handler runs acrelay's inbox hook.
func isAcrelayHook(h jsontext.Value) bool {
	hobj, err := parseJSONObject(h)
	if err != nil {
		return false
	}
	c, ok := hobj.get("command")
	var text string
	if !ok || jsonUnmarshal(c, &text) != nil {
		return false
	}
	return strings.Contains(text, hookMarker) && strings.Contains(text, "acrelay")
}

// stdioServer is the MCP entry most clients take: command, args, env.
func stdioServer(e serverEntry, env map[string]string) map[string]any {
	s := map[string]any{"command": e.command, "args": []string{"mcp"}}
	if len(env) > 0 {
		s["env"] = env
	}
	return s
}

func planClaude(plan *setupPlan, root string, e serverEntry, hooks bool) error {
	env := map[string]string{}
	if e.profileEnv != "" {
		env["ACRELAY_PROFILE"] = e.profileEnv
	}
	server := stdioServer(e, env)
	server["type"] = "stdio"
	ed, err := mergeMCPServer(root, ".mcp.json", server)
	if err != nil {
		return err
	}
	plan.edits = append(plan.edits, ed)
	if !hooks {
		return nil
	}
	ed, err = mergeHooks(root, filepath.Join(".claude", "settings.json"), []string{"SessionStart", "UserPromptSubmit"},
		func(string) map[string]any {
			return map[string]any{"type": "command", "command": e.hookCommand + " claude-code", "timeout": 30}
		})
	if err != nil {
		return err
	}
	plan.edits = append(plan.edits, ed)
	plan.notes = append(plan.notes, "Claude Code asks once to approve the project's .mcp.json servers")
	return nil
}

// agentSettingEnv are the variables acrelay mcp reads its settings from
// (docs/agents.md), in the order setup lists them.
var agentSettingEnv = []string{"ACRELAY_PROFILE", "ACRELAY_URL", "ACRELAY_TOKEN", "ACRELAY_TOKEN_FILE", "ACRELAY_KEY_FILE",
	"ACRELAY_PROJECT_ID", "ACRELAY_IDENTITY_ID", "ACRELAY_SIGNING_KEY_ID", "ACRELAY_DEVICE_ID", "ACRELAY_SESSION_ID",
	"ACRELAY_KEYRING", "ACRELAY_STATE_DIR"}

// codexServer is [mcp_servers.acrelay] of Codex's config.toml.
type codexServer struct {
	Command string            `toml:"command"`
	Args    []string          `toml:"args"`
	EnvVars []string          `toml:"env_vars,omitempty"`
	Env     map[string]string `toml:"env,inline,omitempty"`
}

func planCodex(plan *setupPlan, root string, e serverEntry, hooks bool) error {
	rel := filepath.Join(".codex", "config.toml")
	before, err := readConfig(root, rel)
	if err != nil {
		return err
	}
	s := codexServer{Command: e.command, Args: []string{"mcp"}}
	// Codex passes a server only an allowlist of variables: name the
	// token's, and the ACRELAY_* settings set here now (names, never values).
	if e.tokenEnv != "" {
		s.EnvVars = []string{e.tokenEnv}
	}
	for _, name := range agentSettingEnv {
		if os.Getenv(name) != "" && !slices.Contains(s.EnvVars, name) {
			s.EnvVars = append(s.EnvVars, name)
		}
	}
	if e.profileEnv != "" {
		s.Env = map[string]string{"ACRELAY_PROFILE": e.profileEnv}
	}
	// What the user added to the table is kept: keys setup does not own
	// (startup_timeout_sec, tool_timeout_sec, cwd, enabled, …; nested
	// tables other than env cannot be carried and are left out) and env
	// variables not named ACRELAY_*.
	var extras map[string]any
	var doc map[string]any
	if toml.Unmarshal(before, &doc) == nil {
		if was, ok := lookupTOML(doc, []string{"mcp_servers", "acrelay"}).(map[string]any); ok {
			kept := keepUserMembers(was, map[string]any{})
			if env, ok := kept["env"].(map[string]any); ok {
				for k, v := range env {
					if str, ok := v.(string); ok {
						if s.Env == nil {
							s.Env = map[string]string{}
						}
						s.Env[k] = str
					}
				}
				delete(kept, "env")
			}
			for k, v := range kept {
				if _, nested := v.(map[string]any); nested {
					delete(kept, k)
				}
			}
			extras = kept
		}
	}
	body, err := toml.Marshal(s)
	if err != nil {
		return err
	}
	if len(extras) > 0 {
		more, err := toml.Marshal(extras)
		if err != nil {
			return err
		}
		body = append(body, more...)
	}
	after, err := tomlReplaceTable(before, "mcp_servers.acrelay", body)
	if err != nil {
		return fmt.Errorf("%s: %w", rel, err)
	}
	if hooks {
		if after, err = tomlEnableFeature(after, "codex_hooks"); err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
	}
	plan.edits = append(plan.edits, fileEdit{rel: rel, before: before, after: after, mode: 0o644})
	plan.notes = append(plan.notes, "Codex reads a project's .codex/ only when the project is trusted")
	if !hooks {
		return nil
	}
	ed, err := mergeHooks(root, filepath.Join(".codex", "hooks.json"), []string{"SessionStart", "UserPromptSubmit"},
		func(string) map[string]any {
			return map[string]any{"type": "command", "command": e.hookCommand + " codex", "timeout": 30, "statusMessage": "Reading the acrelay inbox"}
		})
	if err != nil {
		return err
	}
	plan.edits = append(plan.edits, ed)
	return nil
}

// tomlEnableFeature sets [features] name = true unless it is set: a true
// value is kept; a false one is the user's choice, kept, and an error
// would be wrong, so the file is returned as it is.
func tomlEnableFeature(doc []byte, name string) ([]byte, error) {
	var m map[string]any
	if err := toml.Unmarshal(doc, &m); err != nil {
		return nil, err
	}
	if f, ok := m["features"].(map[string]any); ok {
		if _, set := f[name]; set {
			return doc, nil
		}
	}
	lines := strings.SplitAfter(string(doc), "\n")
	var out strings.Builder
	done := false
	for _, l := range lines {
		out.WriteString(l)
		if !done {
			if mm := tomlHeader.FindStringSubmatch(strings.TrimRight(l, "\r\n")); mm != nil && strings.TrimSpace(mm[1]) == "features" && !strings.HasPrefix(strings.TrimSpace(l), "[[") {
				if !strings.HasSuffix(l, "\n") {
					out.WriteString("\n")
				}
				out.WriteString(name + " = true\n")
				done = true
			}
		}
	}
	if !done {
		s := out.String()
		if s != "" && !strings.HasSuffix(s, "\n") {
			out.WriteString("\n")
		}
		out.WriteString("\n[features]\n" + name + " = true\n")
	}
	res := []byte(out.String())
	var check map[string]any
	if err := toml.Unmarshal(res, &check); err != nil {
		return nil, fmt.Errorf("[features] is defined in a way this edit cannot extend: set %s = true by hand (%v)", name, err)
	}
	if f, ok := check["features"].(map[string]any); !ok || f[name] != true {
		return nil, fmt.Errorf("[features] is defined in a way this edit cannot extend: set %s = true by hand", name)
	}
	return res, nil
}

func planCursor(plan *setupPlan, root string, e serverEntry) error {
	env := map[string]string{}
	if e.profileEnv != "" {
		env["ACRELAY_PROFILE"] = e.profileEnv
	} else {
		// Cursor does not promise the server's working directory: name the
		// work tree's profile through its own variable.
		env["ACRELAY_PROFILE"] = "${workspaceFolder}/" + profileDirName + "/" + profileFileName
	}
	if e.tokenEnv != "" {
		env[e.tokenEnv] = "${env:" + e.tokenEnv + "}"
	}
	ed, err := mergeMCPServer(root, filepath.Join(".cursor", "mcp.json"), stdioServer(e, env))
	if err != nil {
		return err
	}
	plan.edits = append(plan.edits, ed)
	plan.notes = append(plan.notes, "Cursor: no inbox hook is wired (its prompt hook cannot add context); the agent reads news through the MCP tools, or run acrelay inbox yourself")
	return nil
}

func planGemini(plan *setupPlan, root string, e serverEntry, hooks bool) error {
	env := map[string]string{}
	if e.profileEnv != "" {
		env["ACRELAY_PROFILE"] = e.profileEnv
	}
	if e.tokenEnv != "" {
		env[e.tokenEnv] = "$" + e.tokenEnv // Gemini CLI withholds *TOKEN* variables unless named here
	}
	rel := filepath.Join(".gemini", "settings.json")
	ed, err := mergeMCPServer(root, rel, stdioServer(e, env))
	if err != nil {
		return err
	}
	if hooks {
		// Both edits are of one file: the hooks go into the merged server.
		doc, err := parseJSONObject(ed.after)
		if err != nil {
			return err
		}
		err = mergeHooksInto(doc, []string{"SessionStart", "BeforeAgent"}, func(string) map[string]any {
			return map[string]any{"name": "acrelay-inbox", "type": "command", "command": e.hookCommand + " gemini",
				"description": "news from acrelay since the agent's last look"}
		})
		if err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		ed.after = doc.indented()
		ed, _ = keepIfSame(ed, doc)
		plan.notes = append(plan.notes, "Gemini CLI: hooks run only where hooks are enabled in its settings")
	}
	plan.edits = append(plan.edits, ed)
	return nil
}
