package main

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

// newTestRoot is a fresh root command with rootCmd's hooks over cmds: flag
// values and their Changed marks do not carry over between runs as they
// do on rootCmd.
func newTestRoot(cmds ...*cobra.Command) *cobra.Command {
	root := &cobra.Command{Use: "acrelay", SilenceUsage: true, SilenceErrors: true, PersistentPreRunE: rootCmd.PersistentPreRunE}
	root.AddCommand(cmds...)
	return root
}

// clearEnv unsets, for the test, the variables the env tests set; an empty
// variable counts as unset.
func clearEnv(t *testing.T) {
	t.Helper()
	for _, name := range []string{"ACRELAY_SQLITE_MAX_BATCH", "ACRELAY_COURIER_LEASE", "ACRELAY_LOG_FORMAT",
		"ACRELAY_DATABASE_URL", "ACRELAY_DATABASE_URL_FILE", "ACRELAY_OPERATOR_TOKEN", "ACRELAY_OPERATOR_TOKEN_FILE"} {
		t.Setenv(name, "")
	}
}

// TestEnvValues: a flag not given on the command line takes its ACRELAY_*
// variable through the flag's own parser before the command runs; a value
// it cannot take is an error naming the variable and the value (for a
// secret, the variable only), and nothing starts.
func TestEnvValues(t *testing.T) {
	data := servedStore(t)
	never := filepath.Join(t.TempDir(), "never")
	missing := filepath.Join(t.TempDir(), "no-such-file")
	blank := filepath.Join(t.TempDir(), "blank")
	if err := os.WriteFile(blank, []byte(" \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	create := []string{"project", "create", "--data-dir", data, "--json"}
	serve := []string{"serve", "--data-dir", never, "--addr", "127.0.0.1:0", "--log-level", "error"}
	for _, tc := range []struct {
		name    string
		env     []string // NAME=value
		args    []string
		wantErr string
		flag    string // without wantErr: the flag's value after the run
		want    string
	}{
		{name: "invalid int", env: []string{"ACRELAY_SQLITE_MAX_BATCH=abc"}, args: create,
			wantErr: `ACRELAY_SQLITE_MAX_BATCH "abc": want an integer`},
		{name: "invalid duration", env: []string{"ACRELAY_COURIER_LEASE=15"}, args: serve,
			wantErr: `ACRELAY_COURIER_LEASE "15": want a Go duration such as 15s`},
		{name: "int out of range", env: []string{"ACRELAY_SQLITE_MAX_BATCH=1000000000"}, args: create,
			wantErr: `--sqlite-max-batch (ACRELAY_SQLITE_MAX_BATCH) 1000000000: want 1 to 16384`},
		{name: "int zero", env: []string{"ACRELAY_SQLITE_MAX_BATCH=0"}, args: serve,
			wantErr: `--sqlite-max-batch (ACRELAY_SQLITE_MAX_BATCH) 0: want 1 to 16384`},
		{name: "lease too short", env: []string{"ACRELAY_COURIER_LEASE=1ns"}, args: serve,
			wantErr: `--courier-lease (ACRELAY_COURIER_LEASE) 1ns: want at least 1s`},
		{name: "lease negative", args: slices.Concat(serve, []string{"--courier-lease", "-5s"}),
			wantErr: `--courier-lease (ACRELAY_COURIER_LEASE) -5s: want at least 1s`},
		{name: "cache bytes negative", env: []string{"ACRELAY_COURIER_CACHE_BYTES=-1"}, args: serve,
			wantErr: `--courier-cache-bytes (ACRELAY_COURIER_CACHE_BYTES) -1: want at least 0`},
		{name: "cache bytes not an integer", env: []string{"ACRELAY_COURIER_CACHE_BYTES=64MiB"}, args: serve,
			wantErr: `ACRELAY_COURIER_CACHE_BYTES "64MiB": want an integer`},
		{name: "invalid string, checked by the command", env: []string{"ACRELAY_LOG_FORMAT=xml"}, args: serve,
			wantErr: `--log-format (ACRELAY_LOG_FORMAT) "xml": want text or json`},
		{name: "unreadable secret file", env: []string{"ACRELAY_DATABASE_URL_FILE=" + missing}, args: create,
			wantErr: "ACRELAY_DATABASE_URL_FILE: cannot read the file it names: no such file or directory"},
		{name: "blank secret file", env: []string{"ACRELAY_OPERATOR_TOKEN_FILE=" + blank}, args: serve,
			wantErr: "ACRELAY_OPERATOR_TOKEN_FILE: the file it names is empty"},
		{name: "valid int", env: []string{"ACRELAY_SQLITE_MAX_BATCH=64"}, args: create,
			flag: "sqlite-max-batch", want: "64"},
		{name: "empty is unset", env: []string{"ACRELAY_SQLITE_MAX_BATCH="}, args: create,
			flag: "sqlite-max-batch", want: "128"},
		{name: "flag wins over an invalid int", env: []string{"ACRELAY_SQLITE_MAX_BATCH=abc"}, args: slices.Concat(create, []string{"--sqlite-max-batch", "32"}),
			flag: "sqlite-max-batch", want: "32"},
		{name: "flag wins over an unreadable secret file", env: []string{"ACRELAY_DATABASE_URL_FILE=" + missing}, args: slices.Concat(create, []string{"--database-url", ""}),
			flag: "database-url", want: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clearEnv(t)
			for _, kv := range tc.env {
				name, value, _ := strings.Cut(kv, "=")
				t.Setenv(name, value)
			}
			root := newTestRoot(append(newAdminCmds(), newServeCmd())...)
			root.SetOut(io.Discard)
			root.SetErr(io.Discard)
			root.SetArgs(tc.args)
			// Should serve start after all, it stops here rather than hang.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := root.ExecuteContext(ctx)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("got %v\nwant %s", err, tc.wantErr)
				}
				if strings.Contains(err.Error(), missing) || strings.Contains(err.Error(), blank) {
					t.Fatalf("the error quotes a secret variable's value: %v", err)
				}
				if _, err := os.Stat(never); !errors.Is(err, fs.ErrNotExist) {
					t.Fatalf("serve started: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			cmd, _, err := root.Find(tc.args)
			if err != nil {
				t.Fatal(err)
			}
			if got := cmd.Flags().Lookup(tc.flag).Value.String(); got != tc.want {
				t.Fatalf("--%s = %q, want %q", tc.flag, got, tc.want)
			}
		})
	}
}

// TestEnvErrorsExitNonZero: the binary prints an invalid environment value
// or a missing store as one line on stderr and exits 1, as it does for an
// invalid flag.
func TestEnvErrorsExitNonZero(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary; skipped with -short")
	}
	bin := acrelayBinary(t)
	never := filepath.Join(t.TempDir(), "never")
	for _, tc := range []struct {
		name   string
		env    []string
		args   []string
		stderr string
	}{
		{name: "invalid duration", env: []string{"ACRELAY_COURIER_LEASE=15"}, args: []string{"serve", "--data-dir", never, "--addr", "127.0.0.1:0"},
			stderr: `acrelay: ACRELAY_COURIER_LEASE "15": want a Go duration such as 15s`},
		{name: "invalid int", env: []string{"ACRELAY_SQLITE_MAX_BATCH=abc"}, args: []string{"serve", "--data-dir", never, "--addr", "127.0.0.1:0"},
			stderr: `acrelay: ACRELAY_SQLITE_MAX_BATCH "abc": want an integer`},
		{name: "invalid flag", args: []string{"serve", "--data-dir", never, "--courier-lease", "15"},
			stderr: `acrelay: invalid argument "15" for "--courier-lease" flag: time: missing unit in duration "15"`},
		{name: "no store", args: []string{"project", "create", "--data-dir", never},
			stderr: "acrelay: no acrelay store in " + never + " (run acrelay serve once to create it, or pass --data-dir / ACRELAY_DATA_DIR)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Should serve start after all, it is killed here rather than hang.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, tc.args...)
			cmd.Env = append(os.Environ(), "ACRELAY_DATABASE_URL=", "ACRELAY_DATABASE_URL_FILE=")
			cmd.Env = append(cmd.Env, tc.env...)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			err := cmd.Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 1 {
				t.Fatalf("exit: %v, want status 1", err)
			}
			if got := strings.TrimSuffix(stderr.String(), "\n"); got != tc.stderr {
				t.Fatalf("stderr %q\nwant   %q", got, tc.stderr)
			}
			if _, err := os.Stat(never); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("%s was created: %v", never, err)
			}
		})
	}
}

// TestNoSubcommandHook: applyEnv runs as rootCmd's PersistentPreRunE, and
// cobra runs only the nearest persistent hook: a subcommand with its own
// would silently skip the ACRELAY_* values (an admin command would open
// SQLite instead of ACRELAY_DATABASE_URL's PostgreSQL).
func TestNoSubcommandHook(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if sub.PersistentPreRun != nil || sub.PersistentPreRunE != nil {
				t.Errorf("%s has its own persistent pre-run hook: ACRELAY_* values would not apply under it", sub.CommandPath())
			}
			walk(sub)
		}
	}
	walk(rootCmd)
	if rootCmd.PersistentPreRunE == nil {
		t.Fatal("rootCmd has no PersistentPreRunE: ACRELAY_* values never apply")
	}
}
