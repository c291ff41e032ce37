package main

import (
	"fmt"
	"net"
)

// serveListeners are serve's own listeners (the Matrix appservice
// listener is bound by openMatrix). Every one is bound before serve
// starts anything.
type serveListeners struct {
	main    net.Listener // --addr
	pprof   net.Listener // --pprof-addr; nil when off
	metrics net.Listener // --metrics-addr; nil when off
}

// bindListeners binds the main, pprof and metrics listeners, in that
// order; on an error it closes those already bound.
func bindListeners(cfg serveConfig) (_ *serveListeners, err error) {
	l := &serveListeners{}
	defer func() {
		if err != nil {
			l.Close()
		}
	}()
	if l.main, err = listen("--addr", "ACRELAY_ADDR", cfg.Addr); err != nil {
		return nil, err
	}
	if cfg.PprofAddr != "" {
		if l.pprof, err = listen("--pprof-addr", "ACRELAY_PPROF_ADDR", cfg.PprofAddr); err != nil {
			return nil, err
		}
	}
	if cfg.MetricsAddr != "" {
		if l.metrics, err = listen("--metrics-addr", "ACRELAY_METRICS_ADDR", cfg.MetricsAddr); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// Close closes every listener bound.
func (l *serveListeners) Close() {
	for _, ln := range []net.Listener{l.metrics, l.pprof, l.main} {
		if ln != nil {
			_ = ln.Close()
		}
	}
}

// listen binds one of serve's listeners. Every listener is bound before
// serve starts anything, and one that cannot bind ends serve with an
// error naming the flag, its environment variable and the address: a
// relay never runs with a listener missing (issue 25: the appservice
// listener used to log and go on, leaving the relay deaf to Matrix).
func listen(flag, env, addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s (%s) %s: cannot listen: %w", flag, env, addr, err)
	}
	return ln, nil
}
