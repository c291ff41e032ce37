package relay

import (
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/gorilla/mux"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/acrelay/acrelay/hub"
	"github.com/acrelay/acrelay/internal/apierror"
	"github.com/acrelay/acrelay/internal/ratelimit"
	"github.com/acrelay/acrelay/wire"
)

// RateLimits are the relay's request rates (docs/operating.md "Limits"),
// token buckets of golang.org/x/time/rate kept in bounded memory
// (internal/ratelimit). A rate of 0 turns that limit off; the zero value
// limits nothing (cmd/acrelay's flags give the safe defaults).
type RateLimits struct {
	// ClientRate is the requests per second, ClientBurst the burst, of one
	// client address (an IPv6 client: its /64) on the routes that need no
	// token: POST /websub/hub, feed capability reads (/v1/feeds/…), a
	// public project's reads without Authorization, the web view's sign-in,
	// and requests whose bearer token is refused (401).
	ClientRate  float64
	ClientBurst int
	// TokenWriteRate and TokenWriteBurst bound one token's authenticated
	// writes (POST, PUT, PATCH, DELETE), counted after authentication.
	TokenWriteRate  float64
	TokenWriteBurst int
	// MaxKeys bounds the buckets each limiter keeps (idle ones are
	// dropped first); 0 means ratelimit.DefaultMaxKeys.
	MaxKeys int
	// RefusalHold is the longest a refusal of the client rate is held
	// before its 429 is written: a refused request waits until its
	// address's bucket has a token again (its Retry-After wait), at most
	// RefusalHold, so a client that waits for each answer — as HTTP/1.1
	// clients do on a connection — sends at most about its rate plus one
	// request per connection per RefusalHold, and a flood of refused
	// requests stops costing the CPU that appends need. The 429 and its
	// Retry-After are unchanged. 0 answers at once.
	RefusalHold time.Duration
	// RefusalHoldMax bounds the refusals held at once (each holds a
	// connection and its goroutine); over it a refusal is answered at
	// once. 0 with a RefusalHold means DefaultRefusalHoldMax.
	RefusalHoldMax int
	// TrustedProxies are the proxies whose X-Forwarded-For is believed:
	// when a request's peer is in one of them, its client address is the
	// right-most X-Forwarded-For address that is not (clientKey). Empty:
	// the peer address is the client.
	TrustedProxies []netip.Prefix
}

// Limit names of acrelay_limit_refusals_total (besides hub.LimitNames).
const (
	limitClientRate = "client_rate"
	limitTokenRate  = "token_rate"
)

// errRateLimited is every rate's refusal; Retry-After says when to retry.
var errRateLimited = apierror.New(wire.CodeRateLimited)

// DefaultRefusalHoldMax is RateLimits.RefusalHoldMax when 0: 1024 held
// refusals hold about 16 MiB (each a goroutine stack and a connection's 4 KiB read and write buffers).
const DefaultRefusalHoldMax = 1024

// limiters are the Server's buckets; a nil one is off.
type limiters struct {
	clients, tokens *ratelimit.Keyed
	trusted         []netip.Prefix
	// hold and holds: RateLimits.RefusalHold and one slot per refusal
	// that may be held at once (nil when hold is 0).
	hold  time.Duration
	holds chan struct{}
}

func newLimiters(l RateLimits) limiters {
	out := limiters{trusted: l.TrustedProxies}
	if l.RefusalHold > 0 {
		out.hold = l.RefusalHold
		n := l.RefusalHoldMax
		if n <= 0 {
			n = DefaultRefusalHoldMax
		}
		out.holds = make(chan struct{}, n)
	}
	if l.ClientRate > 0 {
		out.clients = ratelimit.New(l.ClientRate, l.ClientBurst, l.MaxKeys)
	}
	if l.TokenWriteRate > 0 {
		out.tokens = ratelimit.New(l.TokenWriteRate, l.TokenWriteBurst, l.MaxKeys)
	}
	return out
}

// refuseRate answers 429 rate_limited with Retry-After and counts it.
func (s *Server) refuseRate(w http.ResponseWriter, r *http.Request, limit string, wait time.Duration) {
	w.Header().Set("Retry-After", strconv.Itoa(ratelimit.RetryAfterSeconds(wait)))
	if s.cfg.Metrics != nil {
		s.cfg.Metrics.LimitRefused(limit)
	}
	s.writeError(w, r, errRateLimited)
}

// allowClient takes a token of the request's client address; false means
// it was refused and answered.
func (s *Server) allowClient(w http.ResponseWriter, r *http.Request) bool {
	if s.limits.clients == nil {
		return true
	}
	ok, wait := s.limits.clients.Allow(clientKey(r, s.limits.trusted), time.Now())
	if !ok {
		s.holdRefusal(r, wait)
		s.refuseRate(w, r, limitClientRate, wait)
	}
	return ok
}

// holdRefusal waits before a client-rate refusal is answered: until the
// client's bucket has a token again (wait), at most RateLimits.RefusalHold,
// while a hold slot is free and the request lasts. It changes when the 429
// is written, never what it says.
func (s *Server) holdRefusal(r *http.Request, wait time.Duration) {
	if s.limits.hold <= 0 {
		return
	}
	select {
	case s.limits.holds <- struct{}{}:
	default:
		return // as many held as allowed: answer at once
	}
	defer func() { <-s.limits.holds }()
	t := time.NewTimer(min(wait, s.limits.hold))
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.Context().Done():
	}
}

// refuseHubEarly answers a POST to the embedded hub from a client over its
// rate before routing: the hub's route needs no token and is charged to
// the client rate (limitClients skips it, so each request takes one token
// as before). It reports whether r was answered. An encoded slash in the
// path is left to the router (it is the JSON 404, uncharged).
func (s *Server) refuseHubEarly(w http.ResponseWriter, r *http.Request) bool {
	if s.limits.clients == nil || !s.earlyCharged(r) {
		return false
	}
	return !s.allowClient(w, r)
}

// allowTokenWrite takes a token of an authenticated write's bearer (the
// operator token shares one bucket); false means refused and answered.
func (s *Server) allowTokenWrite(w http.ResponseWriter, r *http.Request, p principal) bool {
	if s.limits.tokens == nil {
		return true
	}
	switch r.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
	default:
		return true
	}
	key := "token:" + p.TokenID
	if p.Operator {
		key = "operator"
	}
	ok, wait := s.limits.tokens.Allow(key, time.Now())
	if !ok {
		s.refuseRate(w, r, limitTokenRate, wait)
	}
	return ok
}

// limitClients is the router middleware of the per-client-address rate:
// it charges the routes that need no token (RateLimits.ClientRate) before
// their handler runs; the others pass (a refused bearer is charged in
// authMiddleware).
func (s *Server) limitClients(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.limits.clients != nil && !s.earlyCharged(r) && unauthenticatedRoute(r) && !s.allowClient(w, r) {
			return
		}
		next.ServeHTTP(w, r)
	})
}

// earlyCharged reports whether r's client-rate token is taken before
// routing (refuseHubEarly): a POST to the embedded hub's exact path.
func (s *Server) earlyCharged(r *http.Request) bool {
	return s.cfg.Hub != nil && r.Method == http.MethodPost && r.URL.Path == hub.HubPath && r.URL.RawPath == ""
}

// unauthenticatedRoute reports whether r is on a route that needs no
// token: the hub, a feed capability's reads (its record pages too), a
// public read without Authorization, the web view's sign-in and record
// pages.
func unauthenticatedRoute(r *http.Request) bool {
	rt := mux.CurrentRoute(r)
	if rt == nil {
		return false
	}
	tpl, _ := rt.GetPathTemplate()
	switch {
	case tpl == hub.HubPath:
		return true
	case strings.HasPrefix(tpl, "/v1/feeds/") && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		return true
	case tpl == "/ui/signin" && r.Method == http.MethodPost:
		return true
	case tpl == uiRecordPageRoute: // open to everyone for a public project
		return true
	}
	return anonymousRead(r)
}

// clientKey is the bucket key of r's client: its address, or for IPv6 its
// /64 (one subscriber line holds a whole /64). When the peer is a trusted
// proxy, the client is the right-most X-Forwarded-For address that is not
// a trusted proxy (each proxy appends the address it saw, so the entries
// left of the first untrusted one are the client's to forge); if every
// entry is trusted, the left-most. An unparsable entry ends the walk at the
// last address read.
func clientKey(r *http.Request, trusted []netip.Prefix) string {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return "peer:" + r.RemoteAddr // not a TCP peer (tests' recorders): one bucket per spelling
	}
	addr := ap.Addr().Unmap()
	if len(trusted) > 0 && isTrusted(addr, trusted) {
		hops := forwardedFor(r)
		for i := len(hops) - 1; i >= 0; i-- {
			a, err := netip.ParseAddr(hops[i])
			if err != nil {
				break
			}
			addr = a.Unmap()
			if !isTrusted(addr, trusted) {
				break
			}
		}
	}
	if addr.Is6() {
		p, _ := addr.Prefix(64)
		return p.String()
	}
	return addr.String()
}

func isTrusted(a netip.Addr, trusted []netip.Prefix) bool {
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// forwardedFor is every X-Forwarded-For entry, in order, across repeated
// headers.
func forwardedFor(r *http.Request) []string {
	var hops []string
	for _, v := range r.Header.Values("X-Forwarded-For") {
		for _, h := range strings.Split(v, ",") {
			hops = append(hops, strings.TrimSpace(h))
		}
	}
	return hops
}

// ParseTrustedProxies parses a comma-separated list of CIDR prefixes or
// single addresses (a /32 or /128), e.g. "10.0.0.0/8, ::1". Errors name
// the entry that is neither.
func ParseTrustedProxies(list []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range list {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, &proxyListError{entry: s}
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

type proxyListError struct{ entry string }

func (e *proxyListError) Error() string {
	return strconv.Quote(e.entry) + " is neither an address nor a CIDR prefix"
}

var descLimiterKeys = prometheus.NewDesc("acrelay_rate_limiter_keys",
	"Token buckets kept in memory by each rate limiter (client, token); bounded by the limiter's key cap.", []string{"limiter"}, nil)

// limiterCollector reports the limiters' sizes at scrape time.
type limiterCollector struct{ s *Server }

func (c limiterCollector) Describe(ch chan<- *prometheus.Desc) { ch <- descLimiterKeys }

func (c limiterCollector) Collect(ch chan<- prometheus.Metric) {
	for name, k := range map[string]*ratelimit.Keyed{"client": c.s.limits.clients, "token": c.s.limits.tokens} {
		if k != nil {
			ch <- prometheus.MustNewConstMetric(descLimiterKeys, prometheus.GaugeValue, float64(k.Len()), name)
		}
	}
}
