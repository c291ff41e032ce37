package relay

import (
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
)

func TestClientKey(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	for _, tc := range []struct {
		name, remote string
		xff          []string
		trusted      []netip.Prefix
		want         string
	}{
		{"no proxy", "198.51.100.7:5000", nil, nil, "198.51.100.7"},
		{"header ignored without trusted proxies", "198.51.100.7:5000", []string{"203.0.113.9"}, nil, "198.51.100.7"},
		{"header ignored from an untrusted peer", "198.51.100.7:5000", []string{"203.0.113.9"}, trusted, "198.51.100.7"},
		{"trusted proxy", "10.1.1.1:5000", []string{"203.0.113.9"}, trusted, "203.0.113.9"},
		{"right-most untrusted", "10.1.1.1:5000", []string{"192.0.2.66, 203.0.113.9, 10.2.2.2"}, trusted, "203.0.113.9"},
		{"repeated headers in order", "10.1.1.1:5000", []string{"192.0.2.66", "203.0.113.9"}, trusted, "203.0.113.9"},
		{"all trusted: left-most", "10.1.1.1:5000", []string{"10.3.3.3, 10.2.2.2"}, trusted, "10.3.3.3"},
		{"garbage ends the walk", "10.1.1.1:5000", []string{"203.0.113.9, not-an-ip"}, trusted, "10.1.1.1"},
		{"IPv6 by /64", "[2001:db8:1:2::5]:443", nil, nil, "2001:db8:1:2::/64"},
		{"IPv4-mapped peer", "[::ffff:198.51.100.7]:80", nil, nil, "198.51.100.7"},
		{"IPv6 loopback proxy", "[::1]:80", []string{"2001:db8::1"}, trusted, "2001:db8::/64"},
		{"not a TCP peer", "pipe", nil, nil, "peer:pipe"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = tc.remote
			for _, v := range tc.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			if got := clientKey(r, tc.trusted); got != tc.want {
				t.Fatalf("clientKey = %q, want %q", got, tc.want)
			}
		})
	}
}

// FuzzClientKey: whatever X-Forwarded-For says, the key is an address,
// an IPv6 /64 or the peer's spelling, and without trusted proxies it is
// the peer's.
func FuzzClientKey(f *testing.F) {
	f.Add("10.1.1.1:5000", "203.0.113.9, 10.2.2.2")
	f.Add("[2001:db8::1]:1", "::1,,  , 1.2.3.4")
	f.Add("1.2.3.4:5", "\x00")
	trusted := []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")}
	f.Fuzz(func(t *testing.T, remote, xff string) {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = remote
		r.Header.Set("X-Forwarded-For", xff)
		for _, tr := range [][]netip.Prefix{nil, trusted} {
			k := clientKey(r, tr)
			if strings.HasPrefix(k, "peer:") {
				continue
			}
			if _, err := netip.ParseAddr(k); err != nil {
				if p, err := netip.ParsePrefix(k); err != nil || p.Bits() != 64 {
					t.Fatalf("key %q is neither an address nor a /64", k)
				}
			}
		}
		if ap, err := netip.ParseAddrPort(remote); err == nil && ap.Addr().Unmap().Is4() {
			if k := clientKey(r, nil); k != ap.Addr().Unmap().String() {
				t.Fatalf("without trusted proxies the key is %q, not the peer %s", k, ap.Addr())
			}
		}
	})
}
