package matrix_test

import (
	"context"
	"testing"
	"time"

	"github.com/acrelay/acrelay/couriers"
	"github.com/acrelay/acrelay/couriers/matrix"
)

// TestMatrixCourierSettlesFromStart: the settle before a courier's first
// reconciliation counts from the process's start (Courier.Started), not
// from its first delivery. A process started a minute ago that takes a
// room's lease now (as a survivor does once a dead holder's lease lapsed)
// delivers at once with a one-minute SettleDelay; counting from its first
// delivery it would wait that minute.
func TestMatrixCourierSettlesFromStart(t *testing.T) {
	e := newEnv(t)
	e.bind()
	ids := e.appendN(3)
	c := &matrix.Courier{Store: e.st, Client: e.client(), PublicURL: "http://relay.test", Host: "hs",
		SettleDelay: time.Minute, Started: time.Now().Add(-time.Minute)}
	r := couriers.NewRunner(e.st, c, couriers.Options{Holder: "survivor", LeaseTTL: 3 * time.Second,
		Backoff: couriers.Backoff{Initial: 100 * time.Millisecond, Max: 2 * time.Second}, DeliveryTimeout: 5 * time.Second, Refresh: time.Second})
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = r.Run(rctx); close(done) }()
	defer func() { cancel(); <-done }()
	e.verifyRoom(ids, 20*time.Second)
}
