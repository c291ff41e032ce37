package ssrf

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	iana "code.dny.dev/ssrf"
)

// Errors of the callback guard (spec/websub.md "SSRF defence"). Each
// refusal wraps exactly one of them; the hub answers 400 for all. Their
// messages, and any detail added after ": ", name a rule or a range —
// never the callback's userinfo, query, resolved addresses or anything a
// callback answered.
var (
	// ErrCallbackInvalid: the callback does not parse as a URL.
	ErrCallbackInvalid = errors.New("callback is not a valid URL")
	// ErrCallbackScheme: the scheme is neither http nor https.
	ErrCallbackScheme = errors.New("callback scheme must be http or https")
	// ErrCallbackUserinfo: the URL carries userinfo (user[:password]@).
	ErrCallbackUserinfo = errors.New("callback must not carry userinfo")
	// ErrCallbackFragment: the URL carries a fragment, even an empty one.
	ErrCallbackFragment = errors.New("callback must not carry a fragment")
	// ErrCallbackHost: the host is missing or malformed, the port is not
	// 1–65535, or the host is a numeric spelling of an IPv4 address other
	// than the canonical dotted quad (resolvers disagree on those).
	ErrCallbackHost = errors.New("callback host is missing or malformed")
	// ErrCallbackName: the host is a name reserved for local use
	// (localhost, *.localhost, *.internal, …; see reservedName).
	ErrCallbackName = errors.New("callback host name is reserved for local use")
	// ErrCallbackAddress: an address of the callback — literal, resolved
	// or dialled — is in a blocked range (see BlockedAddr).
	ErrCallbackAddress = errors.New("callback address is in a blocked range")
	// ErrCallbackSelf: the callback is one of the relay's own addresses
	// (GuardOptions.OwnAddrs).
	ErrCallbackSelf = errors.New("callback is the relay's own address")
	// ErrCallbackResolve: the callback's name did not resolve to any
	// address. The resolver's own error is kept in the chain for logs but
	// not in the message (it names the resolver).
	ErrCallbackResolve = errors.New("callback host does not resolve")
)

// Resolver resolves host names to addresses; *net.Resolver implements it.
// network is "ip", "ip4" or "ip6".
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

var _ Resolver = (*net.Resolver)(nil)

// Default timeouts of outbound hub requests.
const (
	DefaultConnectTimeout = 5 * time.Second
	DefaultTimeout        = 10 * time.Second
)

// GuardOptions configure a Guard and its HTTP client. The zero value is the
// strict default: no allowlist, no own addresses, the system resolver,
// DefaultConnectTimeout and DefaultTimeout.
type GuardOptions struct {
	// AllowHosts (--websub-allow-hosts) lets callbacks through that the
	// guard would refuse as a blocked address or reserved name: entries
	// are "host" (any port) or "host:port", host being a DNS name or an IP
	// address ("127.0.0.1", "[::1]:8080", "localhost"). An IP entry matches
	// the address dialled; a name entry matches the callback's host name
	// and then permits whatever it resolves to. Meant for tests against
	// loopback servers; empty by default. It never admits the relay's own
	// addresses, non-http schemes, userinfo, fragments or odd IPv4
	// spellings.
	AllowHosts []string
	// OwnAddrs are the relay's own listen and public addresses, refused as
	// callbacks (ErrCallbackSelf) even when allowlisted: "host", "host:port"
	// or a URL such as the --public-url ("https://relay.example.org" means
	// relay.example.org:443). A listen address with no or an unspecified
	// host (":8080", "0.0.0.0:8080", "[::]:8080") stands for that port on
	// the loopback addresses and on every interface address NewGuard finds.
	OwnAddrs []string
	// Resolver resolves callback names; nil means net.DefaultResolver.
	Resolver Resolver
	// ConnectTimeout bounds resolving and connecting (all addresses
	// together); 0 means DefaultConnectTimeout.
	ConnectTimeout time.Duration
	// Timeout bounds a whole request, from dial to the last byte of the
	// body read; 0 means DefaultTimeout.
	Timeout time.Duration
}

// Guard holds the SSRF policy of outbound hub requests. Build it once with
// NewGuard and share it; it is safe for concurrent use.
type Guard struct {
	allow          []hostEntry
	own            []hostEntry
	resolver       Resolver
	connectTimeout time.Duration
	timeout        time.Duration
	err            error // set only by NewHTTPClient's fail-closed path
}

// hostEntry is one parsed AllowHosts or OwnAddrs entry: exactly one of
// name and addr is set; port 0 matches any port.
type hostEntry struct {
	name string
	addr netip.Addr
	port uint16
}

func (e hostEntry) matchName(name string, port uint16) bool {
	return e.name != "" && e.name == name && (e.port == 0 || e.port == port)
}

func (e hostEntry) matchAddr(a netip.Addr, port uint16) bool {
	return e.addr.IsValid() && e.addr == a && (e.port == 0 || e.port == port)
}

// NewGuard validates opts and builds a Guard. Errors name the malformed
// AllowHosts or OwnAddrs entry; cmd should call it once at start-up so a
// bad --websub-allow-hosts fails there.
func NewGuard(opts GuardOptions) (*Guard, error) {
	g := &Guard{
		resolver:       opts.Resolver,
		connectTimeout: opts.ConnectTimeout,
		timeout:        opts.Timeout,
	}
	if g.resolver == nil {
		g.resolver = net.DefaultResolver
	}
	if g.connectTimeout <= 0 {
		g.connectTimeout = DefaultConnectTimeout
	}
	if g.timeout <= 0 {
		g.timeout = DefaultTimeout
	}
	for _, s := range opts.AllowHosts {
		e, err := parseHostEntry(s, false)
		if err != nil {
			return nil, fmt.Errorf("allow host %q: %w", s, err)
		}
		g.allow = append(g.allow, e...)
	}
	for _, s := range opts.OwnAddrs {
		e, err := parseHostEntry(s, true)
		if err != nil {
			return nil, fmt.Errorf("own address %q: %w", s, err)
		}
		g.own = append(g.own, e...)
	}
	return g, nil
}

var errEntry = errors.New("not a host, host:port or URL")

// parseHostEntry parses an AllowHosts entry, or with own an OwnAddrs entry
// (which may also be a URL, or a listen address with an unspecified host
// that expands to this machine's addresses).
func parseHostEntry(s string, own bool) ([]hostEntry, error) {
	s = strings.TrimSpace(s)
	var host, portStr string
	switch {
	case own && strings.Contains(s, "://"):
		u, err := url.Parse(s)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, errEntry
		}
		host, portStr = u.Hostname(), u.Port()
		if portStr == "" {
			portStr = map[string]string{"http": "80", "https": "443"}[u.Scheme]
		}
	default:
		if h, p, err := net.SplitHostPort(s); err == nil {
			host, portStr = h, p
		} else {
			host = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
		}
	}
	var port uint16
	if portStr != "" {
		p, ok := parsePort(portStr)
		if !ok {
			return nil, errEntry
		}
		port = p
	}
	if own && (host == "" || host == "0.0.0.0" || host == "::") {
		return ownAny(port), nil
	}
	if a, err := netip.ParseAddr(host); err == nil && a.Zone() == "" {
		return []hostEntry{{addr: a.Unmap(), port: port}}, nil
	}
	name := strings.TrimSuffix(strings.ToLower(host), ".")
	if !validName(name) {
		return nil, errEntry
	}
	return []hostEntry{{name: name, port: port}}, nil
}

// ownAny expands a listen address with an unspecified host: port on the
// unspecified and loopback addresses and on every interface address.
func ownAny(port uint16) []hostEntry {
	addrs := []netip.Addr{netip.IPv4Unspecified(), netip.IPv6Unspecified(),
		netip.MustParseAddr("127.0.0.1"), netip.IPv6Loopback()}
	if ifs, err := net.InterfaceAddrs(); err == nil {
		for _, ia := range ifs {
			if p, err := netip.ParsePrefix(ia.String()); err == nil {
				addrs = append(addrs, p.Addr().WithZone("").Unmap())
			}
		}
	}
	out := make([]hostEntry, 0, len(addrs))
	for _, a := range addrs {
		out = append(out, hostEntry{addr: a, port: port})
	}
	return out
}

// defaultGuard is the zero-GuardOptions policy of the package-level CheckCallback.
var defaultGuard, _ = NewGuard(GuardOptions{})

// CheckCallback is the subscribe-time check (spec/websub.md "SSRF
// defence") with the default GuardOptions: no allowlist, no own addresses. It
// resolves nothing and connects nowhere. See Guard.CheckCallback.
func CheckCallback(raw string) (*url.URL, error) {
	return defaultGuard.CheckCallback(raw)
}

// CheckCallback checks a hub.callback at subscribe time without any I/O
// and returns it parsed (unchanged). It refuses, in this order:
// ErrCallbackInvalid (unparseable), ErrCallbackScheme (not http/https),
// ErrCallbackHost (opaque, no host, bad port), ErrCallbackUserinfo,
// ErrCallbackFragment, then by host: ErrCallbackHost (malformed, non-ASCII,
// or an IPv4 address spelled other than as a canonical dotted quad — 127.1,
// 0x7f.1, 0177.0.0.1, 2130706433 — unless that spelling decodes into a
// blocked range, which is ErrCallbackAddress), ErrCallbackSelf (one of
// OwnAddrs), ErrCallbackName (a reserved name, unless allowlisted),
// ErrCallbackAddress (an IP literal in a blocked range, including IPv6
// zones and IPv4-mapped literals, unless allowlisted).
//
// A name that passes may still resolve to a blocked address: the hub calls
// CheckCallbackResolved before answering, and DialContext checks again.
func (g *Guard) CheckCallback(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		// Not wrapped: *url.Error quotes the whole raw URL.
		return nil, ErrCallbackInvalid
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, ErrCallbackScheme
	}
	if u.Opaque != "" || u.Host == "" {
		return nil, ErrCallbackHost
	}
	if u.User != nil {
		return nil, ErrCallbackUserinfo
	}
	// url.Parse drops an empty fragment ("…/cb#"), so look at the raw text;
	// '#' can appear nowhere else in a parseable URL.
	if strings.IndexByte(raw, '#') >= 0 {
		return nil, ErrCallbackFragment
	}
	port, ok := urlPort(u)
	if !ok {
		return nil, ErrCallbackHost
	}
	if _, err := g.checkHost(u.Hostname(), strings.HasPrefix(u.Host, "["), port); err != nil {
		return nil, err
	}
	if err := canonicalAuthority(u); err != nil {
		return nil, err
	}
	return u, nil
}

// canonicalAuthority refuses a callback whose host or port is spelled
// other than its one canonical way: a port with leading zeros or the
// scheme's default port written out, a name with a trailing dot, an IPv6
// literal not in RFC 5952 form. The hub's caps count callbacks per
// host[:port] as written (store.CallbackHost), so every other spelling
// of one listener would be a fresh cap; one spelling per listener keeps
// the caps whole. Errors: ErrCallbackHost, wrapped with how to write it.
func canonicalAuthority(u *url.URL) error {
	if p := u.Port(); p != "" {
		if p[0] == '0' {
			return fmt.Errorf("%w: port with leading zeros", ErrCallbackHost)
		}
		if (u.Scheme == "https" && p == "443") || (u.Scheme == "http" && p == "80") {
			return fmt.Errorf("%w: leave out the scheme's default port", ErrCallbackHost)
		}
	}
	h := u.Hostname()
	if strings.HasSuffix(h, ".") {
		return fmt.Errorf("%w: host with a trailing dot", ErrCallbackHost)
	}
	if strings.HasPrefix(u.Host, "[") {
		if a, err := netip.ParseAddr(h); err == nil && a.String() != strings.ToLower(h) {
			return fmt.Errorf("%w: IPv6 address not in RFC 5952 form (write %s)", ErrCallbackHost, a.String())
		}
	}
	return nil
}

// CheckCallbackResolved is CheckCallback followed by resolving a named
// host and checking every address it resolves to (spec/websub.md: "resolve
// and check EVERY address"): one blocked address refuses the callback.
// Errors: those of CheckCallback; ErrCallbackAddress or ErrCallbackSelf
// for a resolved address; ErrCallbackResolve when the name has no address
// or the lookup fails. It connects nowhere; the dial-time check still
// runs, since the answer may change before the hub dials.
func (g *Guard) CheckCallbackResolved(ctx context.Context, raw string) (*url.URL, error) {
	u, err := g.CheckCallback(raw)
	if err != nil {
		return nil, err
	}
	port, _ := urlPort(u)
	t, _ := g.checkHost(u.Hostname(), strings.HasPrefix(u.Host, "["), port)
	if t.name != "" {
		if _, err := g.resolve(ctx, "ip", t); err != nil {
			return nil, err
		}
	}
	return u, nil
}

// target is a host that passed checkHost: either a DNS name or an address.
type target struct {
	name    string // lowercased, without the trailing dot
	addr    netip.Addr
	port    uint16
	allowed bool // the name matched AllowHosts: its addresses are permitted
}

// checkHost applies the host rules of CheckCallback to host (without
// brackets); bracketed says the URL spelled it as an IPv6 literal.
func (g *Guard) checkHost(host string, bracketed bool, port uint16) (target, error) {
	t := target{port: port}
	if bracketed {
		a, err := netip.ParseAddr(host)
		if err != nil || !a.Is6() {
			return t, ErrCallbackHost
		}
		t.addr = a
		return t, g.checkAddr(a, port, false)
	}
	h := strings.ToLower(host)
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_') {
			// Non-ASCII too: http.Transport would map it through IDNA
			// (fullwidth "ｌｏｃａｌｈｏｓｔ" becomes "localhost"); IDN
			// callbacks must use their A-label (xn--) form.
			return t, ErrCallbackHost
		}
	}
	h = strings.TrimSuffix(h, ".")
	if h == "" {
		return t, ErrCallbackHost
	}
	if endsInNumber(h) {
		// The WHATWG URL host parser, and inet_aton behind many system
		// resolvers, read such a host as an IPv4 address.
		a, ok := parseIPv4(h)
		if !ok {
			return t, ErrCallbackHost
		}
		if a.String() != h {
			if r, bad := BlockedAddr(a); bad {
				return t, fmt.Errorf("%w: %s (non-canonical IPv4 spelling)", ErrCallbackAddress, r)
			}
			return t, fmt.Errorf("%w: non-canonical IPv4 spelling", ErrCallbackHost)
		}
		t.addr = a
		return t, g.checkAddr(a, port, false)
	}
	if !validName(h) {
		return t, ErrCallbackHost
	}
	t.name = h
	for _, e := range g.own {
		if e.matchName(h, port) {
			return t, ErrCallbackSelf
		}
	}
	for _, e := range g.allow {
		if e.matchName(h, port) {
			t.allowed = true
			return t, nil
		}
	}
	if r, bad := reservedName(h); bad {
		return t, fmt.Errorf("%w: %s", ErrCallbackName, r)
	}
	return t, nil
}

// checkAddr is the address rule of every check: own addresses refused,
// allowlisted ones (or all, when the name was allowlisted) permitted,
// blocked ranges refused.
func (g *Guard) checkAddr(a netip.Addr, port uint16, nameAllowed bool) error {
	for _, e := range g.own {
		if e.matchAddr(a.WithZone("").Unmap(), port) {
			return ErrCallbackSelf
		}
	}
	if nameAllowed {
		return nil
	}
	for _, e := range g.allow {
		if e.matchAddr(a, port) {
			return nil
		}
	}
	if r, bad := BlockedAddr(a); bad {
		return fmt.Errorf("%w: %s", ErrCallbackAddress, r)
	}
	return nil
}

// resolve looks t.name up and checks every address; it returns them
// unmapped, in the resolver's order.
func (g *Guard) resolve(ctx context.Context, network string, t target) ([]netip.Addr, error) {
	addrs, err := g.resolver.LookupNetIP(ctx, network, t.name)
	if err != nil {
		return nil, &quietError{public: ErrCallbackResolve, cause: err}
	}
	if len(addrs) == 0 {
		return nil, ErrCallbackResolve
	}
	out := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		// net.Resolver may return an A record as ::ffff:a.b.c.d; the
		// address dialled is the IPv4 one, so that is the one checked.
		a = a.Unmap()
		if err := g.checkAddr(a, t.port, t.allowed); err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// quietError is public in messages and both public and cause to errors.Is.
type quietError struct{ public, cause error }

func (e *quietError) Error() string   { return e.public.Error() }
func (e *quietError) Unwrap() []error { return []error{e.public, e.cause} }

// allowedNameKey marks a dial whose host name matched AllowHosts, so that
// Control permits the addresses it resolved to.
type allowedNameKey struct{}

// DialContext dials a callback for http.Transport.DialContext (network
// "tcp", "tcp4" or "tcp6"; address "host:port"). It applies the host rules
// of CheckCallback, resolves a name itself through GuardOptions.Resolver,
// refuses the host if any address is refused, then dials the checked
// addresses in order — within ConnectTimeout for all of them — through a
// net.Dialer whose ControlContext re-checks each socket's address.
// Errors: the Err* values of CheckCallback and CheckCallbackResolved, or
// the dialer's *net.OpError (wrapping ErrCallbackAddress or
// ErrCallbackSelf when Control refused).
func (g *Guard) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	if g.err != nil {
		return nil, g.err
	}
	lookup := map[string]string{"tcp": "ip", "tcp4": "ip4", "tcp6": "ip6"}[network]
	if lookup == "" {
		return nil, net.UnknownNetworkError(network)
	}
	host, portStr, err := net.SplitHostPort(address)
	if err != nil {
		return nil, ErrCallbackHost
	}
	port, ok := parsePort(portStr)
	if !ok {
		return nil, ErrCallbackHost
	}
	t, err := g.checkHost(host, strings.Contains(host, ":"), port)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, g.connectTimeout)
	defer cancel() // a connection once made outlives its dial context
	addrs := []netip.Addr{t.addr}
	if t.name != "" {
		if addrs, err = g.resolve(ctx, lookup, t); err != nil {
			return nil, err
		}
		if t.allowed {
			ctx = context.WithValue(ctx, allowedNameKey{}, true)
		}
	}
	d := net.Dialer{ControlContext: g.controlContext}
	var first error
	for _, a := range addrs {
		c, err := d.DialContext(ctx, network, netip.AddrPortFrom(a, port).String())
		if err == nil {
			return c, nil
		}
		if first == nil {
			first = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, first
}

// Control is a net.Dialer.Control function: it checks the address a socket
// is about to connect to ("ip:port", after any DNS resolution) and refuses
// it with ErrCallbackAddress (blocked range, or not an ip:port) or
// ErrCallbackSelf. IPv4-mapped addresses are checked as the IPv4 address
// they reach. Only AllowHosts IP entries exempt an address here; a dialer
// of its own that uses Control gets the dial-time half of the defence
// whatever resolver it uses.
func (g *Guard) Control(network, address string, c syscall.RawConn) error {
	return g.controlContext(context.Background(), network, address, c)
}

func (g *Guard) controlContext(ctx context.Context, _, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: dialled address is not ip:port", ErrCallbackAddress)
	}
	nameAllowed, _ := ctx.Value(allowedNameKey{}).(bool)
	return g.checkAddr(ap.Addr().Unmap(), ap.Port(), nameAllowed)
}

// HTTPClient returns a new client for outbound hub requests under g's
// policy; see NewHTTPClient.
func (g *Guard) HTTPClient() *http.Client {
	tr := &http.Transport{
		// Never a proxy from the environment: the proxy would dial the
		// callback, and only our dialer checks addresses.
		Proxy:                  nil,
		DialContext:            g.DialContext,
		ForceAttemptHTTP2:      true,
		TLSHandshakeTimeout:    g.connectTimeout,
		ResponseHeaderTimeout:  g.timeout,
		MaxResponseHeaderBytes: 64 << 10,
		// Connections are reused per callback host: a courier keeps up
		// to its host limit (couriers.Options.HostLimit, 4 by default)
		// deliveries in flight to one host, and net/http's default of 2
		// idle connections per host closed half of them after each
		// request and dialled again. 16 covers raised host limits; 1,024
		// in all is a few MiB of buffers at most.
		MaxIdleConns:        1024,
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     90 * time.Second,
	}
	return &http.Client{
		Transport: &guardTransport{base: tr},
		Timeout:   g.timeout,
		// spec/websub.md "Distribution": redirects are never followed; a
		// 3xx is returned as is (and counts as a failure).
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// guardTransport refuses, before any connection, requests that no callback
// check would pass: a scheme other than http/https, or userinfo (which
// net/http would send as Basic credentials).
type guardTransport struct{ base *http.Transport }

func (t *guardTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	var err error
	switch {
	case r.URL == nil:
		err = ErrCallbackInvalid
	case r.URL.Scheme != "http" && r.URL.Scheme != "https":
		err = ErrCallbackScheme
	case r.URL.User != nil:
		err = ErrCallbackUserinfo
	}
	if err != nil {
		if r.Body != nil {
			r.Body.Close() // a RoundTripper closes the body, even on error
		}
		return nil, err
	}
	return t.base.RoundTrip(r)
}

// CloseIdleConnections lets http.Client.CloseIdleConnections reach the
// transport.
func (t *guardTransport) CloseIdleConnections() { t.base.CloseIdleConnections() }

// NewHTTPClient returns the *http.Client of outbound hub requests
// (verification of intent, denial, delivery; spec/websub.md "SSRF
// defence"): every connection goes through Guard.DialContext and
// Guard.Control, connects within opts.ConnectTimeout and finishes within
// opts.Timeout (body included), redirects are returned rather than
// followed, no proxy is used, a URL with userinfo or another scheme is
// refused before dialling, and response headers are capped at 64 KiB.
// Read bodies with ReadLimited. If opts do not validate (see NewGuard) the
// client fails every request with NewGuard's error: it fails closed.
//
// Its errors are *url.Error values that quote the request URL (query
// included): log them, never send them to a subscriber.
func NewHTTPClient(opts GuardOptions) *http.Client {
	g, err := NewGuard(opts)
	if err != nil {
		g = &Guard{err: err, connectTimeout: DefaultConnectTimeout, timeout: DefaultTimeout}
	}
	return g.HTTPClient()
}

// drainLimit bounds what ReadLimited discards so the connection can be
// reused; past it the connection is closed instead.
const drainLimit = 64 << 10

// ReadLimited reads at most n bytes of resp's body, discards (up to 64
// KiB of) the rest and closes the body. To tell a body of exactly n bytes
// from a longer one, ask for n+1: the hub reads len(challenge)+1 bytes and
// compares. Errors wrap the body's read error and never contain body bytes.
func ReadLimited(resp *http.Response, n int64) ([]byte, error) {
	defer resp.Body.Close()
	if n < 0 {
		n = 0
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, n))
	if err != nil {
		return b, fmt.Errorf("read response body: %w", err)
	}
	_, _ = io.CopyN(io.Discard, resp.Body, drainLimit)
	return b, nil
}

// urlPort is u's port, defaulted by scheme; false when not 1–65535.
func urlPort(u *url.URL) (uint16, bool) {
	if p := u.Port(); p != "" {
		return parsePort(p)
	}
	if u.Scheme == "https" {
		return 443, true
	}
	return 80, true
}

func parsePort(s string) (uint16, bool) {
	p, err := strconv.ParseUint(s, 10, 16)
	if err != nil || p == 0 {
		return 0, false
	}
	return uint16(p), true
}

// validName reports whether h (lowercase, no trailing dot) is a DNS name
// of labels [a-z0-9_-]{1,63}, at most 253 bytes.
func validName(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	for label := range strings.SplitSeq(h, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// reservedNames are the name suffixes refused at subscribe time: the
// spec's localhost, *.localhost and *.internal, and the other
// special-use names that never reach a public host.
var reservedNames = []struct{ suffix, why string }{
	{"localhost", "localhost (RFC 6761 §6.3)"},
	{"internal", ".internal (ICANN private-use TLD)"},
	{"local", ".local (mDNS, RFC 6762)"},
	{"localdomain", ".localdomain (local resolver convention)"},
	{"arpa", ".arpa (infrastructure: home.arpa RFC 8375, ipv4only.arpa RFC 7050, reverse zones)"},
	{"test", ".test (RFC 6761 §6.2)"},
	{"invalid", ".invalid (RFC 6761 §6.4)"},
	{"example", ".example (RFC 6761 §6.5)"},
	{"onion", ".onion (RFC 7686)"},
}

// reservedName reports why a name (lowercase, no trailing dot) is refused.
// A single-label name is refused too: the system resolver completes it
// with the search list (GCP's "metadata", a LAN's "router").
func reservedName(h string) (string, bool) {
	for _, r := range reservedNames {
		if h == r.suffix || strings.HasSuffix(h, "."+r.suffix) {
			return r.why, true
		}
	}
	if !strings.Contains(h, ".") {
		return "single-label name (completed by the resolver's search list)", true
	}
	return "", false
}

// endsInNumber is the WHATWG URL "ends in a number" test: a host whose last
// label is decimal digits or 0x-prefixed hex is parsed as IPv4 (and fails
// if it is not one). h has no trailing dot.
func endsInNumber(h string) bool {
	last := h[strings.LastIndexByte(h, '.')+1:]
	if last == "" {
		return false
	}
	if strings.HasPrefix(last, "0x") {
		return strings.Trim(last[2:], "0123456789abcdef") == ""
	}
	return strings.Trim(last, "0123456789") == ""
}

// parseIPv4 decodes the IPv4 spellings of the WHATWG URL host parser and
// inet_aton: one to four dot-separated numbers, each decimal, octal
// (leading 0) or hex (0x), the last filling the remaining bytes (127.1 is
// 127.0.0.1, 2130706433 is 127.0.0.1). h is lowercase, no trailing dot.
func parseIPv4(h string) (netip.Addr, bool) {
	parts := strings.Split(h, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	var v uint64
	for i, p := range parts {
		n, ok := parseIPv4Number(p)
		if !ok {
			return netip.Addr{}, false
		}
		if i < len(parts)-1 {
			if n > 255 {
				return netip.Addr{}, false
			}
			v = v<<8 | n
			continue
		}
		rest := uint(4 - i) // bytes the last number fills
		if n >= 1<<(8*rest) {
			return netip.Addr{}, false
		}
		v = v<<(8*rest) | n
	}
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

func parseIPv4Number(p string) (uint64, bool) {
	base := 10
	switch {
	case strings.HasPrefix(p, "0x"):
		p, base = p[2:], 16
		if p == "" { // WHATWG: "0x" alone is zero
			return 0, true
		}
	case len(p) > 1 && p[0] == '0':
		p, base = p[1:], 8
	}
	if p == "" || strings.HasPrefix(p, "+") || strings.HasPrefix(p, "-") {
		return 0, false
	}
	n, err := strconv.ParseUint(p, base, 32)
	return n, err == nil
}

// addrRange is one row of the blocked-range tables.
type addrRange struct {
	prefix netip.Prefix
	name   string
}

func ranges(rows ...string) []addrRange {
	out := make([]addrRange, 0, len(rows)/2)
	for i := 0; i < len(rows); i += 2 {
		out = append(out, addrRange{netip.MustParsePrefix(rows[i]), rows[i+1]})
	}
	return out
}

// blocked4 is checked in order (more specific rows first); sources: IANA
// IPv4 Special-Purpose Address Registry (RFC 6890) and the spec's list.
var blocked4 = ranges(
	"0.0.0.0/32", "unspecified 0.0.0.0/32",
	"0.0.0.0/8", `"this network" 0.0.0.0/8 (RFC 791)`,
	"10.0.0.0/8", "private 10.0.0.0/8 (RFC 1918)",
	"100.64.0.0/10", "CGNAT shared 100.64.0.0/10 (RFC 6598)",
	"127.0.0.0/8", "loopback 127.0.0.0/8 (RFC 1122)",
	"169.254.0.0/16", "link-local 169.254.0.0/16 (RFC 3927)",
	"172.16.0.0/12", "private 172.16.0.0/12 (RFC 1918)",
	"192.0.0.0/24", "IETF protocol assignments 192.0.0.0/24 (RFC 6890)",
	"192.0.2.0/24", "documentation 192.0.2.0/24 (RFC 5737)",
	"192.88.99.0/24", "6to4 relay anycast 192.88.99.0/24 (RFC 7526)",
	"192.168.0.0/16", "private 192.168.0.0/16 (RFC 1918)",
	"198.18.0.0/15", "benchmarking 198.18.0.0/15 (RFC 2544)",
	"198.51.100.0/24", "documentation 198.51.100.0/24 (RFC 5737)",
	"203.0.113.0/24", "documentation 203.0.113.0/24 (RFC 5737)",
	"224.0.0.0/4", "multicast 224.0.0.0/4 (RFC 5771)",
	"255.255.255.255/32", "limited broadcast 255.255.255.255/32 (RFC 919)",
	"240.0.0.0/4", "reserved 240.0.0.0/4 (RFC 1112)",
)

// blocked6 is checked in order; anything else outside 2000::/3 (global
// unicast, RFC 4291) is refused too, except 64:ff9b::/96 whose embedded
// IPv4 address decides. Sources: IANA IPv6 Special-Purpose Address
// Registry (RFC 6890) and the spec's list.
var blocked6 = ranges(
	"::/128", "unspecified ::/128",
	"::1/128", "loopback ::1/128 (RFC 4291)",
	"::ffff:0:0/96", "IPv4-mapped ::ffff:0:0/96 (RFC 4291)",
	"::/96", "IPv4-compatible ::/96 (deprecated, RFC 4291)",
	"64:ff9b:1::/48", "local-use NAT64 64:ff9b:1::/48 (RFC 8215)",
	"100::/64", "discard-only 100::/64 (RFC 6666)",
	"2001:2::/48", "benchmarking 2001:2::/48 (RFC 5180)",
	"2001:10::/28", "ORCHID 2001:10::/28 (deprecated, RFC 4843)",
	"2001:db8::/32", "documentation 2001:db8::/32 (RFC 3849)",
	"3fff::/20", "documentation 3fff::/20 (RFC 9637)",
	"5f00::/16", "SRv6 SIDs 5f00::/16 (RFC 9602)",
	"fc00::/7", "unique local fc00::/7 (RFC 4193)",
	"fe80::/10", "link-local fe80::/10 (RFC 4291)",
	"fec0::/10", "site-local fec0::/10 (deprecated, RFC 3879)",
	"ff00::/8", "multicast ff00::/8 (RFC 4291)",
)

var (
	nat64     = netip.MustParsePrefix("64:ff9b::/96") // RFC 6052
	sixToFour = netip.MustParsePrefix("2002::/16")    // RFC 3056
	teredo    = netip.MustParsePrefix("2001::/32")    // RFC 4380
	global6   = netip.MustParsePrefix("2000::/3")     // RFC 4291 §2.4
)

// BlockedAddr reports whether a is refused as a callback address and names
// its range (spec/websub.md "SSRF defence"; IANA special-purpose address
// registries, RFC 6890). Refused: the IPv4 rows of blocked4 (unspecified,
// 0/8, RFC 1918, CGNAT, loopback, link-local, IETF 192.0.0/24,
// documentation, 6to4 relay, benchmarking, multicast, broadcast, 240/4);
// the IPv6 rows of blocked6 (unspecified, loopback, IPv4-mapped and
// -compatible, local-use NAT64, discard, benchmarking, ORCHID,
// documentation, SRv6, ULA fc00::/7, link-local, site-local, multicast);
// any other IPv6 address outside 2000::/3; an address with a zone; the
// NAT64 (64:ff9b::/96), 6to4 (2002::/16) and Teredo (2001::/32, server and
// client) embeddings of a refused IPv4 address; and every other prefix of
// the IANA-generated deny lists of code.dny.dev/ssrf (ianaDenied: AS112,
// AMT, the rest of 2001::/23…), named "IANA special-purpose <prefix>".
// The rows above are checked first, so an address they refuse is named by
// them. a is checked as given: an IPv4-mapped a is refused, so callers
// checking a dialled or resolved address unmap it first.
func BlockedAddr(a netip.Addr) (string, bool) {
	switch {
	case !a.IsValid():
		return "invalid address", true
	case a.Zone() != "":
		return "scoped IPv6 address", true
	case a.Is4():
		return blocked4Addr(a)
	}
	if r, bad := lookupRange(blocked6, a); bad {
		return r, true
	}
	b := a.As16()
	switch {
	case nat64.Contains(a):
		return embedded("NAT64 64:ff9b::/96", [4]byte(b[12:16]))
	case sixToFour.Contains(a):
		return embedded("6to4 2002::/16", [4]byte(b[2:6]))
	case teredo.Contains(a):
		if r, bad := embedded("Teredo 2001::/32 server", [4]byte(b[4:8])); bad {
			return r, true
		}
		return embedded("Teredo 2001::/32 client", [4]byte{^b[12], ^b[13], ^b[14], ^b[15]})
	case !global6.Contains(a):
		return "outside global unicast 2000::/3 (RFC 4291)", true
	}
	return ianaDenied(iana.IPv6DeniedPrefixes, a)
}

// blocked4Addr is BlockedAddr of an IPv4 address.
func blocked4Addr(a netip.Addr) (string, bool) {
	if r, bad := lookupRange(blocked4, a); bad {
		return r, true
	}
	return ianaDenied(iana.IPv4DeniedPrefixes, a)
}

// ianaDenied reports whether a is in one of code.dny.dev/ssrf's
// IANA-generated deny prefixes. Its IPv6 list denies all of 6to4
// (2002::/16) and 2001::/23 (Teredo's 2001::/32 included); BlockedAddr
// decides 6to4 and Teredo by the IPv4 address they embed before it gets
// here, so a 6to4 or Teredo address of a public IPv4 host stays allowed,
// as spec/websub.md's embedding rule has it.
func ianaDenied(ps []netip.Prefix, a netip.Addr) (string, bool) {
	for _, p := range ps {
		if p.Contains(a) {
			return "IANA special-purpose " + p.String(), true
		}
	}
	return "", false
}

func lookupRange(rs []addrRange, a netip.Addr) (string, bool) {
	for _, r := range rs {
		if r.prefix.Contains(a) {
			return r.name, true
		}
	}
	return "", false
}

func embedded(kind string, v4 [4]byte) (string, bool) {
	if r, bad := blocked4Addr(netip.AddrFrom4(v4)); bad {
		return kind + " embedding of " + r, true
	}
	return "", false
}
