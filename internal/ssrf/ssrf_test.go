package ssrf

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	iana "code.dny.dev/ssrf"
)

// countingListener is a loopback TCP listener that counts the connections
// it accepts, so a test can show that a refusal made no connection.
type countingListener struct {
	ln       net.Listener
	accepted atomic.Int64
}

func newCountingListener(t *testing.T) *countingListener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cl := &countingListener{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			cl.accepted.Add(1)
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return cl
}

func (cl *countingListener) port() string {
	_, p, _ := net.SplitHostPort(cl.ln.Addr().String())
	return p
}

// assertAccepted checks that exactly want connections were accepted so
// far. Accepts are asynchronous, so it first makes one marker connection
// of its own and waits until that one is counted: connections are
// accepted in order, so every earlier one is counted by then.
func (cl *countingListener) assertAccepted(t *testing.T, want int64) {
	t.Helper()
	c, err := net.Dial("tcp", cl.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	deadline := time.Now().Add(5 * time.Second)
	for cl.accepted.Load() < want+1 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got := cl.accepted.Load() - 1; got != want {
		t.Fatalf("listener accepted %d connections, want %d", got, want)
	}
	cl.accepted.Add(-1)
}

// fakeResolver answers from a map (or a func for answers that change) and
// counts its lookups; it never touches the network.
type fakeResolver struct {
	mu      sync.Mutex
	answers map[string][]netip.Addr
	fn      func(host string, call int) []netip.Addr
	err     error
	calls   int
}

func (r *fakeResolver) LookupNetIP(_ context.Context, network, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	if r.err != nil {
		return nil, r.err
	}
	if r.fn != nil {
		return r.fn(host, r.calls), nil
	}
	if a, ok := r.answers[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, Server: "10.9.9.9:53", IsNotFound: true}
}

func (r *fakeResolver) lookups() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls
}

func addrs(ss ...string) []netip.Addr {
	out := make([]netip.Addr, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParseAddr(s)
	}
	return out
}

func mustGuard(t *testing.T, opts GuardOptions) *Guard {
	t.Helper()
	g, err := NewGuard(opts)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestCheckCallback(t *testing.T) {
	cl := newCountingListener(t)
	P := cl.port() // every loopback spelling points at the counting listener
	res := &fakeResolver{}
	g := mustGuard(t, GuardOptions{Resolver: res})
	client := g.HTTPClient()

	tests := []struct {
		name string
		raw  string
		want error
	}{
		// Accepted.
		{"https name", "https://example.com/cb", nil},
		{"http name with port and query", "http://hooks.example.org:8080/cb?x=1&y=2", nil},
		{"public IPv4", "https://93.184.216.34/cb", nil},
		{"public IPv4 trailing dot", "https://93.184.216.34./cb", ErrCallbackHost},
		{"port with leading zeros", "https://example.com:0443/cb", ErrCallbackHost},
		{"default https port written out", "https://example.com:443/cb", ErrCallbackHost},
		{"default http port written out", "http://example.com:80/cb", ErrCallbackHost},
		{"name with a trailing dot", "https://example.com./cb", ErrCallbackHost},
		{"IPv6 not in RFC 5952 form", "https://[2606:4700:0000::1]/cb", ErrCallbackHost},
		{"IPv6 upper case", "https://[2606:4700::ABCD]/cb", nil},
		{"IPv6 in RFC 5952 form", "https://[2606:4700::1]/cb", nil},
		{"other port", "https://example.com:8443/cb", nil},
		{"public IPv6", "https://[2606:2800:220:1:248:1893:25c8:1946]/cb", nil},
		{"NAT64 of a public IPv4", "https://[64:ff9b::5db8:d822]/cb", nil},
		{"6to4 of a public IPv4", "https://[2002:5db8:d822::1]/cb", nil},
		{"uppercase scheme and host", "HTTPS://EXAMPLE.COM/cb", nil},
		{"name ending in letters after digits", "https://1x.example.com/cb", nil},
		{"punycode under .example", "https://xn--bcher-kva.example/cb", ErrCallbackName},
		{"punycode name public", "https://xn--bcher-kva.ch/cb", nil},

		// Scheme.
		{"no scheme", "example.com/cb", ErrCallbackScheme},
		{"scheme-relative", "//example.com/cb", ErrCallbackScheme},
		{"ftp", "ftp://example.com/cb", ErrCallbackScheme},
		{"file", "file:///etc/passwd", ErrCallbackScheme},
		{"gopher", "gopher://127.0.0.1:" + P + "/_x", ErrCallbackScheme},
		{"javascript", "javascript:alert(1)", ErrCallbackScheme},
		{"ws", "ws://example.com/cb", ErrCallbackScheme},
		{"empty", "", ErrCallbackScheme},

		// Unparseable.
		{"control char", "https://example.com/\x7f", ErrCallbackInvalid},
		{"space in host", "https://exa mple.com/cb", ErrCallbackInvalid},
		{"bad escape", "https://example.com/%zz", ErrCallbackInvalid},
		{"ascii percent in host", "http://%31%32%37.0.0.1:" + P + "/", ErrCallbackInvalid},

		// Host and port.
		{"opaque", "http:example.com", ErrCallbackHost},
		{"no host", "https:///cb", ErrCallbackHost},
		{"port only", "https://:443/cb", ErrCallbackHost},
		{"port 0", "https://example.com:0/cb", ErrCallbackHost},
		{"port too big", "https://example.com:65536/cb", ErrCallbackHost},
		{"empty label", "https://a..example.com/cb", ErrCallbackHost},
		{"two trailing dots", "https://example.com../cb", ErrCallbackHost},
		{"star in host", "https://*.example.com/cb", ErrCallbackHost},
		{"underscore in host", "https://_hooks.example.com/cb", nil},
		{"non-ASCII host", "https://bücher.example/cb", ErrCallbackHost},
		{"fullwidth localhost", "https://ｌｏｃａｌｈｏｓｔ:" + P + "/cb", ErrCallbackHost},
		{"percent-encoded fullwidth l", "https://%EF%BD%8Cocalhost/cb", ErrCallbackHost},
		{"bracketed IPv4", "https://[127.0.0.1]/cb", ErrCallbackInvalid},
		{"bracketed garbage", "https://[::ffff:127.1]/cb", ErrCallbackInvalid},
		{"five numeric parts", "http://1.2.3.4.5/", ErrCallbackHost},
		{"name ending in a number", "http://foo.123/", ErrCallbackHost},
		{"octal digit 8", "http://08.0.0.1/", ErrCallbackHost},
		{"part over 255", "http://256.0.0.1/", ErrCallbackHost},
		{"last part too big", "http://1.2.3.256/", ErrCallbackHost},
		{"integer too big", "http://4294967296/", ErrCallbackHost},
		{"non-canonical public", "http://0x5db8d822/", ErrCallbackHost},
		{"non-canonical public leading zero", "http://093.184.216.034/", ErrCallbackHost},

		// Userinfo and fragment.
		{"userinfo", "https://user:hunter2@example.com/cb", ErrCallbackUserinfo},
		{"user only", "https://user@example.com/cb", ErrCallbackUserinfo},
		{"empty userinfo", "https://@example.com/cb", ErrCallbackUserinfo},
		{"userinfo hiding loopback", "http://example.com@127.0.0.1:" + P + "/", ErrCallbackUserinfo},
		{"fragment", "https://example.com/cb#frag", ErrCallbackFragment},
		{"empty fragment", "https://example.com/cb#", ErrCallbackFragment},

		// Reserved names.
		{"localhost", "http://localhost:" + P + "/", ErrCallbackName},
		{"LOCALHOST", "http://LOCALHOST:" + P + "/", ErrCallbackName},
		{"localhost trailing dot", "http://localhost.:" + P + "/", ErrCallbackName},
		{"sub.localhost", "http://api.localhost:" + P + "/", ErrCallbackName},
		{"internal", "http://metadata.google.internal/computeMetadata/v1/", ErrCallbackName},
		{"internal trailing dot", "http://db.internal./", ErrCallbackName},
		{"single label", "http://metadata/", ErrCallbackName},
		{"local mDNS", "http://printer.local/", ErrCallbackName},
		{"home.arpa", "http://router.home.arpa/", ErrCallbackName},
		{"ipv4only.arpa", "http://ipv4only.arpa/", ErrCallbackName},
		{"localdomain", "http://localhost.localdomain/", ErrCallbackName},
		{"test TLD", "http://x.test/", ErrCallbackName},
		{"invalid TLD", "http://x.invalid/", ErrCallbackName},
		{"onion", "http://abc.onion/", ErrCallbackName},

		// Odd IPv4 spellings of loopback and private addresses.
		{"127.0.0.1", "http://127.0.0.1:" + P + "/", ErrCallbackAddress},
		{"127.0.0.1 trailing dot", "http://127.0.0.1.:" + P + "/", ErrCallbackAddress},
		{"127.1", "http://127.1:" + P + "/", ErrCallbackAddress},
		{"127.0.1", "http://127.0.1:" + P + "/", ErrCallbackAddress},
		{"0x7f.1", "http://0x7f.1:" + P + "/", ErrCallbackAddress},
		{"0X7F.1", "http://0X7F.1:" + P + "/", ErrCallbackAddress},
		{"0177.0.0.1", "http://0177.0.0.1:" + P + "/", ErrCallbackAddress},
		{"0177.1", "http://0177.1:" + P + "/", ErrCallbackAddress},
		{"decimal integer", "http://2130706433:" + P + "/", ErrCallbackAddress},
		{"hex integer", "http://0x7f000001:" + P + "/", ErrCallbackAddress},
		{"octal integer", "http://017700000001:" + P + "/", ErrCallbackAddress},
		{"mixed bases", "http://0x7f.0.00.0x1:" + P + "/", ErrCallbackAddress},
		{"leading zeros", "http://127.000.000.001:" + P + "/", ErrCallbackAddress},
		{"0x alone is zero", "http://0x7f.0x.0x.1:" + P + "/", ErrCallbackAddress},
		{"0", "http://0:" + P + "/", ErrCallbackAddress},
		{"0.0.0.0", "http://0.0.0.0:" + P + "/", ErrCallbackAddress},
		{"10.1", "http://10.1/", ErrCallbackAddress},
		{"192.168 as two parts", "http://192.11010049/", ErrCallbackAddress},
		{"169.254.169.254 metadata", "http://169.254.169.254/latest/meta-data/", ErrCallbackAddress},
		{"metadata as integer", "http://2852039166/", ErrCallbackAddress},
		{"broadcast", "http://255.255.255.255/", ErrCallbackAddress},
		{"broadcast hex", "http://0xffffffff/", ErrCallbackAddress},

		// IPv6 literals.
		{"[::1]", "http://[::1]:" + P + "/", ErrCallbackAddress},
		{"[::]", "http://[::]:" + P + "/", ErrCallbackAddress},
		{"[0:0:0:0:0:0:0:1]", "http://[0:0:0:0:0:0:0:1]:" + P + "/", ErrCallbackAddress},
		{"IPv4-mapped loopback", "http://[::ffff:127.0.0.1]:" + P + "/", ErrCallbackAddress},
		{"IPv4-mapped loopback hex", "http://[::ffff:7f00:1]:" + P + "/", ErrCallbackAddress},
		{"IPv4-mapped public", "http://[::ffff:93.184.216.34]/", ErrCallbackAddress},
		{"IPv4-compatible loopback", "http://[::127.0.0.1]:" + P + "/", ErrCallbackAddress},
		{"IPv4-translated", "http://[::ffff:0:7f00:1]/", ErrCallbackAddress},
		{"NAT64 loopback", "http://[64:ff9b::127.0.0.1]/", ErrCallbackAddress},
		{"NAT64 private", "http://[64:ff9b::a00:1]/", ErrCallbackAddress},
		{"local NAT64", "http://[64:ff9b:1::5db8:d822]/", ErrCallbackAddress},
		{"6to4 loopback", "http://[2002:7f00:1::]/", ErrCallbackAddress},
		{"6to4 metadata", "http://[2002:a9fe:a9fe::1]/", ErrCallbackAddress},
		{"Teredo client loopback", "http://[2001:0:5db8:d822:0:0:80ff:fffe]/", ErrCallbackAddress},
		{"Teredo server private", "http://[2001:0:a00:1::1]/", ErrCallbackAddress},
		{"link-local zone", "http://[fe80::1%25lo]:" + P + "/", ErrCallbackAddress},
		{"link-local", "http://[fe80::1]/", ErrCallbackAddress},
		{"ULA", "http://[fd00::1]/", ErrCallbackAddress},
		{"multicast", "http://[ff02::1]/", ErrCallbackAddress},
		{"documentation", "http://[2001:db8::1]/", ErrCallbackAddress},
		{"site-local", "http://[fec0::1]/", ErrCallbackAddress},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u, err := g.CheckCallback(tc.raw)
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("CheckCallback(%q) = %v, want %v", tc.raw, err, tc.want)
			}
			if err == nil {
				if u == nil || (u.Scheme != "http" && u.Scheme != "https") {
					t.Fatalf("CheckCallback(%q) returned %v", tc.raw, u)
				}
				return
			}
			if u != nil {
				t.Fatalf("refused callback returned a URL")
			}
			// The resolving check refuses it identically, and so does the
			// client: the dial-time check refuses before connecting.
			if _, err2 := g.CheckCallbackResolved(context.Background(), tc.raw); !errors.Is(err2, tc.want) {
				t.Fatalf("CheckCallbackResolved(%q) = %v, want %v", tc.raw, err2, tc.want)
			}
			// Only loopback targets (the counting listener) are ever dialled.
			if strings.Contains(tc.raw, ":"+P+"/") && tc.want != ErrCallbackInvalid {
				resp, err := client.Get(tc.raw)
				if err == nil {
					resp.Body.Close()
					t.Fatalf("GET %q succeeded", tc.raw)
				}
				if !isRefusal(err) {
					t.Fatalf("GET %q = %v, not a guard refusal", tc.raw, err)
				}
			}
		})
	}
	if n := res.lookups(); n != 0 {
		t.Errorf("refused callbacks caused %d DNS lookups, want 0", n)
	}
	cl.assertAccepted(t, 0)
}

// isRefusal reports whether err wraps one of the guard's sentinels.
func isRefusal(err error) bool {
	for _, s := range []error{ErrCallbackInvalid, ErrCallbackScheme, ErrCallbackUserinfo, ErrCallbackFragment,
		ErrCallbackHost, ErrCallbackName, ErrCallbackAddress, ErrCallbackSelf, ErrCallbackResolve} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

func TestCheckCallbackPackageDefault(t *testing.T) {
	if _, err := CheckCallback("https://example.com/cb"); err != nil {
		t.Fatal(err)
	}
	if _, err := CheckCallback("http://127.1/"); !errors.Is(err, ErrCallbackAddress) {
		t.Fatalf("got %v, want ErrCallbackAddress", err)
	}
}

// TestCheckCallbackSpellings generates many inet_aton/WHATWG spellings of
// blocked addresses (one to four parts, each in a random base) and checks
// that every one is refused as ErrCallbackAddress.
func TestCheckCallbackSpellings(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	samples := []string{"127.0.0.1", "127.255.255.254", "10.0.0.1", "172.16.5.4", "192.168.1.1",
		"169.254.169.254", "100.64.0.1", "0.0.0.0", "224.0.0.1", "255.255.255.255", "198.18.0.1", "192.0.0.170"}
	spell := func(n uint64) string {
		switch rng.IntN(3) {
		case 0:
			return strconv.FormatUint(n, 10)
		case 1:
			return "0" + strconv.FormatUint(n, 8)
		default:
			x := strconv.FormatUint(n, 16)
			if rng.IntN(2) == 0 {
				x = strings.ToUpper(x)
			}
			return "0x" + strings.Repeat("0", rng.IntN(3)) + x
		}
	}
	for _, s := range samples {
		b := netip.MustParseAddr(s).As4()
		v := uint64(b[0])<<24 | uint64(b[1])<<16 | uint64(b[2])<<8 | uint64(b[3])
		for range 50 {
			parts := 1 + rng.IntN(4)
			var p []string
			for i := 0; i < parts-1; i++ {
				p = append(p, spell(uint64(b[i])))
			}
			rest := 4 - (parts - 1)
			p = append(p, spell(v&(1<<(8*rest)-1)))
			host := strings.Join(p, ".")
			if rng.IntN(4) == 0 {
				host += "."
			}
			raw := "http://" + host + "/cb"
			if host == s {
				continue // the canonical spelling is covered elsewhere
			}
			if _, err := CheckCallback(raw); !errors.Is(err, ErrCallbackAddress) {
				t.Errorf("CheckCallback(%q) = %v, want ErrCallbackAddress", raw, err)
			}
		}
	}
}

// TestErrorsDoNotEcho: no refusal message quotes the callback's userinfo
// or query, even when url.Parse fails on it.
func TestErrorsDoNotEcho(t *testing.T) {
	for _, raw := range []string{
		"https://user:hunter2@example.com/cb?token=hunter2",
		"https://us er:hunter2@exa mple.com/?q=hunter2",
		"ftp://hunter2@example.com/?hunter2",
		"https://example.com/cb?token=hunter2#hunter2",
		"http://127.0.0.1/?token=hunter2",
		"http://hunter2.localhost/?token=hunter2",
		"http://[::1%25hunter2]/?token=hunter2",
		"https://example.com:hunter2/",
	} {
		_, err := CheckCallback(raw)
		if err == nil {
			t.Fatalf("CheckCallback(%q) accepted", raw)
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("CheckCallback(%q) error %q echoes the callback", raw, err)
		}
	}
}

func TestBlockedAddr(t *testing.T) {
	blocked := []string{
		"0.0.0.0", "0.1.2.3", "0.255.255.255",
		"10.0.0.0", "10.255.255.255",
		"100.64.0.0", "100.127.255.255",
		"127.0.0.1", "127.255.255.255",
		"169.254.0.0", "169.254.169.254", "169.254.255.255",
		"172.16.0.0", "172.31.255.255",
		"192.0.0.0", "192.0.0.170", "192.0.0.255",
		"192.0.2.0", "192.0.2.255",
		"192.88.99.1",
		"192.168.0.0", "192.168.255.255",
		"198.18.0.0", "198.19.255.255",
		"198.51.100.0", "198.51.100.255",
		"203.0.113.0", "203.0.113.255",
		"224.0.0.0", "239.255.255.255",
		"240.0.0.0", "255.255.255.254", "255.255.255.255",
		"::", "::1", "::ffff:127.0.0.1", "::ffff:93.184.216.34", "::ffff:0:7f00:1", "::7f00:1", "::2",
		"64:ff9b::7f00:1", "64:ff9b::a9fe:a9fe", "64:ff9b::c0a8:101", "64:ff9b:1::1",
		"100::1", "2001:2::1", "2001:10::1", "2001:db8::", "2001:db8:ffff:ffff::1", "3fff::1", "5f00::1",
		"2002:7f00:1::", "2002:a00:1::1", "2002:c0a8:101::1", "2002::1",
		"2001:0:7f00:1::1", "2001:0:5db8:d822::80ff:fffe", "2001:0:5db8:d822::f5ff:fffe",
		"fc00::1", "fdff:ffff::1", "fe80::1", "febf::1", "fec0::1", "ff02::1", "ff0e::1",
		"4000::1", "e000::1", "1::1",
	}
	allowed := []string{
		"1.1.1.1", "8.8.8.8", "93.184.216.34", "9.255.255.255", "11.0.0.0",
		"100.63.255.255", "100.128.0.0", "126.255.255.255", "128.0.0.0",
		"169.253.255.255", "169.255.0.0", "172.15.255.255", "172.32.0.0",
		"192.0.1.255", "192.0.3.0", "192.167.255.255", "192.169.0.0",
		"198.17.255.255", "198.20.0.0", "198.51.99.255", "198.51.101.0",
		"203.0.112.255", "203.0.114.0", "223.255.255.255",
		"2606:2800:220:1:248:1893:25c8:1946", "2a00:1450:4001::1", "2001:4860:4860::8888",
		"64:ff9b::5db8:d822", "2002:5db8:d822::1", "2001:0:5db8:d822::a247:27dd",
		"2001:db7:ffff:ffff::1", "2001:db9::1", "2001:4860:4860::8844",
	}
	g := mustGuard(t, GuardOptions{})
	for _, s := range blocked {
		t.Run("blocked "+s, func(t *testing.T) {
			a := netip.MustParseAddr(s)
			r, bad := BlockedAddr(a)
			if !bad || r == "" {
				t.Fatalf("BlockedAddr(%s) = %q, %v; want blocked", s, r, bad)
			}
			// Control, as net.Dialer calls it, refuses the same address —
			// an IPv4-mapped one checked as the IPv4 address it reaches.
			want := a
			if a.Is4In6() {
				want = a.Unmap()
			}
			err := g.Control("tcp", netip.AddrPortFrom(a, 443).String(), nil)
			if _, stillBad := BlockedAddr(want); stillBad && !errors.Is(err, ErrCallbackAddress) {
				t.Fatalf("Control(%s) = %v, want ErrCallbackAddress", s, err)
			}
		})
	}
	for _, s := range allowed {
		t.Run("allowed "+s, func(t *testing.T) {
			a := netip.MustParseAddr(s)
			if r, bad := BlockedAddr(a); bad {
				t.Fatalf("BlockedAddr(%s) = %q, want allowed", s, r)
			}
			if err := g.Control("tcp", netip.AddrPortFrom(a, 443).String(), nil); err != nil {
				t.Fatalf("Control(%s) = %v, want nil", s, err)
			}
		})
	}
	if _, bad := BlockedAddr(netip.MustParseAddr("fe80::1%eth0")); !bad {
		t.Error("zoned address allowed")
	}
	if err := g.Control("tcp", "not-an-address", nil); !errors.Is(err, ErrCallbackAddress) {
		t.Errorf("Control(garbage) = %v, want ErrCallbackAddress", err)
	}
}

// TestControlRefusesBeforeConnect: a plain net.Dialer using Guard.Control
// (with Go's own resolution) never connects to a blocked address.
func TestControlRefusesBeforeConnect(t *testing.T) {
	cl := newCountingListener(t)
	g := mustGuard(t, GuardOptions{})
	d := net.Dialer{Control: g.Control, Timeout: time.Second}
	for _, addr := range []string{"127.0.0.1:" + cl.port(), "[::ffff:127.0.0.1]:" + cl.port()} {
		c, err := d.Dial("tcp", addr)
		if err == nil {
			c.Close()
			t.Fatalf("dial %s succeeded", addr)
		}
		if !errors.Is(err, ErrCallbackAddress) {
			t.Fatalf("dial %s = %v, want ErrCallbackAddress", addr, err)
		}
	}
	cl.assertAccepted(t, 0)
}

// TestResolvedPrivate: names whose DNS answer holds a blocked address are
// refused by CheckCallbackResolved and at dial time, with no connection.
func TestResolvedPrivate(t *testing.T) {
	cl := newCountingListener(t)
	P := cl.port()
	res := &fakeResolver{answers: map[string][]netip.Addr{
		"evil.example.com":   addrs("127.0.0.1"),
		"mapped.example.com": addrs("::ffff:127.0.0.1"),
		"mixed.example.com":  addrs("93.184.216.34", "10.0.0.1"),
		"meta.example.com":   addrs("169.254.169.254"),
		"v6.example.com":     addrs("::1"),
		"nat64.example.com":  addrs("64:ff9b::7f00:1"),
		"empty.example.com":  {},
		"good.example.com":   addrs("93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946"),
	}}
	g := mustGuard(t, GuardOptions{Resolver: res})
	client := g.HTTPClient()
	tests := []struct {
		name string
		host string
		want error
	}{
		{"loopback", "evil.example.com", ErrCallbackAddress},
		{"mapped loopback", "mapped.example.com", ErrCallbackAddress},
		{"one of two private", "mixed.example.com", ErrCallbackAddress},
		{"metadata", "meta.example.com", ErrCallbackAddress},
		{"IPv6 loopback", "v6.example.com", ErrCallbackAddress},
		{"NAT64 loopback", "nat64.example.com", ErrCallbackAddress},
		{"no addresses", "empty.example.com", ErrCallbackResolve},
		{"NXDOMAIN", "nx.example.com", ErrCallbackResolve},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			raw := "http://" + tc.host + ":" + P + "/cb?hub=1"
			if _, err := g.CheckCallback(raw); err != nil {
				t.Fatalf("CheckCallback = %v, want nil (no DNS at that stage)", err)
			}
			_, err := g.CheckCallbackResolved(context.Background(), raw)
			if !errors.Is(err, tc.want) {
				t.Fatalf("CheckCallbackResolved = %v, want %v", err, tc.want)
			}
			if strings.Contains(err.Error(), "10.9.9.9") {
				t.Fatalf("error %q names the resolver", err)
			}
			resp, err := client.Get(raw)
			if err == nil {
				resp.Body.Close()
				t.Fatal("GET succeeded")
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("GET = %v, want %v", err, tc.want)
			}
		})
	}
	if _, err := g.CheckCallbackResolved(context.Background(), "https://good.example.com/cb"); err != nil {
		t.Fatalf("good name refused: %v", err)
	}
	res.err = errors.New("lookup failed via 10.9.9.9:53")
	_, err := g.CheckCallbackResolved(context.Background(), "https://good.example.com/cb")
	if !errors.Is(err, ErrCallbackResolve) || strings.Contains(err.Error(), "10.9.9.9") {
		t.Fatalf("lookup error = %v, want ErrCallbackResolve without the resolver's text", err)
	}
	if !errors.Is(err, res.err) {
		t.Fatalf("lookup error %v does not keep its cause", err)
	}
	cl.assertAccepted(t, 0)
}

// TestDNSRebinding: the name resolves to a public address when the hub
// checks it at subscribe time and to loopback when it dials; the dial-time
// check refuses, and nothing is connected.
func TestDNSRebinding(t *testing.T) {
	cl := newCountingListener(t)
	res := &fakeResolver{fn: func(_ string, call int) []netip.Addr {
		if call == 1 {
			return addrs("93.184.216.34")
		}
		return addrs("127.0.0.1")
	}}
	g := mustGuard(t, GuardOptions{Resolver: res})
	raw := "http://rebind.example.com:" + cl.port() + "/cb"
	if _, err := g.CheckCallbackResolved(context.Background(), raw); err != nil {
		t.Fatalf("subscribe-time check = %v, want nil", err)
	}
	resp, err := g.HTTPClient().Get(raw)
	if err == nil {
		resp.Body.Close()
		t.Fatal("GET succeeded")
	}
	if !errors.Is(err, ErrCallbackAddress) {
		t.Fatalf("GET = %v, want ErrCallbackAddress", err)
	}
	cl.assertAccepted(t, 0)
}

// countingServer is an httptest.Server on 127.0.0.1 that counts requests.
func countingServer(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		h(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func hostPort(t *testing.T, srv *httptest.Server) string {
	t.Helper()
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

func TestRedirectNotFollowed(t *testing.T) {
	target, targetHits := countingServer(t, func(w http.ResponseWriter, r *http.Request) {})
	redirector, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+"/internal", http.StatusFound)
	})
	for _, allow := range [][]string{
		{hostPort(t, redirector)}, // the target is not allowlisted
		{"127.0.0.1"},             // even an allowlisted target is never followed
	} {
		t.Run(strings.Join(allow, ","), func(t *testing.T) {
			client := NewHTTPClient(GuardOptions{AllowHosts: allow})
			resp, err := client.Get(redirector.URL + "/cb")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusFound {
				t.Fatalf("status %d, want 302", resp.StatusCode)
			}
			if n := targetHits.Load(); n != 0 {
				t.Fatalf("redirect target got %d requests, want 0", n)
			}
		})
	}
}

func TestAllowHosts(t *testing.T) {
	srv, hits := countingServer(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	hp := hostPort(t, srv)
	_, port, _ := net.SplitHostPort(hp)
	otherPort := strconv.Itoa((mustAtoi(t, port) % 60000) + 1)
	res := &fakeResolver{answers: map[string][]netip.Addr{"localhost": addrs("127.0.0.1")}}
	tests := []struct {
		name  string
		allow []string
		url   string
		want  error
	}{
		{"default refuses loopback", nil, srv.URL + "/cb", ErrCallbackAddress},
		{"host entry", []string{"127.0.0.1"}, srv.URL + "/cb", nil},
		{"host:port entry", []string{hp}, srv.URL + "/cb", nil},
		{"other port entry", []string{"127.0.0.1:" + otherPort}, srv.URL + "/cb", ErrCallbackAddress},
		{"IPv6 entry does not admit IPv4", []string{"[::1]"}, srv.URL + "/cb", ErrCallbackAddress},
		{"name entry", []string{"localhost:" + port}, "http://localhost:" + port + "/cb", nil},
		{"name not allowlisted", []string{"127.0.0.1:" + otherPort}, "http://localhost:" + port + "/cb", ErrCallbackName},
		{"odd spelling never allowlisted", []string{"127.0.0.1"}, "http://127.1:" + port + "/cb", ErrCallbackAddress},
		{"userinfo never allowlisted", []string{"127.0.0.1"}, "http://u@127.0.0.1:" + port + "/cb", ErrCallbackUserinfo},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := hits.Load()
			opts := GuardOptions{AllowHosts: tc.allow, Resolver: res}
			g := mustGuard(t, opts)
			_, err := g.CheckCallback(tc.url)
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("CheckCallback = %v, want %v", err, tc.want)
			}
			resp, err := NewHTTPClient(opts).Get(tc.url)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("GET = %v", err)
				}
				b, err := ReadLimited(resp, 10)
				if err != nil || string(b) != "ok" {
					t.Fatalf("body %q, %v", b, err)
				}
				if hits.Load() != before+1 {
					t.Fatal("request did not reach the server")
				}
				return
			}
			if err == nil {
				resp.Body.Close()
				t.Fatal("GET succeeded")
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("GET = %v, want %v", err, tc.want)
			}
			if hits.Load() != before {
				t.Fatal("refused request reached the server")
			}
		})
	}
	if _, err := NewGuard(GuardOptions{AllowHosts: []string{"127.0.0.1:99999"}}); err == nil {
		t.Error("bad port accepted")
	}
	if _, err := NewGuard(GuardOptions{AllowHosts: []string{"exa mple"}}); err == nil {
		t.Error("bad name accepted")
	}
	// An invalid option fails every request closed.
	if resp, err := NewHTTPClient(GuardOptions{AllowHosts: []string{"::bad::"}}).Get(srv.URL); err == nil {
		resp.Body.Close()
		t.Error("client with invalid options made a request")
	}
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestOwnAddrs(t *testing.T) {
	srv, hits := countingServer(t, func(w http.ResponseWriter, r *http.Request) {})
	hp := hostPort(t, srv)
	_, port, _ := net.SplitHostPort(hp)
	res := &fakeResolver{answers: map[string][]netip.Addr{
		"alias.example.com": addrs("127.0.0.1"),
		"relay.example.org": addrs("93.184.216.34"),
	}}
	tests := []struct {
		name string
		own  []string
		url  string
		want error
	}{
		{"listen address", []string{hp}, srv.URL + "/cb", ErrCallbackSelf},
		{"unspecified listen host", []string{":" + port}, srv.URL + "/cb", ErrCallbackSelf},
		{"0.0.0.0 listen host", []string{"0.0.0.0:" + port}, srv.URL + "/cb", ErrCallbackSelf},
		{"other port is not self", []string{"127.0.0.1:1"}, srv.URL + "/cb", nil},
		{"public URL", []string{"https://relay.example.org"}, "https://relay.example.org/websub/hub", ErrCallbackSelf},
		{"public URL other port", []string{"https://relay.example.org"}, "http://relay.example.org:8080/cb", nil},
		{"public name any port", []string{"Relay.Example.org."}, "http://relay.example.org:8080/cb", ErrCallbackSelf},
		{"alias resolving to self", []string{hp}, "http://alias.example.com:" + port + "/cb", ErrCallbackSelf},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Allowlisting 127.0.0.1 admits loopback, never the relay itself.
			opts := GuardOptions{OwnAddrs: tc.own, AllowHosts: []string{"127.0.0.1"}, Resolver: res}
			g := mustGuard(t, opts)
			_, err := g.CheckCallbackResolved(context.Background(), tc.url)
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("CheckCallbackResolved = %v, want %v", err, tc.want)
			}
			if tc.want == nil || !strings.Contains(tc.url, port) {
				return
			}
			before := hits.Load()
			resp, err := NewHTTPClient(opts).Get(tc.url)
			if err == nil {
				resp.Body.Close()
			}
			if !errors.Is(err, ErrCallbackSelf) {
				t.Fatalf("GET = %v, want ErrCallbackSelf", err)
			}
			if hits.Load() != before {
				t.Fatal("request to self reached the server")
			}
		})
	}
}

func TestHTTPClientSettings(t *testing.T) {
	t.Setenv("HTTP_PROXY", "http://10.0.0.1:3128")
	t.Setenv("HTTPS_PROXY", "http://10.0.0.1:3128")
	c := NewHTTPClient(GuardOptions{})
	tr := c.Transport.(*guardTransport).base
	if tr.Proxy != nil {
		t.Error("transport uses a proxy")
	}
	if c.Timeout != DefaultTimeout || tr.TLSHandshakeTimeout != DefaultConnectTimeout {
		t.Errorf("timeouts %v, %v", c.Timeout, tr.TLSHandshakeTimeout)
	}
	if c.CheckRedirect == nil || c.CheckRedirect(nil, nil) != http.ErrUseLastResponse {
		t.Error("redirects would be followed")
	}
	g := mustGuard(t, GuardOptions{ConnectTimeout: time.Second, Timeout: 2 * time.Second})
	if g.connectTimeout != time.Second || g.timeout != 2*time.Second || g.HTTPClient().Timeout != 2*time.Second {
		t.Error("timeouts not applied")
	}

	// The total timeout bounds a server that never answers.
	release := make(chan struct{})
	srv, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	defer close(release)
	slow := NewHTTPClient(GuardOptions{AllowHosts: []string{"127.0.0.1"}, Timeout: 200 * time.Millisecond})
	start := time.Now()
	resp, err := slow.Get(srv.URL)
	if err == nil {
		resp.Body.Close()
		t.Fatal("slow server answered")
	}
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("error %v is not a timeout", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("timeout took %v", d)
	}
}

func TestReadLimited(t *testing.T) {
	const secret = "BODY-SECRET-0123456789"
	srv, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/long":
			io.WriteString(w, strings.Repeat("x", 1<<20))
		case "/short":
			io.WriteString(w, "abc")
		case "/broken":
			// Promise more than is sent, then drop the connection.
			w.Header().Set("Content-Length", "1000")
			io.WriteString(w, secret)
			w.(http.Flusher).Flush()
			conn, _, err := w.(http.Hijacker).Hijack()
			if err != nil {
				panic(err)
			}
			conn.Close()
		}
	})
	client := NewHTTPClient(GuardOptions{AllowHosts: []string{"127.0.0.1"}})
	tests := []struct {
		path    string
		n       int64
		want    string
		wantErr bool
	}{
		{"/long", 10, "xxxxxxxxxx", false},
		{"/short", 10, "abc", false},
		{"/short", 3, "abc", false},
		{"/short", 2, "ab", false},
		{"/short", 0, "", false},
		{"/short", -1, "", false},
		{"/broken", 4096, secret, true},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s/%d", tc.path, tc.n), func(t *testing.T) {
			resp, err := client.Get(srv.URL + tc.path)
			if err != nil {
				t.Fatal(err)
			}
			b, err := ReadLimited(resp, tc.n)
			if (err != nil) != tc.wantErr || string(b) != tc.want {
				t.Fatalf("ReadLimited = %q, %v; want %q, error %v", b, err, tc.want, tc.wantErr)
			}
			if err != nil && strings.Contains(err.Error(), "SECRET") {
				t.Fatalf("error %q echoes the body", err)
			}
		})
	}
}

func FuzzCheckCallback(f *testing.F) {
	for _, s := range []string{
		"https://example.com/cb", "http://127.1/", "http://0x7f.1/", "http://2130706433/",
		"http://[::ffff:127.0.0.1]/", "http://[::1]/", "http://0.0.0.0/", "http://[::]/",
		"http://localhost/", "https://u:p@example.com/", "https://example.com/#f",
		"http://[64:ff9b::7f00:1]/", "http://[2002:7f00:1::]/", "http://0177.0.0.1./",
		"https://93.184.216.34/cb", "http://[fe80::1%25lo]/", "http://a.internal/",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := CheckCallback(raw)
		if err != nil {
			if !isRefusal(err) {
				t.Fatalf("CheckCallback(%q) = %v, not a sentinel", raw, err)
			}
			return
		}
		if u.Scheme != "http" && u.Scheme != "https" {
			t.Fatalf("accepted scheme %q", u.Scheme)
		}
		if u.User != nil || u.Host == "" || u.Fragment != "" || strings.Contains(raw, "#") {
			t.Fatalf("accepted %q", raw)
		}
		h := u.Hostname()
		if a, err := netip.ParseAddr(h); err == nil {
			if r, bad := BlockedAddr(a); bad {
				t.Fatalf("accepted %q in %s", raw, r)
			}
		}
		if a, ok := parseIPv4(strings.TrimSuffix(strings.ToLower(h), ".")); ok {
			if r, bad := BlockedAddr(a); bad {
				t.Fatalf("accepted %q, an IPv4 spelling in %s", raw, r)
			}
		}
		if name := strings.TrimSuffix(strings.ToLower(h), "."); !strings.Contains(name, ":") && !endsInNumber(name) {
			if _, bad := reservedName(name); bad {
				t.Fatalf("accepted reserved name %q", h)
			}
		}
	})
}

// TestBlockedAddrCoversIANALists: every prefix of code.dny.dev/ssrf's
// IANA-generated deny lists is refused (its first and last address),
// except the 6to4 and Teredo addresses of a public IPv4 host, which the
// embedding rule decides; ranges the named rows lack are refused under
// the IANA name, and the named rows keep their names.
func TestBlockedAddrCoversIANALists(t *testing.T) {
	last := func(p netip.Prefix) netip.Addr {
		b := p.Masked().Addr().AsSlice()
		for i := p.Bits(); i < len(b)*8; i++ {
			b[i/8] |= 0x80 >> (i % 8)
		}
		a, _ := netip.AddrFromSlice(b)
		return a
	}
	for _, p := range append(slices.Clone(iana.IPv4DeniedPrefixes), iana.IPv6DeniedPrefixes...) {
		for _, a := range []netip.Addr{p.Masked().Addr(), last(p)} {
			if r, bad := BlockedAddr(a); !bad {
				if sixToFour.Contains(a) || teredo.Contains(a) {
					continue // the embedded IPv4 address decides (TestBlockedAddr)
				}
				t.Errorf("BlockedAddr(%s) allowed, in the IANA deny prefix %s", a, p)
			} else if r == "" {
				t.Errorf("BlockedAddr(%s) refused without naming a range", a)
			}
		}
	}
	for addr, want := range map[string]string{
		"192.31.196.1":     "IANA special-purpose 192.31.196.0/24",
		"192.52.193.9":     "IANA special-purpose 192.52.193.0/24",
		"192.175.48.6":     "IANA special-purpose 192.175.48.0/24",
		"2001:3::1":        "IANA special-purpose 2001::/23",
		"2001:4:112::1":    "IANA special-purpose 2001::/23",
		"2620:4f:8000::1":  "IANA special-purpose 2620:4f:8000::/48",
		"2002:c0a8:101::1": "6to4 2002::/16 embedding of private 192.168.0.0/16 (RFC 1918)",
		"127.0.0.1":        "loopback 127.0.0.0/8 (RFC 1122)",
		"2001:db8::1":      "documentation 2001:db8::/32 (RFC 3849)",
	} {
		if r, bad := BlockedAddr(netip.MustParseAddr(addr)); !bad || r != want {
			t.Errorf("BlockedAddr(%s) = %q, %v; want %q", addr, r, bad, want)
		}
	}
	if r, bad := BlockedAddr(netip.MustParseAddr("2002:5db8:d822::1")); bad {
		t.Errorf("6to4 of a public IPv4 address refused: %s", r)
	}
}
