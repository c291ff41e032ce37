package storetest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/store"
)

// BenchAppend measures Append throughput of one store with the given
// number of concurrent clients spread over projects projects (client i
// appends to project i mod projects), b.N events in all, signed before the
// timer starts. It reports events/s. Dialect packages call it from their
// benchmarks so the figures compare like with like.
func BenchAppend(b *testing.B, s store.Store, clients, projects int) {
	bctx := context.Background()
	signers := make([]*Signer, projects)
	for i := range signers {
		p, err := s.CreateProject(bctx, NewUUID())
		if err != nil {
			b.Fatal(err)
		}
		signers[i] = NewSigner(b, p.ID).Register(b, s)
	}
	type ev struct {
		e *correspondence.Event
		c []byte
	}
	queues := make([][]ev, clients)
	for i := range b.N {
		c := i % clients
		e, canonical := signers[c%projects].Event(b, Spec{Summary: fmt.Sprintf("bench %d", i)})
		queues[c] = append(queues[c], ev{e, canonical})
	}
	var failed atomic.Bool
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			for _, x := range queues[c] {
				if _, err := s.Append(bctx, x.e, x.c); err != nil {
					if !failed.Swap(true) {
						b.Error(err)
					}
					return
				}
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "events/s")
}
