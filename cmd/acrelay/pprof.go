package main

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// servePprof serves the runtime profiles on their own listener, never on
// the relay's: profiles reveal timing and memory of every project.
// ln is bound by serve before anything starts. It serves until ctx ends;
// errors: the listener's (serveHTTP).
func servePprof(ctx context.Context, ln net.Listener, logger *slog.Logger) error {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	logger.Info("pprof listening", "addr", ln.Addr().String())
	return serveHTTP(ctx, srv, ln, 5*time.Second, logger)
}
