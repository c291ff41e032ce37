// Package connlimit bounds the TCP connections one client address holds
// open at once on a listener (docs/operating.md "Limits",
// --max-connections-per-address). A connection over the bound is closed as
// soon as it is accepted, before any byte of a request is read: refusing
// it costs an accept and a close, not an HTTP request. Peers in the
// trusted proxies are not bounded (their connections carry many clients;
// the per-client rates see those through X-Forwarded-For). An IPv6 peer
// is counted by its /64, as the relay's per-client rate does.
package connlimit

import (
	"net"
	"net/netip"
	"sync"
)

// Listener is a net.Listener whose Accept returns only connections within
// the per-address bound; it is safe for concurrent use.
type Listener struct {
	net.Listener
	max     int
	trusted []netip.Prefix
	refused func() // called for each connection closed over the bound; may be nil

	mu   sync.Mutex
	open map[netip.Addr]int
}

// New wraps ln so that one client address holds at most max connections
// (max ≥ 1) accepted through it at once; trusted peers are not bounded.
// refused, when not nil, is called once for each connection closed for
// being over the bound.
func New(ln net.Listener, max int, trusted []netip.Prefix, refused func()) *Listener {
	return &Listener{Listener: ln, max: max, trusted: trusted, refused: refused, open: map[netip.Addr]int{}}
}

// Accept waits for and returns the next connection within the bound;
// connections over it are closed and not returned. Errors are the
// wrapped listener's.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		key, ok := l.key(c.RemoteAddr())
		if !ok {
			return c, nil
		}
		l.mu.Lock()
		n := l.open[key]
		if n >= l.max {
			l.mu.Unlock()
			// Counted before the close, so that whoever sees the
			// connection end also sees it counted.
			if l.refused != nil {
				l.refused()
			}
			_ = c.Close()
			continue
		}
		l.open[key] = n + 1
		l.mu.Unlock()
		return &conn{Conn: c, l: l, key: key}, nil
	}
}

// Open is the number of connections key's address holds open (for tests
// and metrics).
func (l *Listener) Open(addr netip.Addr) int {
	key, _ := l.keyOf(addr)
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open[key]
}

// key is the counting key of a peer, ok false when it is not bounded (a
// trusted proxy, or not an IP peer).
func (l *Listener) key(a net.Addr) (netip.Addr, bool) {
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return netip.Addr{}, false
	}
	return l.keyOf(ap.Addr())
}

func (l *Listener) keyOf(addr netip.Addr) (netip.Addr, bool) {
	addr = addr.Unmap()
	for _, p := range l.trusted {
		if p.Contains(addr) {
			return netip.Addr{}, false
		}
	}
	if addr.Is6() {
		p, _ := addr.Prefix(64)
		return p.Addr(), true
	}
	return addr, true
}

func (l *Listener) release(key netip.Addr) {
	l.mu.Lock()
	if n := l.open[key]; n <= 1 {
		delete(l.open, key)
	} else {
		l.open[key] = n - 1
	}
	l.mu.Unlock()
}

// conn gives its address's place back once, at its first Close.
type conn struct {
	net.Conn
	l    *Listener
	key  netip.Addr
	once sync.Once
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c.key) })
	return err
}
