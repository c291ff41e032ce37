// Package shareddir finds the folder of outside material that tests and the
// conformance runner read (spec, vector file, corpora): the directory named
// by ACRELAY_SHARED_DIR, by default "../shared" beside the module root.
// Nothing from it is ever copied into the project.
package shareddir

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// EnvVar names the environment variable that overrides the location.
const EnvVar = "ACRELAY_SHARED_DIR"

// ErrAbsent reports that the shared folder was not found.
var ErrAbsent = errors.New("shared folder not found (set " + EnvVar + ")")

// Find returns the absolute path of the shared folder, or ErrAbsent.
func Find() (string, error) {
	if d := os.Getenv(EnvVar); d != "" {
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			return filepath.Abs(d)
		}
		return "", ErrAbsent
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", ErrAbsent
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			cand := filepath.Join(filepath.Dir(dir), "shared")
			if st, err := os.Stat(cand); err == nil && st.IsDir() {
				return cand, nil
			}
			return "", ErrAbsent
		}
		if filepath.Dir(dir) == dir {
			return "", ErrAbsent
		}
	}
}

// Path returns filepath.Join(shared folder, elem...) or skips the test with
// a message naming ACRELAY_SHARED_DIR when the folder is absent.
func Path(tb testing.TB, elem ...string) string {
	tb.Helper()
	d, err := Find()
	if err != nil {
		tb.Skipf("skipping: %v; CI always provides it (default ../shared beside the repository)", err)
	}
	return filepath.Join(append([]string{d}, elem...)...)
}
