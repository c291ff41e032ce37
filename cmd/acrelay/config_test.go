package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// configCmd is a fresh `acrelay config` with the root's pre-run, so flags
// set by one case do not leak into the next.
func configCmd() *cobra.Command {
	c := newConfigCmd()
	c.PersistentPreRunE = applyEnv
	return c
}

func writeFile(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestConfigPrecedence: flag > ACRELAY_* > file > default, for flags
// bound with envOr and with bindEnv alike.
func TestConfigPrecedence(t *testing.T) {
	cfg := writeFile(t, "acrelay.yaml", "addr: 0.0.0.0:9999\nlog-level: warn\ncourier-lease: 30s\nsqlite-max-batch: 64\nwebsub-allow-hosts: [127.0.0.1, localhost]\n")
	t.Setenv("ACRELAY_LOG_LEVEL", "error")
	t.Setenv("ACRELAY_SQLITE_MAX_BATCH", "32")
	out, _, err := runAgent(t, configCmd(), "", "print", "--config", cfg, "--courier-lease", "45s")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`addr: "0.0.0.0:9999"`,                      // file
		`log-level: "error"`,                        // environment over file
		`courier-lease: "45s"`,                      // flag over file
		"sqlite-max-batch: 32",                      // environment (bindEnv) over file
		`websub-allow-hosts: "127.0.0.1,localhost"`, // a YAML list
		`log-format: "text"`,                        // default
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("config print lacks %q:\n%s", want, out)
		}
	}
}

// TestConfigSecrets: secrets come from the file, KEY-file or *_FILE and
// are printed as [redacted], a database URL's password only.
func TestConfigSecrets(t *testing.T) {
	const op, mx, pw = "operator-secret-value", "matrix-secret-value", "db-secret-pw"
	dbFile := writeFile(t, "db", "postgres://acrelay:"+pw+"@db.internal:5432/acrelay\n")
	cfg := writeFile(t, "acrelay.yaml", "operator-token: "+op+"\ndatabase-url-file: "+dbFile+"\n")
	t.Setenv("ACRELAY_MATRIX_ACCESS_TOKEN_FILE", writeFile(t, "mx", mx))
	out, _, err := runAgent(t, configCmd(), "", "print", "--config", cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{op, mx, pw} {
		if strings.Contains(out, s) {
			t.Errorf("config print shows a secret %q:\n%s", s, out)
		}
	}
	for _, want := range []string{`operator-token: "[redacted]"`, `matrix-access-token: "[redacted]"`,
		`database-url: "postgres://acrelay:[redacted]@db.internal:5432/acrelay"`} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("config print lacks %q:\n%s", want, out)
		}
	}
}

// TestConfigInvalid: an unknown key, a value its flag cannot take, or a
// missing file stops start-up with one message naming the key; a secret
// is never quoted.
func TestConfigInvalid(t *testing.T) {
	tests := []struct {
		name, file string
		want       []string
	}{
		{"unknown key", "addr: 127.0.0.1:0\nlisten: :80\n", []string{`unknown key "listen"`}},
		{"nested key", "matrix:\n  homeserver: https://m.example\n", []string{`unknown key "matrix.homeserver"`}},
		{"bad duration", "courier-lease: soon\n", []string{`key "courier-lease"`, `"soon"`, "Go duration"}},
		{"bad integer", "sqlite-max-batch: many\n", []string{`key "sqlite-max-batch"`, "integer"}},
		{"list of maps", "websub-publish-hub: [{url: http://127.0.0.1:1/hub}]\n", []string{`key "websub-publish-hub"`, "list of strings"}},
		{"missing secret file", "operator-token-file: /nonexistent/token\n", []string{`key "operator-token-file"`, "cannot read"}},
		{"not yaml", "addr: [\n", []string{"--config"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := writeFile(t, "acrelay.yaml", tc.file)
			serve := newServeCmd()
			serve.PersistentPreRunE = applyEnv
			serve.RunE = func(*cobra.Command, []string) error { t.Fatal("serve started"); return nil }
			_, _, err := runAgent(t, serve, "", "--config", cfg, "--data-dir", t.TempDir())
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
	// ACRELAY_CONFIG names the file when --config is not given.
	t.Setenv("ACRELAY_CONFIG", writeFile(t, "missing.yaml", "")+".gone")
	serve := newServeCmd()
	serve.PersistentPreRunE = applyEnv
	if _, _, err := runAgent(t, serve, "", "--data-dir", t.TempDir()); err == nil || !strings.Contains(err.Error(), "--config") {
		t.Fatalf("ACRELAY_CONFIG naming no file: %v", err)
	}
}

// TestConfigPrintRoundTrip: `config print` is a configuration file that
// reads back through --config as the same effective configuration, list
// flags included: 0, 1 or 2 hubs (one with a comma) stay that list, and
// none is none (not a hub named "[]", which would start the publisher).
func TestConfigPrintRoundTrip(t *testing.T) {
	t.Setenv("ACRELAY_WEBSUB_PUBLISH_HUBS", "")
	body := func(out string) string { _, rest, _ := strings.Cut(out, "\n"); return rest } // past the "# effective" line
	for _, tc := range []struct {
		name, file string
		hubs       []string
		line       string
	}{
		{"no hubs", "addr: 127.0.0.1:9999\n", []string{}, `websub-publish-hub: []`},
		{"empty list", "websub-publish-hub: []\n", []string{}, `websub-publish-hub: []`},
		{"one hub", "websub-publish-hub: [http://127.0.0.1:1/hub]\n", []string{"http://127.0.0.1:1/hub"},
			`websub-publish-hub: ["http://127.0.0.1:1/hub"]`},
		{"two hubs", "websub-publish-hub:\n  - http://127.0.0.1:1/hub\n  - \"https://hub.example/a,b\"\n",
			[]string{"http://127.0.0.1:1/hub", "https://hub.example/a,b"},
			`websub-publish-hub: ["http://127.0.0.1:1/hub", "https://hub.example/a,b"]`},
		{"comma-separated string", "websub-publish-hub: http://127.0.0.1:1/hub,http://127.0.0.1:2/hub\n",
			[]string{"http://127.0.0.1:1/hub", "http://127.0.0.1:2/hub"},
			`websub-publish-hub: ["http://127.0.0.1:1/hub", "http://127.0.0.1:2/hub"]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			first, _, err := runAgent(t, configCmd(), "", "print", "--config", writeFile(t, "acrelay.yaml", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(first, "\n"+tc.line+"\n") {
				t.Errorf("config print lacks %q:\n%s", tc.line, first)
			}
			printed := writeFile(t, "printed.yaml", first)
			second, _, err := runAgent(t, configCmd(), "", "print", "--config", printed)
			if err != nil {
				t.Fatalf("config print does not read back: %v\n%s", err, first)
			}
			if body(second) != body(first) {
				t.Errorf("read back differs:\n%s\nwant\n%s", second, first)
			}
			// What serve runs with.
			serve := newServeCmd()
			serve.PersistentPreRunE = applyEnv
			var got []string
			serve.RunE = func(cmd *cobra.Command, _ []string) error {
				got = cmd.Flags().Lookup("websub-publish-hub").Value.(pflag.SliceValue).GetSlice()
				return nil
			}
			if _, _, err := runAgent(t, serve, "", "--config", printed); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.hubs) {
				t.Errorf("serve --config runs with hubs %q, want %q", got, tc.hubs)
			}
		})
	}
}
