package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/acrelay/acrelay/lease"
)

// parts runs serve's long-lived parts — couriers, the hub, peer links,
// jobs under relay-wide leases, listeners — each a Run(ctx) error, until
// ctx ends or one of them fails. A failure ends the others and is what
// wait returns, named after its part: the relay never runs on with a part
// missing. A part that ends without an error before ctx is simply done.
type parts struct {
	g   *errgroup.Group
	ctx context.Context
}

func newParts(ctx context.Context) *parts {
	g, gctx := errgroup.WithContext(ctx)
	return &parts{g: g, ctx: gctx}
}

// run starts one part. The error a part returns because the parts' ctx
// ended (its Err or its cause: the signal, another part's failure) is its
// stop, not a failure.
func (p *parts) run(name string, run func(context.Context) error) {
	p.g.Go(func() error {
		err := run(p.ctx)
		if err == nil || ctxEnded(p.ctx, err) {
			return nil
		}
		return fmt.Errorf("%s: %w", name, err)
	})
}

// alone starts a part that runs work on one process of the relay at a
// time, under the relay-wide lease job: lease.Single.RunDo, which logs
// work's errors and runs it again while this process holds the lease, and
// returns when ctx ends.
func (p *parts) alone(job *lease.Single, work func(context.Context) error) {
	p.g.Go(func() error {
		job.RunDo(p.ctx, work)
		return nil
	})
}

// wait waits for every part to return, and returns the first failure.
func (p *parts) wait() error { return p.g.Wait() }

// ctxEnded reports whether err is ctx's ending rather than a failure.
func ctxEnded(ctx context.Context, err error) bool {
	return ctx.Err() != nil && (errors.Is(err, ctx.Err()) || errors.Is(err, context.Cause(ctx)))
}

// serveHTTP serves hs on ln until ctx ends, then shuts it down, giving
// requests in flight grace to finish (a shutdown cut short is logged, not
// a failure). It returns Serve's error when serving stops before ctx ends
// (an accept that failed); nil after a shutdown.
func serveHTTP(ctx context.Context, hs *http.Server, ln net.Listener, grace time.Duration, logger *slog.Logger) error {
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }() // waited for on every return
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		logger.Warn("shutdown", "addr", ln.Addr().String(), "err", err)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
