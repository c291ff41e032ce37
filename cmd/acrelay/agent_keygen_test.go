package main

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// failWriter is a stdout that cannot be written (a closed pipe).
type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("broken pipe") }

// TestKeygenWritesNothingOnFailure: a keygen that fails leaves no key
// file behind, and a failed --force keeps the old key whole.
func TestKeygenWritesNothingOnFailure(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, out string
		force     bool
		stdout    bool // a failing stdout
		want      string
	}{
		{name: "empty out", out: "", want: "--out is empty"},
		{name: "no directory", out: filepath.Join(dir, "missing", "agent.pem"), want: "directory does not exist"},
		{name: "out is a directory", out: dir, force: true, want: "not a regular file"},
		{name: "stdout fails", out: filepath.Join(dir, "agent.pem"), stdout: true, want: "key file removed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var w io.Writer = &strings.Builder{}
			if tc.stdout {
				w = failWriter{}
			}
			err := keygen(w, tc.out, tc.force)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
			if tc.out == dir {
				return
			}
			if tc.out != "" {
				if _, err := os.Stat(tc.out); !errors.Is(err, fs.ErrNotExist) {
					t.Fatalf("%s left behind: %v", tc.out, err)
				}
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 0 {
				t.Fatalf("files left in %s: %v", dir, ents)
			}
		})
	}

	// A failed --force (stdout fails after the rename) is the one case that
	// changes an existing file; refusing to overwrite leaves it as it was.
	path := filepath.Join(dir, "kept.pem")
	if err := os.WriteFile(path, []byte("old key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := keygen(&strings.Builder{}, path, false); err == nil || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("overwrite without --force: %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "old key" {
		t.Fatalf("existing key changed: %q", b)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("temporary files left in %s: %v", dir, ents)
	}
}
