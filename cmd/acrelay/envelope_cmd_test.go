package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/acrelay/acrelay/envelope"
)

// runCmd executes a fresh command in-process with args and stdin, and
// returns its standard output and error.
func runCmd(t *testing.T, cmd *cobra.Command, stdin string, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	cmd.SetArgs(args)
	cmd.SetIn(strings.NewReader(stdin))
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	err := cmd.Execute()
	return out.String(), err
}

func exitCode(err error) int {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	if err != nil {
		return -1
	}
	return 0
}

func seedVector(t *testing.T, name string) envelope.Vector {
	t.Helper()
	seed, err := os.ReadFile("../../conformance/testdata/seeds/001_eade5896d07b0a7c.txt")
	if err != nil {
		t.Fatal(err)
	}
	vectors, err := envelope.ParseVectors(seed)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vectors {
		if v.Name == name {
			return v
		}
	}
	t.Fatalf("no vector %s", name)
	return envelope.Vector{}
}

func TestEnvelopeHash(t *testing.T) {
	all := seedVector(t, "all-predicate-types")
	file := filepath.Join(t.TempDir(), "envelope.json")
	if err := os.WriteFile(file, all.Envelope, 0o600); err != nil {
		t.Fatal(err)
	}
	refused := seedVector(t, "reject-unregistered-predicate")
	fractional := seedVector(t, "reject-decimal-as-json-number")

	tests := []struct {
		name    string
		stdin   string
		args    []string
		out     string
		code    int
		errText string
	}{
		{
			name: "file",
			args: []string{file},
			out:  all.Hash + "\n" + *all.Canonical + "\n",
		},
		{
			name:  "stdin as JSON",
			stdin: string(all.Envelope),
			args:  []string{"--json", "-"},
			out: `{"canonical":` + jsonString(*all.Canonical) + `,"digest":"sha256:` + strings.ToLower(all.Hash) +
				`","hash":"` + all.Hash + `"}` + "\n",
		},
		{
			name:    "envelope refusal",
			stdin:   string(refused.Envelope),
			args:    []string{"-"},
			code:    exitRefused,
			errText: "refused: unregistered_predicate at /predicates/0/type",
		},
		{
			name:    "strict profile refusal",
			stdin:   string(fractional.Envelope),
			args:    []string{"-"},
			code:    exitRefused,
			errText: "refused: fractional_number at byte",
		},
		{
			name:    "missing file",
			args:    []string{filepath.Join(t.TempDir(), "absent.json")},
			code:    exitInput,
			errText: "no such file",
		},
		{
			name:    "no argument",
			args:    []string{},
			code:    -1,
			errText: "accepts 1 arg",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := runCmd(t, newEnvelopeHashCmd(), tc.stdin, tc.args...)
			if got := exitCode(err); got != tc.code {
				t.Fatalf("exit %d (%v), want %d", got, err, tc.code)
			}
			if tc.errText != "" && !strings.Contains(err.Error(), tc.errText) {
				t.Fatalf("error %q does not contain %q", err, tc.errText)
			}
			if tc.code == 0 && out != tc.out {
				t.Fatalf("output\n got %q\nwant %q", out, tc.out)
			}
			if tc.code != 0 && out != "" {
				t.Fatalf("refusal printed %q", out)
			}
		})
	}
}

// jsonString quotes s the way RFC 8785 does for the ASCII the vectors use.
func jsonString(s string) string {
	return `"` + strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), `"`, `\"`) + `"`
}

func TestEnvelopeHashRegisteredWithHelp(t *testing.T) {
	cmd, _, err := rootCmd.Find([]string{"envelope", "hash"})
	if err != nil || cmd.Name() != "hash" {
		t.Fatalf("envelope hash not registered on the root: %v", err)
	}
	out, err := runCmd(t, newEnvelopeCmd(), "", "hash", "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"acrelay envelope hash renew.json", "--json", "FILE|-"} {
		if !strings.Contains(out, want) {
			t.Fatalf("help lacks %q:\n%s", want, out)
		}
	}
}
