package main

import (
	"context"
	"github.com/acrelay/acrelay/couriers"
	"log/slog"
	"testing"
	"time"
)

// TestOpenMatrixRunner: with the courier on, openMatrix hands runServe
// the Matrix runner, whose Status names the courier (for readiness);
// with it off, none.
func TestOpenMatrixRunner(t *testing.T) {
	ctx := context.Background()
	st, err := openStore(ctx, storeConfig{DataDir: t.TempDir(), Create: true, SQLiteMaxBatch: 128, SQLiteSync: "fdatasync"}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	off, err := openMatrix(ctx, matrixConfig{}, st, "http://relay.test", couriers.Options{Holder: "h", LeaseTTL: time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil || off.Runner() != nil {
		t.Fatalf("courier off: %v %v", off, err)
	}
	bot := matrixConfig{Homeserver: "http://127.0.0.1:1", UserID: "@bot:example.org", AccessToken: "t"}
	m, err := openMatrix(ctx, bot, st, "http://relay.test", couriers.Options{Holder: "h", LeaseTTL: time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if s := m.Runner().Status(); s.Courier != "matrix" || s.Behind != 0 || s.LastError != "" {
		t.Fatalf("status %+v", s)
	}
}
