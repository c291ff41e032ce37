package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acrelay/acrelay/store"
)

// TestProjectList: acrelay project list finds every project id again,
// with its visibility, as text lines and as JSON.
func TestProjectList(t *testing.T) {
	clearEnv(t)
	data := servedStore(t)
	run := func(args ...string) string {
		t.Helper()
		root := newTestRoot(newAdminCmds()...)
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetArgs(append(args, "--data-dir", data))
		if err := root.Execute(); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return out.String()
	}
	const public = "11111111-1111-4111-8111-111111111111"
	run("project", "create", "--project-id", public, "--public")

	ctx := context.Background()
	st, err := openStore(ctx, storeConfig{DataDir: data, SQLiteSync: "fdatasync", SQLiteMaxBatch: 128}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	want, err := st.ProjectIDs(ctx, "", 10)
	st.Close()
	if err != nil || len(want) != 2 || !slices.Contains(want, public) {
		t.Fatalf("store holds %v (%v), want the first-start project and %s", want, err, public)
	}

	var got struct {
		Projects []map[string]string `json:"projects"`
	}
	if err := json.Unmarshal([]byte(run("project", "list", "--json")), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Projects) != 2 {
		t.Fatalf("projects %v, want %v", got.Projects, want)
	}
	for i, p := range got.Projects {
		vis := map[bool]string{true: store.VisibilityPublic, false: store.VisibilityPrivate}[p["project_id"] == public]
		if p["project_id"] != want[i] || p["visibility"] != vis || len(p) != 3 {
			t.Fatalf("project row %v, want %s %s and created_at", p, want[i], vis)
		}
		if _, err := time.Parse("2006-01-02T15:04:05.000Z", p["created_at"]); err != nil {
			t.Fatalf("created_at: %v", err)
		}
	}
	lines := strings.Split(strings.TrimSpace(run("project", "list")), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], want[0]+"\t") || !strings.Contains(run("project", "list"), public+"\tpublic\t") {
		t.Fatalf("text listing %q", lines)
	}
}

// TestUnknownSubcommandExitsNonZero: a command group given a word that
// names none of its subcommands is an error (exit 1), not its help page
// and exit 0; the group alone still prints its help.
func TestUnknownSubcommandExitsNonZero(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary; skipped with -short")
	}
	bin := acrelayBinary(t)
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stderr string
		stdout string
	}{
		{name: "typo in a group", args: []string{"project", "lsit"}, code: 1, stderr: `acrelay: unknown command "lsit" for "acrelay project"; did you mean list? (see acrelay project --help)`},
		{name: "nested group", args: []string{"conformance", "nosuch"}, code: 1, stderr: `unknown command "nosuch" for "acrelay conformance"`},
		{name: "root", args: []string{"nosuch"}, code: 1, stderr: `unknown command "nosuch" for "acrelay"`},
		{name: "group alone", args: []string{"token"}, code: 0, stdout: "Available Commands:"},
		{name: "version", args: []string{"version"}, code: 0, stdout: "acrelay "},
		{name: "--version", args: []string{"--version"}, code: 0, stdout: "acrelay "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(bin, tc.args...)
			var stdout, stderr strings.Builder
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.code || !strings.Contains(stderr.String(), tc.stderr) || !strings.Contains(stdout.String(), tc.stdout) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit %d, stdout with %q, stderr with %q",
					code, stdout.String(), stderr.String(), tc.code, tc.stdout, tc.stderr)
			}
		})
	}
}

// TestVersion: acrelay version prints the module version and the VCS
// commit the toolchain recorded; under go test that is "(devel)" with no
// commit, and it must still read sensibly.
func TestVersion(t *testing.T) {
	info, ok := debug.ReadBuildInfo()
	got := versionString(info, ok)
	if !strings.HasPrefix(got, "(devel) (") && !strings.HasPrefix(got, "v") {
		t.Fatalf("version under go test %q: want (devel) or a module version first", got)
	}
	if strings.Contains(got, "()") || strings.TrimSpace(got) != got {
		t.Fatalf("version %q", got)
	}
	var out bytes.Buffer
	root := rootCmd
	cmd, _, err := root.Find([]string{"version"})
	if err != nil {
		t.Fatal(err)
	}
	cmd.SetOut(&out)
	t.Cleanup(func() { cmd.SetOut(os.Stdout) })
	if err := cmd.RunE(cmd, nil); err != nil || out.String() != "acrelay "+got+"\n" {
		t.Fatalf("version printed %q (%v), want %q", out.String(), err, "acrelay "+got+"\n")
	}

	stamped := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v1.2.3"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "a68d3ef0123456789abcdef0123456789abcdef0"}, {Key: "vcs.time", Value: "2026-07-19T12:00:00Z"}, {Key: "vcs.modified", Value: "true"}}}
	if got, want := versionString(stamped, true), "v1.2.3 (commit a68d3ef01234, 2026-07-19T12:00:00Z, modified) go1.26.0"; got != want {
		t.Fatalf("stamped: %q, want %q", got, want)
	}
	if got := versionString(nil, false); !strings.Contains(got, "unknown") {
		t.Fatalf("no build info: %q", got)
	}
}

// TestHelpPages: the admin commands leave SQLite's tuning flags out of
// --help (serve lists them), and serve --help names the operator token's
// variables.
func TestHelpPages(t *testing.T) {
	help := func(args ...string) string {
		t.Helper()
		cmd, _, err := rootCmd.Find(args)
		if err != nil {
			t.Fatal(err)
		}
		return cmd.UsageString() + cmd.Long
	}
	for _, args := range [][]string{{"project", "create"}, {"project", "list"}, {"token", "list"}, {"identity", "create"}, {"key", "add"}, {"project", "visibility"}} {
		h := help(args...)
		if strings.Contains(h, "--sqlite-") || !strings.Contains(h, "--data-dir") {
			t.Errorf("acrelay %s --help lists the SQLite tuning flags, or no --data-dir:\n%s", strings.Join(args, " "), h)
		}
	}
	s := help("serve")
	for _, want := range []string{"--sqlite-sync", "--sqlite-max-batch", "ACRELAY_OPERATOR_TOKEN", "ACRELAY_OPERATOR_TOKEN_FILE"} {
		if !strings.Contains(s, want) {
			t.Errorf("acrelay serve --help does not name %s", want)
		}
	}
}
