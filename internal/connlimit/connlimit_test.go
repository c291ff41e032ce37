package connlimit_test

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acrelay/acrelay/internal/connlimit"
)

// accepted reads what the listener's Accept returns, on real loopback TCP.
func serve(t *testing.T, l *connlimit.Listener) <-chan net.Conn {
	t.Helper()
	out := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				close(out)
				return
			}
			out <- c
		}
	}()
	t.Cleanup(func() { l.Close() })
	return out
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestBound: the third connection of one address is closed by the
// listener (the client reads EOF at once) and counted; after one of the
// two is closed, a new one is accepted again.
func TestBound(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var refused atomic.Int64
	l := connlimit.New(ln, 2, nil, func() { refused.Add(1) })
	acc := serve(t, l)
	addr := ln.Addr().String()
	dial(t, addr)
	dial(t, addr)
	s1, s2 := <-acc, <-acc
	if got := l.Open(netip.MustParseAddr("127.0.0.1")); got != 2 {
		t.Fatalf("open %d, want 2", got)
	}
	over := dial(t, addr)
	_ = over.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := over.Read(make([]byte, 1)); !errors.Is(err, io.EOF) && !isReset(err) {
		t.Fatalf("over the bound: read %v, want EOF or reset", err)
	}
	if got := refused.Load(); got != 1 {
		t.Fatalf("refused %d, want 1", got)
	}
	_ = s1.Close()
	_ = s1.Close() // a second Close gives nothing back twice
	if got := l.Open(netip.MustParseAddr("127.0.0.1")); got != 1 {
		t.Fatalf("open after a close %d, want 1", got)
	}
	dial(t, addr)
	select {
	case c := <-acc:
		_ = c.Close()
	case <-time.After(10 * time.Second):
		t.Fatal("a connection within the bound was not accepted")
	}
	_ = s2.Close()
	if got := l.Open(netip.MustParseAddr("127.0.0.1")); got != 0 {
		t.Fatalf("open at the end %d, want 0", got)
	}
}

// TestTrusted: a trusted proxy's connections are not bounded.
func TestTrusted(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := connlimit.New(ln, 1, []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, nil)
	acc := serve(t, l)
	for range 3 {
		dial(t, ln.Addr().String())
		select {
		case <-acc:
		case <-time.After(10 * time.Second):
			t.Fatal("a trusted peer's connection was not accepted")
		}
	}
}

func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op)
}
