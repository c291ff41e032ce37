package relay

import (
	"net/http"
	"testing"
)

func TestAcceptsGzip(t *testing.T) {
	for _, tc := range []struct {
		name   string
		fields []string
		want   bool
	}{
		{"none", nil, false},
		{"go transport", []string{"gzip"}, true},
		{"list", []string{"br, gzip, deflate"}, true},
		{"weighted", []string{"gzip;q=0.5"}, true},
		{"refused", []string{"gzip;q=0"}, false},
		{"refused spelled long", []string{"gzip; q=0.000"}, false},
		{"star", []string{"*"}, true},
		{"star refused", []string{"*;q=0"}, false},
		{"gzip refused beside star", []string{"gzip;q=0, *"}, false},
		{"identity", []string{"identity"}, false},
		{"x-gzip, two fields", []string{"br", "X-GZIP"}, true},
		{"unparsed weight", []string{"gzip;q=x"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &http.Request{Header: http.Header{"Accept-Encoding": tc.fields}}
			if got := acceptsGzip(r); got != tc.want {
				t.Errorf("Accept-Encoding %q: %v, want %v", tc.fields, got, tc.want)
			}
		})
	}
}

func FuzzAcceptsGzip(f *testing.F) {
	for _, s := range []string{"gzip", "gzip;q=0, *", "br;q=1, gzip;q=0.5", "*;q=0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, field string) {
		r := &http.Request{Header: http.Header{"Accept-Encoding": {field}}}
		got := acceptsGzip(r)
		// Appending an explicit refusal always refuses.
		r2 := &http.Request{Header: http.Header{"Accept-Encoding": {field, "gzip;q=0"}}}
		if acceptsGzip(r2) {
			t.Fatalf("%q then gzip;q=0 accepted (alone: %v)", field, got)
		}
	})
}
