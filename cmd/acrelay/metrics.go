package main

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/acrelay/acrelay/couriers"
)

// metricsHandler serves reg in the Prometheus text format; a failing
// collector is logged and left out of the answer rather than failing the
// whole scrape.
func metricsHandler(reg *prometheus.Registry, logger *slog.Logger) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorHandling: promhttp.ContinueOnError,
		ErrorLog:      slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	})
}

// serveMetrics serves /metrics, with no token, on ln (--metrics-addr: a
// private interface the scraper reaches) until ctx ends. Errors: the
// listener's (serveHTTP).
func serveMetrics(ctx context.Context, ln net.Listener, h http.Handler, logger *slog.Logger) error {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", h)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: 120 * time.Second}
	logger.Info("metrics listening", "addr", ln.Addr().String())
	return serveHTTP(ctx, srv, ln, 5*time.Second, logger)
}

// courierStatuses returns the Status of each runner, in order.
func courierStatuses(runners []*couriers.Runner) func() []couriers.Status {
	return func() []couriers.Status {
		out := make([]couriers.Status, 0, len(runners))
		for _, r := range runners {
			out = append(out, r.Status())
		}
		return out
	}
}
