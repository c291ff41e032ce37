package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestHandoffCommandsAgainstRelay runs handoff put|get|transition against
// the real relay on SQLite: creation and replay, the ETag read before a
// move, a stale --if-match, the lifecycle to succeeded with evidence, and
// the relay's refusals surfacing with their codes.
func TestHandoffCommandsAgainstRelay(t *testing.T) {
	url, token, _ := testRelay(t)
	t.Setenv("ACRELAY_TOKEN", token)
	const id = "7c9e6679-7425-40de-944b-e07fc1f90ae7"
	dir := t.TempDir()
	result := filepath.Join(dir, "result.json")
	noEvidence := filepath.Join(dir, "no-evidence.json")
	os.WriteFile(result, []byte(`{"summary":"renewed at 1180.00 USD","evidenceUris":["https://example.org/receipts/1"]}`), 0o600)
	os.WriteFile(noEvidence, []byte(`{"summary":"renewed"}`), 0o600)

	var etag string
	steps := []struct {
		name    string
		cmd     func() *cobra.Command
		args    []string
		code    int
		out     []string // substrings of stdout
		errText string
	}{
		{name: "put creates", cmd: newHandoffPutCmd, args: []string{"../../handoff/testdata/valid.json"},
			out: []string{`"version":1`, `"state":"proposed"`, `"events":[]`}},
		{name: "put replays", cmd: newHandoffPutCmd, args: []string{"../../handoff/testdata/valid.json"}, out: []string{`"version":1`}},
		{name: "get", cmd: newHandoffGetCmd, args: []string{id}, out: []string{`"handoffId":"` + id + `"`}},
		{name: "get etag", cmd: newHandoffGetCmd, args: []string{"--etag", id}, out: []string{`"`}},
		{name: "accepted", cmd: newHandoffTransitionCmd, args: []string{id, "accepted"}, out: []string{`"state":"accepted"`, `"version":2`}},
		{name: "stale if-match", cmd: newHandoffTransitionCmd, args: []string{"--if-match", "ETAG1", id, "running"},
			code: exitRefused, errText: "relay answered 412 precondition_failed"},
		{name: "running", cmd: newHandoffTransitionCmd, args: []string{id, "running"}, out: []string{`"attempt":1`, `"version":3`}},
		{name: "illegal move", cmd: newHandoffTransitionCmd, args: []string{id, "accepted"},
			code: exitRefused, errText: "relay answered 409 transition_not_allowed: the contract is running and cannot move to accepted"},
		{name: "verifying", cmd: newHandoffTransitionCmd, args: []string{id, "verifying"}, out: []string{`"state":"verifying"`}},
		{name: "no result", cmd: newHandoffTransitionCmd, args: []string{id, "succeeded"}, code: exitRefused, errText: "409 result_required"},
		{name: "no evidence", cmd: newHandoffTransitionCmd, args: []string{id, "succeeded", "--result", noEvidence}, code: exitRefused, errText: "409 evidence_required"},
		{name: "succeeded", cmd: newHandoffTransitionCmd, args: []string{id, "succeeded", "--result", result},
			out: []string{`"state":"succeeded"`, `"evidenceUris":["https://example.org/receipts/1"]`, `"version":5`}},
		{name: "changed content", cmd: newHandoffPutCmd, args: []string{"-"}, code: exitRefused, errText: "409 idempotency_key_reused"},
	}
	valid, _ := os.ReadFile("../../handoff/testdata/valid.json")
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			args := append([]string{"--url", url}, st.args...)
			for i, a := range args {
				if a == "ETAG1" {
					args[i] = etag
				}
			}
			stdin := strings.Replace(string(valid), "Renew the Datadog", "Cancel the Datadog", 1)
			out, err := runCmd(t, st.cmd(), stdin, args...)
			if got := exitCode(err); got != st.code {
				t.Fatalf("exit %d (%v), want %d; out %s", got, err, st.code, out)
			}
			if st.errText != "" && !strings.Contains(err.Error(), st.errText) {
				t.Fatalf("error %q lacks %q", err, st.errText)
			}
			for _, s := range st.out {
				if !strings.Contains(out, s) {
					t.Fatalf("output %q lacks %q", out, s)
				}
			}
			if st.name == "get etag" {
				etag = strings.TrimSpace(out)
			}
		})
	}
}
