package main

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/acrelay/acrelay/client"
)

// TestSignSpendsSeqOnlyOnSignedEvent: with --seq-file, an event sign
// refuses (locally invalid, built from flags or read as a core; no key)
// uses no session_seq; the first event signed gets 1.
func TestSignSpendsSeqOnlyOnSignedEvent(t *testing.T) {
	dir := t.TempDir()
	keyPath := filepath.Join(dir, "agent.pem")
	if err := keygen(&strings.Builder{}, keyPath, false); err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]string{"ACRELAY_KEY_FILE": keyPath, "ACRELAY_PROJECT_ID": uuid.NewString(),
		"ACRELAY_IDENTITY_ID": uuid.NewString(), "ACRELAY_SIGNING_KEY_ID": uuid.NewString(),
		"ACRELAY_DEVICE_ID": uuid.NewString(), "ACRELAY_SESSION_ID": uuid.NewString()} {
		t.Setenv(name, v)
	}
	seq := filepath.Join(dir, "seq")
	const core = `{"repository_id":"repo:cli","thread_id":"t","kind":"progress","scope":{"base_revision":null,"branch":null,"paths":["."]},"body":{"summary":"ok"}}`
	for _, tc := range []struct {
		name, stdin string
		args        []string
		want        string
	}{
		{name: "summary too long", args: []string{"--kind", "progress", "--summary", strings.Repeat("é", 1001)},
			want: "/body/summary length_out_of_range: summary: at most 1000 Unicode scalar values, got 1001"},
		{name: "invalid core", stdin: strings.Replace(core, `"."`, `"/abs"`, 1), want: "/scope/paths/0 path_invalid"},
		{name: "no key", stdin: core, args: []string{"--key", filepath.Join(dir, "missing.pem")}, want: "read key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"--repository-id", "repo:cli", "--thread-id", "t", "--seq-file", seq}, tc.args...)
			_, _, err := runAgent(t, newSignCmd(), tc.stdin, args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
			if _, err := os.Stat(seq); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("a refused event spent a session_seq: %v", err)
			}
		})
	}
	out, _, err := runAgent(t, newSignCmd(), "", "--repository-id", "repo:cli", "--thread-id", "t", "--seq-file", seq, "--kind", "progress", "--summary", "ok")
	if err != nil {
		t.Fatal(err)
	}
	if ev, err := client.DecodeEvent([]byte(out)); err != nil || ev.SessionSeq != 1 {
		t.Fatalf("first signed event: %v, want session_seq 1", err)
	}
	out, _, err = runAgent(t, newSignCmd(), core, "--seq-file", seq)
	if err != nil {
		t.Fatal(err)
	}
	if ev, _ := client.DecodeEvent([]byte(out)); ev.SessionSeq != 2 {
		t.Fatalf("core after one signed event: session_seq %d, want 2", ev.SessionSeq)
	}
	if b, _ := os.ReadFile(seq); string(b) != "2\n" {
		t.Fatalf("seq file %q, want 2", b)
	}
}
