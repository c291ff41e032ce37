package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acrelay/acrelay/internal/shareddir"
)

// wantVectorLines are the group lines of a run with the public file.
var wantVectorLines = []string{
	"seed-000 bounds: 9 passed, 0 failed, 0 errata",
	"seed-000 signing_vector: 4 passed, 0 failed, 0 errata",
	"seed-000 canonicalization_vectors: 2 passed, 0 failed, 1 erratum",
	"seed-000 rejection_vectors: 8 passed, 0 failed, 0 errata",
	"seed-000 body_matrix: 21 passed, 0 failed, 0 errata",
	"seed-000 invalid_body_vectors: 5 passed, 0 failed, 0 errata",
	"seed-000 opaque_id_vectors: 4 passed, 0 failed, 0 errata",
	"seed-000 locator_vectors: 8 passed, 0 failed, 0 errata",
	"seed-000 path_vectors: 10 passed, 0 failed, 1 erratum",
	"seed-000 lineage_vectors: 5 passed, 0 failed, 0 errata",
	"public bounds: 9 passed, 0 failed, 0 errata",
	"public signing_vector: 4 passed, 0 failed, 0 errata",
	"public canonicalization_vectors: 3 passed, 0 failed, 0 errata",
	"public rejection_vectors: 8 passed, 0 failed, 0 errata",
	"public body_matrix: 21 passed, 0 failed, 0 errata",
	"public invalid_body_vectors: 5 passed, 0 failed, 0 errata",
	"public opaque_id_vectors: 4 passed, 0 failed, 0 errata",
	"public locator_vectors: 8 passed, 0 failed, 0 errata",
	"public path_vectors: 11 passed, 0 failed, 0 errata",
	"public lineage_vectors: 5 passed, 0 failed, 0 errata",
	"seed-001 envelope_acceptance: 8 passed, 0 failed, 0 errata",
	"seed-001 envelope_rejection: 4 passed, 0 failed, 0 errata",
	"",
	"errata:",
}

func TestConformanceVectors(t *testing.T) {
	shared := shareddir.Path(t)
	out, err := runCmd(t, newConformanceCmd(), "", "vectors", "--shared-dir", shared)
	if err != nil {
		t.Fatalf("exit %d: %v\n%s", exitCode(err), err, out)
	}
	lines := strings.Split(out, "\n")
	if got := strings.Join(lines[:len(wantVectorLines)], "\n"); got != strings.Join(wantVectorLines, "\n") {
		t.Errorf("output starts\n%s\nwant\n%s", got, strings.Join(wantVectorLines, "\n"))
	}
	rest := lines[len(wantVectorLines):]
	if len(rest) != 5 ||
		!strings.HasPrefix(rest[0], `  seed-000 canonicalization_vectors unicode-is-not-normalized: its "nfd" string lost the decomposed form`) ||
		!strings.HasPrefix(rest[1], `  seed-000 path_vectors "packages/\u2026sdk-ts": marked invalid, but U+2026 (HORIZONTAL ELLIPSIS) is a valid path character`) ||
		rest[3] != "total: 166 passed, 0 failed, 2 errata" {
		t.Errorf("errata and total:\n%s", strings.Join(rest, "\n"))
	}

	out, err = runCmd(t, newConformanceCmd(), "", "vectors", "--json", "--shared-dir", shared)
	if err != nil {
		t.Fatalf("--json: exit %d: %v", exitCode(err), err)
	}
	var doc struct {
		Groups []struct {
			Name                   string
			Passed, Failed, Errata int
		}
		Failed *int
	}
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("--json output: %v\n%s", err, out)
	}
	if len(doc.Groups) != 22 || doc.Failed == nil || *doc.Failed != 0 ||
		doc.Groups[8].Name != "seed-000 path_vectors" || doc.Groups[8].Passed != 10 || doc.Groups[8].Errata != 1 {
		t.Errorf("--json: %+v", doc)
	}
	if !strings.HasPrefix(out, `{"groups":[{"name":"seed-000 bounds","passed":9,"failed":0,"errata":0},`) ||
		!strings.HasSuffix(out, `],"failed":0}`+"\n") {
		t.Errorf("--json bytes: %s", out)
	}
}

// TestConformanceVectorsFailure points the command at a shared folder
// whose public file has one flipped path vector: the group line counts
// it, the failure is listed, and the exit status is 1.
func TestConformanceVectorsFailure(t *testing.T) {
	data, err := os.ReadFile(shareddir.Path(t, "spec", "agent-correspondence-0.1-vectors.json"))
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(string(data), `{ "path": "packages/{sdk-ts}", "valid": false }`, `{ "path": "packages/{sdk-ts}", "valid": true }`, 1)
	if bad == string(data) {
		t.Fatal("vector not found")
	}
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "spec"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "spec", "agent-correspondence-0.1-vectors.json"), []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := runCmd(t, newConformanceCmd(), "", "vectors", "--shared-dir", dir)
	if exitCode(err) != exitNonconforming || err.Error() != "1 vector checks failed" {
		t.Errorf("exit %d (%v), want 1", exitCode(err), err)
	}
	for _, want := range []string{
		"\npublic path_vectors: 10 passed, 1 failed, 0 errata\n",
		"\nfailures:\n  public path_vectors: \"packages/{sdk-ts}\": valid = false, want true\n",
		"\ntotal: 165 passed, 1 failed, 2 errata\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	out, err = runCmd(t, newConformanceCmd(), "", "vectors", "--json", "--shared-dir", dir)
	if exitCode(err) != exitNonconforming || !strings.Contains(out, `],"failed":1}`+"\n  public path_vectors: ") ||
		!strings.Contains(out, `{"name":"public path_vectors","passed":10,"failed":1,"errata":0}`) {
		t.Errorf("--json: exit %d\n%s", exitCode(err), out)
	}
}

func TestConformanceVectorsSetup(t *testing.T) {
	_, err := runCmd(t, newConformanceCmd(), "", "vectors", "--shared-dir", t.TempDir())
	if exitCode(err) != exitSetup || !strings.Contains(err.Error(), "public vector file") {
		t.Errorf("missing public file: exit %d (%v), want 2", exitCode(err), err)
	}
}

func TestConformanceHTTP(t *testing.T) {
	url, tok, _ := testRelay(t)
	tokFile := filepath.Join(t.TempDir(), "admin.token")
	if err := os.WriteFile(tokFile, []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := runCmd(t, newConformanceCmd(), "", "http", "--url", url, "--token-file", tokFile)
	if err != nil {
		t.Fatalf("exit %d: %v\n%s", exitCode(err), err, out)
	}
	for _, want := range []string{
		"http setup: 5 passed, 0 failed, 0 errata\n",
		"http body_matrix: 21 passed, 0 failed, 0 errata\n",
		"http lifecycle: 4 passed, 0 failed, 0 errata\n",
		"\ntotal: 113 passed, 0 failed, 0 errata\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, tok) {
		t.Error("the output quotes the token")
	}

	// The token from the environment, JSON output.
	t.Setenv(envConformanceToken, tok)
	out, err = runCmd(t, newConformanceCmd(), "", "http", "--json", "--url", url)
	if err != nil || !strings.HasPrefix(out, `{"groups":[{"name":"http setup","passed":5,"failed":0,"errata":0},`) ||
		!strings.HasSuffix(out, `],"failed":0}`+"\n") {
		t.Errorf("--json: exit %d (%v)\n%s", exitCode(err), err, out)
	}

	// A token without the admin scope fails setup: exit 1.
	out, err = runCmd(t, newConformanceCmd(), "", "http", "--url", url, "--token", "acr_not_a_real_token")
	if exitCode(err) != exitNonconforming || !strings.Contains(out, "http setup: 0 passed, 1 failed, 0 errata\n") {
		t.Errorf("bad token: exit %d (%v)\n%s", exitCode(err), err, out)
	}
}

func TestConformanceHTTPFlags(t *testing.T) {
	t.Setenv(envConformanceToken, "")
	t.Setenv(envConformanceToken+"_FILE", "")
	for _, tc := range []struct {
		name string
		args []string
		err  string
	}{
		{"no url", []string{"http", "--token", "x"}, "--url is required"},
		{"no token", []string{"http", "--url", "http://127.0.0.1:1"}, "a token is required"},
		{"unreadable token file", []string{"http", "--url", "http://127.0.0.1:1", "--token-file", "/nonexistent/token"}, "read token file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := runCmd(t, newConformanceCmd(), "", tc.args...)
			if exitCode(err) != exitSetup || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("exit %d (%v), want 2 and %q", exitCode(err), err, tc.err)
			}
		})
	}
}

// TestConformanceVectorsNotRun: without the shared folder, the embedded
// seeds run and the total line says, after its parseable prefix, what was
// not run and how to run it; --json carries it as not_run.
func TestConformanceVectorsNotRun(t *testing.T) {
	t.Setenv(shareddir.EnvVar, filepath.Join(t.TempDir(), "absent"))
	out, err := runCmd(t, newConformanceCmd(), "", "vectors")
	if err != nil {
		t.Fatalf("exit %d: %v\n%s", exitCode(err), err, out)
	}
	const want = "\ntotal: 88 passed, 0 failed, 2 errata; not run: the public vector file (set ACRELAY_SHARED_DIR or --shared-dir)\n"
	if !strings.HasSuffix(out, want) {
		t.Errorf("output ends\n%s\nwant %q", out[max(0, len(out)-200):], want)
	}
	out, err = runCmd(t, newConformanceCmd(), "", "vectors", "--json")
	if err != nil || !strings.HasSuffix(out, `],"failed":0,"not_run":["the public vector file (set ACRELAY_SHARED_DIR or --shared-dir)"]}`+"\n") {
		t.Errorf("--json: %v\n%s", err, out)
	}
}
