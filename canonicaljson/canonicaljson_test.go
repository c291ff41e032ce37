package canonicaljson_test

import (
	"bufio"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acrelay/acrelay/canonicaljson"
	"github.com/acrelay/acrelay/internal/shareddir"
)

func reasonOf(err error) string {
	var pe *canonicaljson.ProfileError
	if errors.As(err, &pe) {
		return pe.Reason
	}
	if err != nil {
		return "non-profile error: " + err.Error()
	}
	return "-"
}

func readTSV(t *testing.T, path string) [][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows [][]string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		rows = append(rows, strings.Split(line, "\t"))
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return rows
}

func TestJSONTestSuite(t *testing.T) {
	dir := shareddir.Path(t, "corpora", "jsontestsuite")
	rows := readTSV(t, filepath.Join(dir, "EXPECTED.tsv"))
	if len(rows) != 318 {
		t.Fatalf("EXPECTED.tsv has %d rows, want 318", len(rows))
	}
	accepted := 0
	for _, row := range rows {
		file, outcome, reason, also := row[0], row[1], row[2], row[3]
		t.Run(file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(dir, file))
			if err != nil {
				t.Fatal(err)
			}
			_, err = canonicaljson.Parse(data)
			got := reasonOf(err)
			want := reason
			if d, ok := deeperThan64[file]; ok {
				// The corpus predates the profile's depth bound (its
				// README: "no nesting limit"); spec §2 now refuses
				// these before any other check.
				outcome, want = "reject", d
			}
			if outcome == "accept" {
				want = "-"
				accepted++
			}
			if got != want {
				t.Errorf("reason = %s, want %s (also acceptable elsewhere: %s); err=%v", got, want, also, err)
			}
			// The object entry point admits only objects.
			_, oerr := canonicaljson.ParseObject(data)
			if outcome == "accept" && strings.HasPrefix(strings.TrimLeft(string(data), " \t\r\n"), "{") {
				if oerr != nil {
					t.Errorf("ParseObject refused an accepted object: %v", oerr)
				}
			} else if oerr == nil {
				t.Errorf("ParseObject accepted a non-object or refused document")
			}
		})
	}
	if accepted != 74 {
		t.Errorf("accepted rows = %d, want 74 (75 in the corpus, less one too deep)", accepted)
	}
}

// deeperThan64 are the JSONTestSuite files nested deeper than
// canonicaljson.MaxDepth, with the reason spec §2 gives them in place of
// the corpus's (accept, invalid_json): json_depth_exceeded.
var deeperThan64 = map[string]string{
	"i_structure_500_nested_arrays.json":     "json_depth_exceeded",
	"n_structure_100000_opening_arrays.json": "json_depth_exceeded",
	"n_structure_open_array_object.json":     "json_depth_exceeded",
}

// nest returns n levels of open around a null and n levels of closing.
func nest(n int, open, close string) string {
	return strings.Repeat(open, n) + "null" + strings.Repeat(close, n)
}

func TestJCSCorpus(t *testing.T) {
	dir := shareddir.Path(t, "corpora", "jcs")
	rows := readTSV(t, filepath.Join(dir, "EXPECTED.tsv"))
	if len(rows) != 12 {
		t.Fatalf("EXPECTED.tsv has %d rows, want 12", len(rows))
	}
	for _, row := range rows {
		file, outcome, reason, expected := row[0], row[1], row[2], row[3]
		t.Run(file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(dir, file))
			if err != nil {
				t.Fatal(err)
			}
			out, err := canonicaljson.CanonicalizeBytes(data)
			if outcome == "reject" {
				if got := reasonOf(err); got != reason {
					t.Fatalf("reason = %s, want %s", got, reason)
				}
				return
			}
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			want, err := os.ReadFile(filepath.Join(dir, expected))
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != string(want) {
				t.Errorf("canonical bytes differ\n got: %q\nwant: %q", out, want)
			}
			again, err := canonicaljson.CanonicalizeBytes(out)
			if err != nil || string(again) != string(out) {
				t.Errorf("not idempotent: %q, %v", again, err)
			}
		})
	}
}

func TestProjectCases(t *testing.T) {
	cases := []struct {
		name, in, reason string
	}{
		{"max safe", `9007199254740991`, "-"},
		{"min safe", `-9007199254740991`, "-"},
		{"above max", `9007199254740992`, "unsafe_integer"},
		{"below min", `-9007199254740992`, "unsafe_integer"},
		{"huge", `123456789012345678901234567890`, "unsafe_integer"},
		{"neg zero frac", `-0.0`, "fractional_number"},
		{"neg zero exp", `-0e0`, "fractional_number"},
		{"one point zero", `1.0`, "fractional_number"},
		{"exp", `1e2`, "fractional_number"},
		{"neg zero", `{"n":-0}`, "negative_zero"},
		{"zero", `0`, "-"},
		{"decoded duplicate", `{"a":1,"\u0061":2}`, "duplicate_object_name"},
		{"nul next to escapes", `{"\n\u0000\t":1}`, "nul_not_admitted"},
		{"nested duplicate", `{"a":{"b":1,"b":2}}`, "duplicate_object_name"},
		{"same name in different objects", `{"a":{"x":1},"b":{"x":1}}`, "-"},
		{"bom inside string kept", "{\"s\":\"a\uFEFFb\"}", "-"},
		{"leading bom", "\uFEFF{}", "invalid_json"},
		{"two values", `[][]`, "invalid_json"},
		{"empty", ``, "invalid_json"},
		{"plus one", `[+1]`, "invalid_json_number"},
		{"leading zero", `[012]`, "invalid_json_number"},
		{"infinity", `{"n":Infinity}`, "invalid_json_number"},
		{"neg infinity", `[-Infinity]`, "invalid_json_number"},
		{"nan", `{"n":NaN}`, "invalid_json_number"},
		{"hex", `[0x1]`, "invalid_json_number"},
		{"lone low surrogate", `["\udc00"]`, "non_scalar_unicode"},
		{"surrogate pair ok", `["\ud83d\ude00"]`, "-"},
		{"invalid utf8", "[\"\xff\"]", "invalid_utf8"},
		{"encoded surrogate", "[\"\xed\xa0\x80\"]", "invalid_utf8"},
		{"raw control", "[\"\x01\"]", "invalid_json"},
		{"noncharacter admitted", `["\uffff"]`, "-"},
		// Nesting (spec §2): at most 64 levels, refused before any other check.
		{"arrays 64 deep", nest(64, "[", "]"), "-"},
		{"arrays 65 deep", nest(65, "[", "]"), "json_depth_exceeded"},
		{"objects 64 deep", nest(64, `{"a":`, "}"), "-"},
		{"objects 65 deep", nest(65, `{"a":`, "}"), "json_depth_exceeded"},
		{"mixed 64 deep", nest(32, `{"a":[`, "]}"), "-"},
		{"mixed 66 deep", nest(33, `{"a":[`, "]}"), "json_depth_exceeded"},
		{"64 deep, then a duplicate", nest(63, "[", "]")[:63] + `{"a":1,"a":2}` + nest(63, "[", "]")[63:], "duplicate_object_name"},
		{"65 deep and a duplicate", nest(64, "[", "]")[:64] + `{"a":1,"a":2}` + nest(64, "[", "]")[64:], "json_depth_exceeded"},
		{"65 deep and not UTF-8", nest(65, "[", "]")[:65] + "\"\xff\"" + nest(65, "[", "]")[65:], "json_depth_exceeded"},
		{"65 deep, unterminated", strings.Repeat("[", 65), "json_depth_exceeded"},
		{"brackets in strings", `[["` + strings.Repeat("[{", 100) + `"]]`, "-"},
		{"escaped quote in a string", `["\"` + strings.Repeat("[", 100) + `"]`, "-"},
		{"500 deep", strings.Repeat("[", 500) + strings.Repeat("]", 500), "json_depth_exceeded"},
		{"100000 opened", strings.Repeat("[", 100000), "json_depth_exceeded"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := canonicaljson.Parse([]byte(tc.in))
			if got := reasonOf(err); got != tc.reason {
				t.Errorf("reason = %s, want %s (%v)", got, tc.reason, err)
			}
		})
	}
}

func TestStringsKeptExactly(t *testing.T) {
	in := "{\"nfd\":\"e\u0301\",\"nfc\":\"\u00e9\",\"crlf\":\"a\\r\\nb\",\"del\":\"\x7f\",\"ls\":\"\u2028\"}"
	v, err := canonicaljson.Parse([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := v.Get("nfd")
	if got.Str != "e\u0301" {
		t.Errorf("nfd = %q", got.Str)
	}
	out, err := canonicaljson.Canonical(v)
	if err != nil {
		t.Fatal(err)
	}
	want := "{\"crlf\":\"a\\r\\nb\",\"del\":\"\x7f\",\"ls\":\"\u2028\",\"nfc\":\"\u00e9\",\"nfd\":\"e\u0301\"}"
	if string(out) != want {
		t.Errorf("got %q want %q", out, want)
	}
}

func TestCompareUTF16(t *testing.T) {
	cases := []struct {
		a, b string
		want int
	}{
		{"a", "b", -1},
		{"", "a", -1},
		{"\U0001F600", "\uE000", -1}, // surrogate D83D < E000
		{"\U0001F602", "\uFB33", -1},
		{"\u00e9", "e", 1},
		{"\U0001F600", "\U0001F601", -1},
		{"ab", "ab", 0},
	}
	for _, tc := range cases {
		if got := canonicaljson.CompareUTF16(tc.a, tc.b); got != tc.want {
			t.Errorf("CompareUTF16(%q,%q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
		if got := canonicaljson.CompareUTF16(tc.b, tc.a); got != -tc.want {
			t.Errorf("CompareUTF16(%q,%q) = %d, want %d", tc.b, tc.a, got, -tc.want)
		}
	}
}

func TestCanonicalRefusesHandBuiltValues(t *testing.T) {
	cases := []struct {
		name   string
		v      canonicaljson.Value
		reason string
	}{
		{"nul", canonicaljson.StringValue("a\x00"), "nul_not_admitted"},
		{"bad utf8", canonicaljson.StringValue("\xff"), "invalid_utf8"},
		{"unsafe", canonicaljson.IntValue(1 << 53), "unsafe_integer"},
		{"dup", canonicaljson.ObjectValue(canonicaljson.Member{Name: "a"}, canonicaljson.Member{Name: "a"}), "duplicate_object_name"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := canonicaljson.Canonical(tc.v)
			if got := reasonOf(err); got != tc.reason {
				t.Errorf("reason = %s, want %s", got, tc.reason)
			}
		})
	}
}
