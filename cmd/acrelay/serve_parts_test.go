package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestPartsFailureEndsTheOthers: one part failing ends every other part's
// context, and wait returns that failure named after its part; the others'
// context errors are their stop, not failures.
func TestPartsFailureEndsTheOthers(t *testing.T) {
	errBroken := errors.New("broken")
	p := newParts(context.Background())
	stoppedWith := make(chan error, 2)
	for _, name := range []string{"courier", "hub"} {
		p.run(name, func(ctx context.Context) error {
			<-ctx.Done()
			stoppedWith <- context.Cause(ctx)
			return context.Cause(ctx) // as federation.Manager.Run does
		})
	}
	p.run("federation", func(context.Context) error { return errBroken })
	err := p.wait()
	if !errors.Is(err, errBroken) || err.Error() != "federation: broken" {
		t.Fatalf("wait = %v, want federation: broken", err)
	}
	for range 2 {
		if c := <-stoppedWith; !errors.Is(c, errBroken) {
			t.Errorf("another part stopped with cause %v, want the failure", c)
		}
	}
}

// TestPartsStopIsNoFailure: when the parent context ends, with or without
// a cause, parts returning its error or its cause leave wait nil; a part
// that returns a different error after the end is still reported.
func TestPartsStopIsNoFailure(t *testing.T) {
	errSignal := errors.New("interrupt signal received")
	for _, tc := range []struct {
		name   string
		cancel func(context.CancelCauseFunc)
		ret    func(ctx context.Context) error
		want   string
	}{
		{"canceled, returns Err", func(c context.CancelCauseFunc) { c(nil) }, func(ctx context.Context) error { return ctx.Err() }, ""},
		{"signal cause, returns the cause", func(c context.CancelCauseFunc) { c(errSignal) }, context.Cause, ""},
		{"signal cause, returns Err", func(c context.CancelCauseFunc) { c(errSignal) }, func(ctx context.Context) error { return ctx.Err() }, ""},
		{"returns nil", func(c context.CancelCauseFunc) { c(nil) }, func(context.Context) error { return nil }, ""},
		{"fails while stopping", func(c context.CancelCauseFunc) { c(nil) },
			func(context.Context) error { return errors.New("flush failed") }, "sequencer: flush failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parent, cancel := context.WithCancelCause(context.Background())
			p := newParts(parent)
			p.run("sequencer", func(ctx context.Context) error {
				<-ctx.Done()
				return tc.ret(ctx)
			})
			tc.cancel(cancel)
			got := ""
			if err := p.wait(); err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Fatalf("wait = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestServeHTTP: a server serves until ctx ends and then shuts down (nil);
// one whose listener fails returns the accept error at once.
func TestServeHTTP(t *testing.T) {
	logger := slog.New(slog.DiscardHandler)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "up") })}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serveHTTP(ctx, hs, ln, time.Second, logger) }()
	resp, err := http.Get("http://" + ln.Addr().String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "up" {
		t.Fatalf("GET = %d %q, want 200 up", resp.StatusCode, body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("after ctx ended: %v, want nil", err)
	}
	if _, err := http.Get("http://" + ln.Addr().String() + "/"); err == nil {
		t.Fatal("the server still answers after its shutdown")
	}

	// A listener closed under the server: Serve fails, and so does serveHTTP.
	ln2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln2.Close()
	err = serveHTTP(context.Background(), &http.Server{}, ln2, time.Second, logger)
	if !errors.Is(err, net.ErrClosed) {
		t.Fatalf("closed listener: %v, want net.ErrClosed", err)
	}
}
