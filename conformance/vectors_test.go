package conformance

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/acrelay/acrelay/internal/shareddir"
)

// counts is a group's outcome as "passed/failed/errata".
type counts struct {
	name                   string
	passed, failed, errata int
}

func countsOf(groups []Group) []counts {
	out := make([]counts, len(groups))
	for i, g := range groups {
		out[i] = counts{g.Title(), g.Passed, g.Failed, len(g.Errata)}
	}
	return out
}

func mustSeed(t *testing.T, name string) []byte {
	t.Helper()
	b, err := Seed(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func seed000(t *testing.T) []byte { return mustSeed(t, "000_d18f2735a1feda05.txt") }

// replaceOnce replaces exactly one occurrence of old in data.
func replaceOnce(t *testing.T, data []byte, old, new string) []byte {
	t.Helper()
	if n := strings.Count(string(data), old); n != 1 {
		t.Fatalf("%q occurs %d times, want 1", old, n)
	}
	return []byte(strings.Replace(string(data), old, new, 1))
}

var wantSeed000 = []counts{
	{"seed-000 bounds", 9, 0, 0},
	{"seed-000 signing_vector", 4, 0, 0},
	{"seed-000 canonicalization_vectors", 2, 0, 1},
	{"seed-000 rejection_vectors", 8, 0, 0},
	{"seed-000 body_matrix", 21, 0, 0},
	{"seed-000 invalid_body_vectors", 5, 0, 0},
	{"seed-000 opaque_id_vectors", 4, 0, 0},
	{"seed-000 locator_vectors", 8, 0, 0},
	{"seed-000 path_vectors", 10, 0, 1},
	{"seed-000 lineage_vectors", 5, 0, 0},
}

func TestSeed000(t *testing.T) {
	groups := RunCorrespondenceVectors(SourceSeed000, seed000(t))
	if got := countsOf(groups); !slices.Equal(got, wantSeed000) {
		t.Errorf("groups\n got %v\nwant %v", got, wantSeed000)
	}
	r := Report{Groups: groups}
	errata := r.Errata()
	if len(errata) != 2 {
		t.Fatalf("errata = %+v, want 2", errata)
	}
	if errata[0].Group != "seed-000 canonicalization_vectors" || errata[0].Entry != "unicode-is-not-normalized" ||
		!strings.Contains(errata[0].Explanation, `holds "e" + U+0301`) {
		t.Errorf("first erratum = %+v", errata[0])
	}
	if errata[1].Group != "seed-000 path_vectors" || errata[1].Entry != `"packages/\u2026sdk-ts"` ||
		!strings.Contains(errata[1].Explanation, "U+0085 (NEXT LINE, a Cc control)") ||
		!strings.Contains(errata[1].Explanation, "Windows-1252") {
		t.Errorf("second erratum = %+v", errata[1])
	}
}

func TestPublicVectorFile(t *testing.T) {
	data, err := os.ReadFile(shareddir.Path(t, filepath.FromSlash(PublicVectorsPath)))
	if err != nil {
		t.Fatal(err)
	}
	want := []counts{
		{"public bounds", 9, 0, 0},
		{"public signing_vector", 4, 0, 0},
		{"public canonicalization_vectors", 3, 0, 0},
		{"public rejection_vectors", 8, 0, 0},
		{"public body_matrix", 21, 0, 0},
		{"public invalid_body_vectors", 5, 0, 0},
		{"public opaque_id_vectors", 4, 0, 0},
		{"public locator_vectors", 8, 0, 0},
		{"public path_vectors", 11, 0, 0},
		{"public lineage_vectors", 5, 0, 0},
	}
	if got := countsOf(RunCorrespondenceVectors(SourcePublic, data)); !slices.Equal(got, want) {
		t.Errorf("groups\n got %v\nwant %v", got, want)
	}
}

func TestSeed001(t *testing.T) {
	want := []counts{
		{"seed-001 envelope_acceptance", 8, 0, 0},
		{"seed-001 envelope_rejection", 4, 0, 0},
	}
	if got := countsOf(RunEnvelopeVectors(SourceSeed001, mustSeed(t, "001_eade5896d07b0a7c.txt"))); !slices.Equal(got, want) {
		t.Errorf("groups\n got %v\nwant %v", got, want)
	}
	// A wrong hash and an accepted "rejection" are failures.
	seed := mustSeed(t, "001_eade5896d07b0a7c.txt")
	bad := replaceOnce(t, seed, `"hash": "420F66311F10068C0DB62DA09782D9CADCA7273D894AE8675D0134689D5E68FD"`,
		`"hash": "420F66311F10068C0DB62DA09782D9CADCA7273D894AE8675D0134689D5E68FE"`)
	want = []counts{
		{"seed-001 envelope_acceptance", 7, 1, 0},
		{"seed-001 envelope_rejection", 4, 0, 0},
	}
	if got := countsOf(RunEnvelopeVectors(SourceSeed001, bad)); !slices.Equal(got, want) {
		t.Errorf("wrong hash: groups\n got %v\nwant %v", got, want)
	}
	if got := countsOf(RunEnvelopeVectors(SourceSeed001, []byte("{"))); !slices.Equal(got, []counts{{"seed-001 file", 0, 1, 0}}) {
		t.Errorf("unreadable file: %v", got)
	}
}

// TestErrataByContent proves the errata are recognised by the damaged
// value, not by file or position: the repaired entries are plain vectors.
func TestErrataByContent(t *testing.T) {
	repaired := replaceOnce(t, seed000(t), `"nfd": "`+nfcE+`"`, `"nfd": "`+nfdE+`"`)
	repaired = replaceOnce(t, repaired, `"jcs": "{\"nfc\":\"`+nfcE+`\",\"nfd\":\"`+nfcE+`\"}"`,
		`"jcs": "{\"nfc\":\"`+nfcE+`\",\"nfd\":\"`+nfdE+`\"}"`)
	repaired = replaceOnce(t, repaired, damagedPath, originalPath)
	got := countsOf(RunCorrespondenceVectors("x", repaired))
	if got[2] != (counts{"x canonicalization_vectors", 3, 0, 0}) || got[8] != (counts{"x path_vectors", 11, 0, 0}) {
		t.Errorf("repaired seed: %v", got)
	}

	// The damaged path marked valid is simply right: no erratum.
	markedValid := replaceOnce(t, seed000(t), `"`+damagedPath+`", "valid": false`, `"`+damagedPath+`", "valid": true`)
	if got := countsOf(RunCorrespondenceVectors("x", markedValid))[8]; got != (counts{"x path_vectors", 11, 0, 0}) {
		t.Errorf("U+2026 marked valid: %v", got)
	}

	// The damaged canonicalization entry with a jcs it does not produce
	// fails even though it is a known erratum.
	badJCS := replaceOnce(t, seed000(t), `"jcs": "{\"nfc\":\"`+nfcE+`\",\"nfd\":\"`+nfcE+`\"}"`, `"jcs": "{\"nfd\":\"`+nfcE+`\"}"`)
	g := RunCorrespondenceVectors("x", badJCS)[2]
	if g.Passed != 2 || g.Failed != 1 || len(g.Errata) != 0 ||
		!strings.HasPrefix(g.Failures[0], "unicode-is-not-normalized (known erratum): the corrected rule does not hold: the seed's own entry") {
		t.Errorf("damaged entry with a wrong jcs: %+v", g)
	}
}

func TestErratumWhoseRuleFails(t *testing.T) {
	g := Group{Source: "x", Name: "path_vectors"}
	g.erratum("entry", knownErratum{explanation: "e", check: func() error { return errors.New("refused") }})
	g.erratum("other", knownErratum{explanation: "e", check: func() error { return nil }})
	if g.Passed != 0 || g.Failed != 1 || len(g.Errata) != 1 ||
		g.Failures[0] != "entry (known erratum): the corrected rule does not hold: refused" {
		t.Errorf("group = %+v", g)
	}
}

// TestFailuresAreCounted damages one entry of each group and checks that
// exactly that entry fails.
func TestFailuresAreCounted(t *testing.T) {
	cases := []struct {
		name     string
		old, new string
		want     counts
		failure  string
	}{
		{"signing digest", `"signing_digest_hex": "1bc3`, `"signing_digest_hex": "0bc3`,
			counts{"x signing_vector", 3, 1, 0}, "claim-open-fixed-ed25519 signing_digest: 1bc3"},
		{"signing event id", `"event_id": "sha256:6f9d`, `"event_id": "sha256:5f9d`,
			counts{"x signing_vector", 3, 1, 0}, "claim-open-fixed-ed25519 event_id: signing gives sha256:6f9d"},
		{"signature", `"signature_b64url": "y93m`, `"signature_b64url": "z93m`,
			counts{"x signing_vector", 2, 2, 0}, "claim-open-fixed-ed25519 signature: y93m"},
		{"canonicalization", `"jcs": "{\"a\":\"ascii\"`, `"jcs": "{\"b\":\"ascii\"`,
			counts{"x canonicalization_vectors", 1, 1, 1}, "utf16-property-order: JCS is"},
		{"rejection reason", `"reason": "negative_zero"`, `"reason": "fractional_number"`,
			counts{"x rejection_vectors", 7, 1, 0}, "negative-zero: refused with negative_zero, want fractional_number"},
		{"rejection accepted", `"json": "{\"n\":-0}"`, `"json": "{\"n\":0}"`,
			counts{"x rejection_vectors", 7, 1, 0}, "negative-zero: accepted, must be refused with negative_zero"},
		{"body matrix", `{ "kind": "pause", "body": {} }`, `{ "kind": "pause", "body": {"x": 1} }`,
			counts{"x body_matrix", 20, 1, 0}, "pause: refused: event_invalid [/body/x=unknown_body_field]"},
		{"invalid body reason", `"reason": "result_revision_required"`, `"reason": "detail_required"`,
			counts{"x invalid_body_vectors", 4, 1, 0}, "ack.applied detail_required: issues event_invalid [/body/result_revision=result_revision_required]"},
		{"invalid body accepted", `"generation": 2, "expires_at": "2026-07-19T12:00:00.000Z" }, "reason"`,
			`"generation": 1, "expires_at": "2026-07-19T12:00:00.000Z" }, "reason"`,
			counts{"x invalid_body_vectors", 4, 1, 0}, "claim.open open_generation_must_be_one: accepted"},
		{"opaque id", `"repo with space", "valid": false`, `"repo with space", "valid": true`,
			counts{"x opaque_id_vectors", 3, 1, 0}, `"repo with space": valid = false, want true`},
		{"locator", `"http:", "valid": true`, `"http:", "valid": false`,
			counts{"x locator_vectors", 7, 1, 0}, `"http:": valid = true, want false`},
		{"path", `"packages/**", "valid": false`, `"packages/**", "valid": true`,
			counts{"x path_vectors", 9, 1, 1}, `"packages/**": valid = false, want true`},
		{"lineage", `"active_tips": ["renew2"]`, `"active_tips": ["open"]`,
			counts{"x lineage_vectors", 4, 1, 0}, "reordered-identical-path-set-is-valid: reordered-identical-path-set-is-valid: active tips = [renew2], want [open]"},
		{"bound lowered", `"parents_max": 16`, `"parents_max": 15`,
			counts{"x bounds", 7, 2, 0}, "parents_max 15: admitted one past the bound (no issue at /parents)"},
		{"bound raised", `"general_text_scalar_values_max": 1000`, `"general_text_scalar_values_max": 1001`,
			counts{"x bounds", 8, 1, 0}, "general_text_scalar_values_max 1001: refused at the bound: event_invalid [/body/summary=length_out_of_range]"},
		{"raw post bound", `"raw_post_utf8_bytes_max": 65536`, `"raw_post_utf8_bytes_max": 65535`,
			counts{"x bounds", 8, 1, 0}, "raw_post_utf8_bytes_max 65535 (enforced by a relay; conformance http posts past it): the file says 65535, spec §3 says 65536"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			groups := RunCorrespondenceVectors("x", replaceOnce(t, seed000(t), tc.old, tc.new))
			if len(groups) != 10 {
				t.Fatalf("%d groups", len(groups))
			}
			at := slices.IndexFunc(groups, func(g Group) bool { return g.Title() == tc.want.name })
			if at < 0 {
				t.Fatalf("no group %s", tc.want.name)
			}
			g := groups[at]
			if got := countsOf(groups[at : at+1])[0]; got != tc.want {
				t.Errorf("counts = %v, want %v", got, tc.want)
			}
			if len(g.Failures) == 0 || !strings.HasPrefix(g.Failures[0], tc.failure) {
				t.Errorf("failures = %q, want prefix %q", g.Failures, tc.failure)
			}
			for i, other := range groups {
				if i != at && other.Failed != 0 {
					t.Errorf("group %s failed too: %q", other.Title(), other.Failures)
				}
			}
		})
	}
}

func TestFileShape(t *testing.T) {
	seed := seed000(t)
	// An unknown member and a missing group are failures, not silent passes.
	extra := replaceOnce(t, seed, `"bounds": {`, `"future_vectors": [], "bounds": {`)
	groups := RunCorrespondenceVectors("x", extra)
	last := groups[len(groups)-1]
	if len(groups) != 11 || last.Name != "future_vectors" || last.Failed != 1 {
		t.Errorf("unknown member: %v", countsOf(groups))
	}
	missing := replaceOnce(t, seed, `"locator_vectors": [`, `"locator_vectorz": [`)
	got := countsOf(RunCorrespondenceVectors("x", missing))
	if got[7] != (counts{"x locator_vectors", 0, 1, 0}) || got[10] != (counts{"x locator_vectorz", 0, 1, 0}) {
		t.Errorf("renamed group: %v", got)
	}
	wrongProtocol := replaceOnce(t, seed, `"protocol": "agent-correspondence/v0.1",
  "canonicalization"`, `"protocol": "agent-correspondence/v0.2",
  "canonicalization"`)
	if got := countsOf(RunCorrespondenceVectors("x", wrongProtocol)); got[0] != (counts{"x protocol", 0, 1, 0}) {
		t.Errorf("wrong protocol: %v", got)
	}
	unknownField := replaceOnce(t, seed, `{ "path": ".", "valid": true }`, `{ "path": ".", "valid": true, "note": "x" }`)
	if got := countsOf(RunCorrespondenceVectors("x", unknownField)); got[8] != (counts{"x path_vectors", 0, 1, 0}) {
		t.Errorf("unknown entry field: %v", got)
	}
	if got := countsOf(RunCorrespondenceVectors("x", []byte("not json"))); !slices.Equal(got, []counts{{"x file", 0, 1, 0}}) {
		t.Errorf("not json: %v", got)
	}
}

func TestRunVectorsAndJSON(t *testing.T) {
	r, err := RunVectors("")
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Groups) != 12 || r.Failed() != 0 || r.Passed() != 88 || len(r.Errata()) != 2 || len(r.Notes) != 1 {
		t.Errorf("seeds only: %d groups, %d passed, %d failed, %d errata, notes %q", len(r.Groups), r.Passed(), r.Failed(), len(r.Errata()), r.Notes)
	}
	if _, err := RunVectors(t.TempDir()); err == nil {
		t.Error("a shared folder without the public file is not an error")
	}
	b, err := json.Marshal(Report{Groups: []Group{
		{Source: "seed-000", Name: "path_vectors", Passed: 10, Errata: []Erratum{{Entry: "e"}}},
		{Source: "public", Name: "path_vectors", Passed: 10, Failed: 1, Failures: []string{"f"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"groups":[{"name":"seed-000 path_vectors","passed":10,"failed":0,"errata":1},` +
		`{"name":"public path_vectors","passed":10,"failed":1,"errata":0}],"failed":1}`
	if string(b) != want {
		t.Errorf("JSON\n got %s\nwant %s", b, want)
	}
	if b, _ := json.Marshal(Report{}); string(b) != `{"groups":[],"failed":0}` {
		t.Errorf("empty report JSON = %s", b)
	}
}
