package canonicaljson_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/acrelay/acrelay/canonicaljson"
	"github.com/acrelay/acrelay/internal/shareddir"
	"github.com/go-json-experiment/json/jsontext"
)

// knownReasons are the profile's reason codes (spec §2).
var knownReasons = map[string]bool{
	canonicaljson.ReasonInvalidJSON: true, canonicaljson.ReasonDuplicateObjectName: true,
	canonicaljson.ReasonFractionalNumber: true, canonicaljson.ReasonNegativeZero: true,
	canonicaljson.ReasonUnsafeInteger: true, canonicaljson.ReasonInvalidJSONNumber: true,
	canonicaljson.ReasonNULNotAdmitted: true, canonicaljson.ReasonNonScalarUnicode: true,
	canonicaljson.ReasonInvalidUTF8: true, canonicaljson.ReasonJSONDepthExceeded: true,
}

// addSeeds adds the project cases, and when the shared folder exists the
// JSONTestSuite and JCS corpora and the public vector file.
func addSeeds(f *testing.F) {
	for _, s := range []string{
		`{}`, `[]`, `0`, `-9007199254740991`, `9007199254740992`, `-0`, `1.0`, `1e2`,
		`{"a":1,"\u0061":2}`, `{"\n\u0000\t":1}`, `["\ud83d\ude00"]`, `["\udc00"]`, "[\"\xff\"]",
		`{"b":[1,{"d":null,"c":true}],"a":"\u2028\u0001\"\\"}`, "{\"s\":\"a\uFEFFb\"}",
		`{"":"bmp-private-use","😀":"astral","a":"ascii"}`, "\uFEFF{}", `[][]`, `{"n":NaN}`,
		nest(64, "[", "]"), nest(65, "[", "]"), nest(65, `{"a":`, "}"), `["[[[["]`,
	} {
		f.Add([]byte(s))
	}
	d, err := shareddir.Find()
	if err != nil {
		return
	}
	for _, pattern := range []string{"corpora/jsontestsuite/*.json", "corpora/jcs/input/*.json", "spec/*.json"} {
		files, _ := filepath.Glob(filepath.Join(d, pattern))
		for _, file := range files {
			if data, err := os.ReadFile(file); err == nil {
				f.Add(data)
			}
		}
	}
}

func checkRefusal(t *testing.T, err error) {
	t.Helper()
	var pe *canonicaljson.ProfileError
	if !errors.As(err, &pe) || !knownReasons[pe.Reason] || !errors.Is(err, canonicaljson.ErrProfile) {
		t.Fatalf("refusal is not a ProfileError with a known reason: %v", err)
	}
}

// FuzzParse: Parse never panics; refusals carry a known reason; for
// accepted input the canonical bytes re-parse and are a fixed point:
// canonical(parse(canonical(parse(x)))) == canonical(parse(x)).
func FuzzParse(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := canonicaljson.Parse(data)
		if err != nil {
			checkRefusal(t, err)
			if _, oerr := canonicaljson.ParseObject(data); oerr == nil {
				t.Fatal("ParseObject accepted what Parse refused")
			}
			return
		}
		c1, err := canonicaljson.Canonical(v)
		if err != nil {
			t.Fatalf("canonical of an accepted value: %v", err)
		}
		v2, err := canonicaljson.Parse(c1)
		if err != nil {
			t.Fatalf("canonical output does not re-parse: %v", err)
		}
		if !canonicaljson.Equal(v, v2) {
			t.Fatal("re-parsed canonical value differs")
		}
		c2, err := canonicaljson.Canonical(v2)
		if err != nil || !bytes.Equal(c1, c2) {
			t.Fatalf("canonical form is not a fixed point: %v", err)
		}
		if _, oerr := canonicaljson.ParseObject(data); (oerr == nil) != (v.Kind == canonicaljson.Object) {
			t.Fatalf("ParseObject disagrees with Parse on an accepted %s", v.Kind)
		}
		if d := maxDepth(data); d > canonicaljson.MaxDepth {
			t.Fatalf("accepted a document of depth %d", d)
		}
	})
}

// maxDepth is the deepest nesting of a well-formed document, as jsontext
// counts it.
func maxDepth(data []byte) int {
	dec := jsontext.NewDecoder(bytes.NewReader(data))
	deepest := 0
	for {
		if _, err := dec.ReadToken(); err != nil {
			return deepest
		}
		deepest = max(deepest, dec.StackDepth())
	}
}

// reversed returns v with the members of every object in reverse order.
func reversed(v canonicaljson.Value) canonicaljson.Value {
	switch v.Kind {
	case canonicaljson.Array:
		elems := make([]canonicaljson.Value, len(v.Elems))
		for i := range v.Elems {
			elems[i] = reversed(v.Elems[i])
		}
		v.Elems = elems
	case canonicaljson.Object:
		n := len(v.Members)
		ms := make([]canonicaljson.Member, n)
		for i := range v.Members {
			ms[n-1-i] = canonicaljson.Member{Name: v.Members[i].Name, Value: reversed(v.Members[i].Value)}
		}
		v.Members = ms
	}
	return v
}

// FuzzCanonicalStable: the canonical bytes of an accepted document do not
// depend on member order or insignificant whitespace, and
// CanonicalizeBytes is idempotent.
func FuzzCanonicalStable(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		// The canonical string form equals jsontext's RFC 8785 quoting.
		if s := string(data); utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 {
			got, err := canonicaljson.Canonical(canonicaljson.StringValue(s))
			want, werr := jsontext.AppendQuote(nil, s)
			if err != nil || werr != nil || !bytes.Equal(got, want) {
				t.Fatalf("string quoting differs from jsontext: %v %v", err, werr)
			}
		}
		c1, err := canonicaljson.CanonicalizeBytes(data)
		if err != nil {
			checkRefusal(t, err)
			return
		}
		again, err := canonicaljson.CanonicalizeBytes(c1)
		if err != nil || !bytes.Equal(again, c1) {
			t.Fatalf("not idempotent: %v", err)
		}
		v, _ := canonicaljson.Parse(data)
		c2, err := canonicaljson.Canonical(reversed(v))
		if err != nil || !bytes.Equal(c1, c2) {
			t.Fatalf("member order changes the canonical bytes: %v", err)
		}
		pretty := jsontext.Value(bytes.Clone(c1))
		if err := pretty.Indent(jsontext.WithIndent("\t")); err != nil {
			t.Fatalf("canonical output is not JSON: %v", err)
		}
		c3, err := canonicaljson.CanonicalizeBytes(pretty)
		if err != nil || !bytes.Equal(c1, c3) {
			t.Fatalf("whitespace changes the canonical bytes: %v", err)
		}
		if strings.ContainsAny(string(c1[:1]), " \t\r\n") {
			t.Fatal("canonical output starts with whitespace")
		}
	})
}

// FuzzCanonicalMark: splicing a member at AppendCanonicalMark's index
// gives the canonical bytes of the object with that member, for every
// top-level member taken out and put back, and for a name not present.
func FuzzCanonicalMark(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := canonicaljson.ParseObject(data)
		if err != nil {
			return
		}
		want, err := canonicaljson.Canonical(v)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range v.Members {
			out, at, err := canonicaljson.AppendCanonicalMark([]byte("prefix"), v, m.Name, m.Name)
			if err != nil {
				t.Fatal(err)
			}
			out = out[len("prefix"):]
			at -= len("prefix")
			member, _ := canonicaljson.Canonical(canonicaljson.ObjectValue(m))
			member = member[1 : len(member)-1] // "name":value
			var got []byte
			switch {
			case out[at-1] != '{':
				got = append(append(append(append([]byte{}, out[:at]...), ','), member...), out[at:]...)
			case len(out) == 2:
				got = append(append([]byte("{"), member...), '}')
			default:
				got = append(append(append(append([]byte{}, out[:at]...), member...), ','), out[at:]...)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("member %q spliced at %d: got %s, want %s", m.Name, at, got, want)
			}
		}
		// A name absent from v leaves the bytes as Canonical's.
		out, at, err := canonicaljson.AppendCanonicalMark(nil, v, "\uffff-absent")
		if err == nil && (!bytes.Equal(out, want) || at < 1 || at >= len(out)) {
			t.Fatalf("absent mark: %s at %d, want %s", out, at, want)
		}
	})
}
