package hub

// TEMPORARY STAND-IN — DELETE THIS FILE AT MERGE.
//
// hub/ssrf.go (the SSRF guard) is being written in another worktree and
// will provide CheckCallback, the guarded dialer and NewHTTPClient. This
// file only lets the hub build and be tested until then: the names and
// signatures below are the ones the hub codes against (ClientOptions is a
// guess at the name of NewHTTPClient's options; AllowHosts is agreed). Its
// address checks are a rough subset of spec/websub.md "SSRF defence" (no
// NAT64/6to4 embeddings, no relay-own-address check, no *.internal).

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"syscall"
	"time"
)

// ClientOptions configure NewHTTPClient (stand-in).
type ClientOptions struct {
	// AllowHosts are host names or literal addresses exempt from the
	// address checks (tests: 127.0.0.1). Off by default.
	AllowHosts []string
	// Timeout bounds one whole request; 0 means 10s.
	Timeout time.Duration
}

// errCallbackRefused (stand-in) is CheckCallback's error.
var errCallbackRefused = errors.New("callback refused")

// CheckCallback (stand-in) checks a hub.callback at subscribe time: http
// or https, a host, no userinfo, no fragment, and no refused literal or
// resolved address.
func CheckCallback(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.Fragment != "" || u.Opaque != "" {
		return nil, fmt.Errorf("%w: not an absolute http(s) URL without userinfo or fragment", errCallbackRefused)
	}
	host := strings.ToLower(u.Hostname())
	if host == "localhost" || strings.HasSuffix(host, ".localhost") || strings.HasSuffix(host, ".internal") {
		return nil, fmt.Errorf("%w: local host name", errCallbackRefused)
	}
	addrs, err := net.DefaultResolver.LookupNetIP(context.Background(), "ip", host)
	if err != nil {
		return nil, fmt.Errorf("%w: does not resolve", errCallbackRefused)
	}
	for _, a := range addrs {
		if refusedAddr(a) {
			return nil, fmt.Errorf("%w: refused address", errCallbackRefused)
		}
	}
	return u, nil
}

func refusedAddr(a netip.Addr) bool {
	a = a.Unmap()
	return !a.IsGlobalUnicast() || a.IsPrivate() || a.IsLoopback() || a.IsLinkLocalUnicast() ||
		netip.MustParsePrefix("100.64.0.0/10").Contains(a)
}

// NewHTTPClient (stand-in) returns a client that never follows redirects,
// uses no proxy and refuses a refused address at dial time.
func NewHTTPClient(opts ClientOptions) *http.Client {
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	allowed := func(host string) bool { return slices.Contains(opts.AllowHosts, host) }
	d := &net.Dialer{Timeout: 5 * time.Second, Control: func(_, address string, _ syscall.RawConn) error {
		host, _, err := net.SplitHostPort(address)
		if err != nil {
			return err
		}
		a, err := netip.ParseAddr(host)
		if err != nil || (refusedAddr(a) && !allowed(host)) {
			return fmt.Errorf("dial %s: %w", host, errCallbackRefused)
		}
		return nil
	}}
	return &http.Client{
		Timeout:       opts.Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Transport: &http.Transport{
			Proxy:                 nil,
			DialContext:           d.DialContext,
			TLSHandshakeTimeout:   5 * time.Second,
			ResponseHeaderTimeout: opts.Timeout,
			MaxIdleConnsPerHost:   2,
			IdleConnTimeout:       30 * time.Second,
		},
	}
}
