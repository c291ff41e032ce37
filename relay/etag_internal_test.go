package relay

import (
	"slices"
	"strings"
	"testing"
)

// TestETagList: RFC 9110 §13.1.1 lists, commas inside quoted tags
// included; a malformed field matches nothing.
func TestETagList(t *testing.T) {
	for _, c := range []struct {
		vals []string
		tags []string
		star bool
		ok   bool
	}{
		{[]string{`"a"`}, []string{`"a"`}, false, true},
		{[]string{` "a" ,W/"b",, "c"`}, []string{`"a"`, `W/"b"`, `"c"`}, false, true},
		{[]string{`"a"`, `"b"`}, []string{`"a"`, `"b"`}, false, true},
		{[]string{`"x,*,y"`}, []string{`"x,*,y"`}, false, true},
		{[]string{`*`}, nil, true, true},
		{[]string{`*, "a"`}, []string{`"a"`}, true, true},
		{[]string{` ,`}, nil, false, true},
		{[]string{`""`}, []string{`""`}, false, true},
		{[]string{`a`}, nil, false, false},
		{[]string{`"a`}, nil, false, false},
		{[]string{`"a" "b"`}, nil, false, false},
		{[]string{`W/a`}, nil, false, false},
		{[]string{`*x`}, nil, false, false},
		{[]string{`"a"`, `bad`}, nil, false, false},
	} {
		tags, star, ok := etagList(c.vals)
		if !slices.Equal(tags, c.tags) || star != c.star || ok != c.ok {
			t.Errorf("etagList(%q) = %q %v %v, want %q %v %v", c.vals, tags, star, ok, c.tags, c.star, c.ok)
		}
	}
	const etag = `"abc"`
	for vals, want := range map[string]bool{`"abc"`: true, `"x,*,y"`: false, `W/"abc"`: false, `"x", "abc"`: true, `*`: true, `"abc" junk`: false} {
		if got := ifMatchStrong([]string{vals}, etag); got != want {
			t.Errorf("ifMatchStrong(%q) = %v, want %v", vals, got, want)
		}
	}
}

// FuzzETagList: any field lines parse without panicking; a list that
// parses holds only quoted tags, each optionally weak.
func FuzzETagList(f *testing.F) {
	for _, s := range []string{`"a"`, `W/"b", "c"`, `*`, `"x,*,y"`, ` ,`, `"a" "b"`} {
		f.Add(s, "")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		tags, _, ok := etagList([]string{a, b})
		if !ok {
			return
		}
		for _, tag := range tags {
			q := strings.TrimPrefix(tag, "W/")
			if len(q) < 2 || q[0] != '"' || q[len(q)-1] != '"' || strings.Count(q, `"`) != 2 {
				t.Fatalf("etagList(%q, %q) gave tag %q", a, b, tag)
			}
		}
	})
}
