package correspondence_test

import (
	"strings"
	"testing"

	"github.com/acrelay/acrelay/correspondence"
)

// The seed's path vector at index 9 lost its U+0085 to Windows-1252
// decoding (spec §4 Erratum): it reads U+2026, which is a valid path
// character; the public file's U+0085 is a Cc control and invalid.
const seedPathErratum = "packages/\u2026sdk-ts"

func TestScalarVectors(t *testing.T) {
	for _, src := range vectorSources(t) {
		t.Run(src.name, func(t *testing.T) {
			counts := [3]int{len(src.vf.OpaqueIDVectors), len(src.vf.LocatorVectors), len(src.vf.PathVectors)}
			if counts != [3]int{4, 8, 11} {
				t.Fatalf("vector counts = %v, want [4 8 11]", counts)
			}
			for _, v := range src.vf.OpaqueIDVectors {
				if got := correspondence.ValidOpaqueID(v.Value); got != v.Valid {
					t.Errorf("ValidOpaqueID(%q) = %v, want %v", v.Value, got, v.Valid)
				}
			}
			for _, v := range src.vf.LocatorVectors {
				if got := correspondence.ValidLocator(v.Value); got != v.Valid {
					t.Errorf("ValidLocator(%q) = %v, want %v", v.Value, got, v.Valid)
				}
			}
			errata := 0
			for _, v := range src.vf.PathVectors {
				got := correspondence.ValidPath(v.Path)
				if src.name == "seed000" && v.Path == seedPathErratum {
					errata++
					if !got || v.Valid {
						t.Errorf("erratum entry: ValidPath = %v (want true), seed says %v (known false)", got, v.Valid)
					}
					continue
				}
				if got != v.Valid {
					t.Errorf("ValidPath(%q) = %v, want %v", v.Path, got, v.Valid)
				}
			}
			if want := map[string]int{"seed000": 1, "public": 0}[src.name]; errata != want {
				t.Errorf("errata = %d, want %d", errata, want)
			}
		})
	}
	if correspondence.ValidPath("packages/\u0085sdk-ts") {
		t.Error("U+0085 (Cc) admitted in a path")
	}
	if !correspondence.ValidPath(seedPathErratum) {
		t.Error("U+2026 refused in a path")
	}
}

func TestValidPath(t *testing.T) {
	cases := []struct {
		name, path string
		valid      bool
	}{
		{"dot", ".", true},
		{"plain", "a", true},
		{"nested", "a/b/c", true},
		{"three dots segment", "a/.../b", true},
		{"dot prefix name", ".github/workflows", true},
		{"space", "my docs/a b", true},
		{"unicode", "docs/\u00e9t\u00e9/\U0001F600", true},
		{"empty", "", false},
		{"dot segment", "a/./b", false},
		{"leading dot segment", "./a", false},
		{"trailing dotdot", "a/..", false},
		{"dotdot alone", "..", false},
		{"trailing slash", "a/", false},
		{"slash alone", "/", false},
		{"star", "a*", false},
		{"question", "a?", false},
		{"brackets", "a[b]", false},
		{"close bracket", "a]", false},
		{"brace", "a}", false},
		{"tab", "a\tb", false},
		{"del", "a\x7fb", false},
		{"c1 control", "a\u009fb", false},
		{"256 scalars", strings.Repeat("\u00e9", 256), true},
		{"257 scalars", strings.Repeat("\u00e9", 257), false},
		{"256 with segments", strings.Repeat("abc/", 63) + "abcd", true},
		{"invalid utf8", "a\xffb", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := correspondence.ValidPath(tc.path); got != tc.valid {
				t.Errorf("ValidPath = %v, want %v", got, tc.valid)
			}
		})
	}
}

func TestPathsOverlap(t *testing.T) {
	cases := []struct {
		a, b string
		want bool
	}{
		{".", "anything", true},
		{"x/y", ".", true},
		{".", ".", true},
		{"packages/sdk", "packages/sdk", true},
		{"packages/sdk", "packages/sdk/src", true},
		{"packages/sdk/src/a", "packages/sdk", true},
		{"packages/sdk", "packages/sdk-old", false},
		{"packages/sdk", "packages/sdkx/src", false},
		{"packages/sdk", "packages", true},
		{"Packages", "packages", false},
		{"a", "b", false},
		{"a/b", "a/c", false},
	}
	for _, tc := range cases {
		t.Run(tc.a+"|"+tc.b, func(t *testing.T) {
			if got := correspondence.PathsOverlap(tc.a, tc.b); got != tc.want {
				t.Errorf("PathsOverlap = %v, want %v", got, tc.want)
			}
			if got := correspondence.PathsOverlap(tc.b, tc.a); got != tc.want {
				t.Errorf("PathsOverlap reversed = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestValidOpaqueIDAndLocator(t *testing.T) {
	opaque := []struct {
		name, s string
		valid   bool
	}{
		{"ascii", "repo:x", true},
		{"256", strings.Repeat("\u00e9", 256), true},
		{"257", strings.Repeat("\u00e9", 257), false},
		{"empty", "", false},
		{"nbsp", "a\u00a0b", false},
		{"ideographic space", "a\u3000b", false},
		{"line separator", "a\u2028b", false},
		{"zwnbsp", "\ufeffa", false},
		{"tab", "a\tb", false},
		{"del", "a\x7f", false},
		{"non-space format char", "a\u200bb", true},
		{"astral", "\U0001F600", true},
	}
	for _, tc := range opaque {
		t.Run("opaque/"+tc.name, func(t *testing.T) {
			if got := correspondence.ValidOpaqueID(tc.s); got != tc.valid {
				t.Errorf("ValidOpaqueID = %v, want %v", got, tc.valid)
			}
		})
	}
	locators := []struct {
		name, s string
		valid   bool
	}{
		{"scheme chars", "a+b.c-d:x", true},
		{"2048", "x:" + strings.Repeat("a", 2046), true},
		{"2049", "x:" + strings.Repeat("a", 2047), false},
		{"empty", "", false},
		{"colon first", ":x", false},
		{"bad scheme char", "a_b:x", false},
		{"nbsp", "x:a\u00a0b", false},
		{"unicode ok", "x:\u00e9", true},
	}
	for _, tc := range locators {
		t.Run("locator/"+tc.name, func(t *testing.T) {
			if got := correspondence.ValidLocator(tc.s); got != tc.valid {
				t.Errorf("ValidLocator = %v, want %v", got, tc.valid)
			}
		})
	}
	uuids := []struct {
		s     string
		valid bool
	}{
		{"11111111-1111-4111-8111-111111111111", true},
		{"00000000-0000-0000-0000-000000000000", true},
		{"11111111-1111-4111-8111-11111111111A", false},
		{"11111111111141118111111111111111", false},
		{"{11111111-1111-4111-8111-111111111111}", false},
		{"11111111-1111-4111-8111_111111111111", false},
		{"11111111-1111-4111-8111-11111111111", false},
	}
	for _, tc := range uuids {
		if got := correspondence.ValidUUID(tc.s); got != tc.valid {
			t.Errorf("ValidUUID(%q) = %v, want %v", tc.s, got, tc.valid)
		}
	}
}
