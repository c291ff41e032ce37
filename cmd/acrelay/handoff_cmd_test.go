package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestHandoffValidate(t *testing.T) {
	valid, err := os.ReadFile("../../handoff/testdata/valid.json")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "contract.json")
	if err := os.WriteFile(file, valid, 0o600); err != nil {
		t.Fatal(err)
	}
	invalid := strings.NewReplacer(
		`"7c9e6679-7425-40de-944b-e07fc1f90ae7"`, `"not-a-uuid"`,
		`"state": "proposed"`, `"state": "proposed", "extra": true`,
		`"maxAttempts": 3`, `"maxAttempts": 0`,
	).Replace(string(valid))

	tests := []struct {
		name    string
		stdin   string
		args    []string
		out     string
		code    int
		errText string
	}{
		{name: "valid file", args: []string{file}, out: "valid\n"},
		{name: "valid as JSON", stdin: string(valid), args: []string{"--json", "-"}, out: `{"valid":true,"issues":[]}` + "\n"},
		{
			name:  "violations",
			stdin: invalid,
			args:  []string{"-"},
			out: "(document): additional properties 'extra' not allowed\n" +
				"/budget/maxAttempts: minimum: got 0, want 1\n" +
				"/handoffId: 'not-a-uuid' is not valid uuid: must have 5 elements\n",
			code:    exitRefused,
			errText: "contract_invalid: 3 schema violation(s)",
		},
		{
			name:  "violations as JSON",
			stdin: invalid,
			args:  []string{"--json", "-"},
			out: `{"valid":false,"issues":[{"pointer":"","message":"additional properties 'extra' not allowed"},` +
				`{"pointer":"/budget/maxAttempts","message":"minimum: got 0, want 1"},` +
				`{"pointer":"/handoffId","message":"'not-a-uuid' is not valid uuid: must have 5 elements"}]}` + "\n",
			code:    exitRefused,
			errText: "contract_invalid",
		},
		{
			name:    "duplicate member refused by the strict profile first",
			stdin:   strings.Replace(string(valid), `"state": "proposed"`, `"state": "proposed", "state": "nonsense"`, 1),
			args:    []string{"-"},
			code:    exitRefused,
			errText: "refused: duplicate_object_name at byte",
		},
		{name: "missing file", args: []string{filepath.Join(t.TempDir(), "absent.json")}, code: exitInput, errText: "no such file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := runCmd(t, newHandoffValidateCmd(), tc.stdin, tc.args...)
			if got := exitCode(err); got != tc.code {
				t.Fatalf("exit %d (%v), want %d", got, err, tc.code)
			}
			if tc.errText != "" && !strings.Contains(err.Error(), tc.errText) {
				t.Fatalf("error %q does not contain %q", err, tc.errText)
			}
			if out != tc.out {
				t.Fatalf("output\n got %q\nwant %q", out, tc.out)
			}
		})
	}
}

func TestHandoffValidateRegisteredWithHelp(t *testing.T) {
	cmd, _, err := rootCmd.Find([]string{"handoff", "validate"})
	if err != nil || cmd.Name() != "validate" {
		t.Fatalf("handoff validate not registered on the root: %v", err)
	}
	out, err := runCmd(t, newHandoffCmd(), "", "validate", "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"acrelay handoff validate contract.json", "<JSON pointer>: <message>", "FILE|-"} {
		if !strings.Contains(out, want) {
			t.Fatalf("help lacks %q:\n%s", want, out)
		}
	}
}
