package relay

import (
	"net/http"
	"slices"
	"testing"
)

// TestParseAccept: RFC 9110 §12.5.1 members, with the profile's rules:
// parameters before q other than charset=utf-8 and malformed weights
// leave the member out; parameters after q are ignored.
func TestParseAccept(t *testing.T) {
	for _, c := range []struct {
		name, h string
		want    []mediaRange
	}{
		{"one", "application/json", []mediaRange{{"application", "json", 1000, false}}},
		{"case folded", "Application/JSON;Q=0.5", []mediaRange{{"application", "json", 500, false}}},
		{"charset utf-8", `application/json; charset="UTF-8"`, []mediaRange{{"application", "json", 1000, true}}},
		{"other charset", "application/json;charset=latin1", nil},
		{"profile", "application/json;profile=other", nil},
		{"type=entry", "application/atom+xml;type=entry", nil},
		{"extension after q", "application/json;q=1;charset=iso-8859-1", []mediaRange{{"application", "json", 1000, false}}},
		{"valueless extension", "application/json;q=0.2;ext", []mediaRange{{"application", "json", 200, false}}},
		{"valueless parameter", "application/json;flag", nil},
		{"q wat", "application/json;q=wat, */*", []mediaRange{{"*", "*", 1000, false}}},
		{"q 1.0001", "application/json;q=1.0001", nil},
		{"q 2", "application/json;q=2", nil},
		{"q 1.001", "application/json;q=1.001", nil},
		{"q quoted", `application/json;q="0.5"`, nil},
		{"q empty", "application/json;q=", nil},
		{"q bounds", "a/b;q=0, c/d;q=1.000, e/f;q=0.999, g/h;q=0.", []mediaRange{{"a", "b", 0, false}, {"c", "d", 1000, false}, {"e", "f", 999, false}, {"g", "h", 0, false}}},
		{"empty members and parameters", " , application/json;; ;q=0.3 ,,", []mediaRange{{"application", "json", 300, false}}},
		{"quoted comma", `application/json;profile="a,b", text/html`, []mediaRange{{"text", "html", 1000, false}}},
		{"quoted comma in an extension", `application/json;q=0.4;x="a,b", text/html`, []mediaRange{{"application", "json", 400, false}, {"text", "html", 1000, false}}},
		{"unterminated quote", `application/json;x="a, text/html`, nil},
		{"bad type", "json, */json, application/, /x, text/html", []mediaRange{{"text", "html", 1000, false}}},
		{"junk after type", "application/json junk, text/html", []mediaRange{{"text", "html", 1000, false}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := parseAccept(c.h); !slices.Equal(got, c.want) {
				t.Errorf("parseAccept(%q) = %+v, want %+v", c.h, got, c.want)
			}
		})
	}
}

// TestNegotiateOffers: the chosen offer for Accept values, on the offers of
// /events; "" means 406.
func TestNegotiateOffers(t *testing.T) {
	for _, c := range []struct{ accept, want string }{
		{"", mediaVendorJSON},
		{"*/*", mediaVendorJSON},
		{"application/*", mediaVendorJSON},
		{"application/json;profile=other", ""},
		{"application/json;profile=other, */*;q=0.1", mediaVendorJSON},
		{"application/atom+xml;type=entry", ""},
		{"application/json;q=1;charset=iso-8859-1", mediaJSON},
		{mediaVendorJSON + ";q=wat, */*", mediaVendorJSON},
		{mediaVendorJSON + ";q=0, */*", mediaJSON},
		{"application/atom+xml;q=wat", ""},
		{"application/atom+xml;q=1.0001, application/json;q=0.5", mediaJSON},
		{"application/atom+xml;q=2, application/json;q=0.5", mediaJSON},
		{"application/json;charset=utf-8;q=0, application/json", ""},
		{"application/json, application/json;charset=utf-8;q=0.2", mediaJSON},
		{"application/*;q=0.5, application/atom+xml", mediaAtom},
		{"text/html", ""},
	} {
		r, _ := http.NewRequest("GET", "/", nil)
		if c.accept != "" {
			r.Header.Set("Accept", c.accept)
		}
		got, ok := negotiate(r, offersEvents)
		if !ok {
			got = ""
		}
		if got != c.want {
			t.Errorf("Accept %q: %q, want %q", c.accept, got, c.want)
		}
	}
}

// FuzzParseAccept: any header parses without panicking into ranges with
// non-empty lower-case types and q in 0–1000, and negotiation picks one of
// the offers or none.
func FuzzParseAccept(f *testing.F) {
	for _, s := range []string{"", "*/*", "application/json;q=0.5, application/atom+xml;q=0.9",
		"application/json;q=1;charset=iso-8859-1", `a/b;x="a,\"b", c/d`, "application/json;q=wat, */*",
		"application/atom+xml;type=entry", ` ,;=";`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		for _, mr := range parseAccept(h) {
			if mr.typ == "" || mr.sub == "" || mr.q < 0 || mr.q > 1000 || (mr.typ == "*" && mr.sub != "*") {
				t.Fatalf("parseAccept(%q) gave %+v", h, mr)
			}
			for _, s := range []string{mr.typ, mr.sub} {
				for i := 0; i < len(s); i++ {
					if !isTChar(s[i]) || ('A' <= s[i] && s[i] <= 'Z') {
						t.Fatalf("parseAccept(%q) gave type %q", h, s)
					}
				}
			}
		}
		r, _ := http.NewRequest("GET", "/", nil)
		r.Header.Set("Accept", h)
		if got, ok := negotiate(r, offersEvents); ok != slices.Contains(offersEvents, got) {
			t.Fatalf("negotiate(%q) = %q, %v", h, got, ok)
		}
	})
}
