package logwitness_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/acrelay/acrelay/logwitness"
	"github.com/acrelay/acrelay/store/storetest"
)

// BenchmarkIngestWitnessing measures appends per second to one public
// project with the sequencer running (as `serve` runs it), without and
// with a Submitter sending its checkpoints to a witness (another relay's
// add-checkpoint, which cosigns them), at a tenth of the default
// interval (1 s) so its cost is ten times what an operator pays:
//
//	go test -run '^$' -bench IngestWitnessing -benchtime 3000x -count 5 ./logwitness
func BenchmarkIngestWitnessing(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := "off"
		if on {
			name = "on"
		}
		b.Run(name, func(b *testing.B) {
			l := newLog(b)
			ws := newWitnessServer(b, l.origin(), l.key.Verifier)
			const clients = 4
			signers := make([]*storetest.Signer, clients)
			for i := range signers {
				signers[i] = storetest.NewSigner(b, l.pid).Register(b, l.st)
			}
			bg, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			wg.Go(func() { _ = l.seq.Run(bg) })
			var sub *logwitness.Submitter
			if on {
				sub = logwitness.New(l.st, logwitness.Options{Witnesses: []logwitness.Witness{ws.w}, LogVerifier: l.key.Verifier, Interval: time.Second})
				wg.Go(func() { _ = sub.Run(bg) })
			}
			defer func() { cancel(); wg.Wait() }()
			b.ResetTimer()
			start := time.Now()
			var appends sync.WaitGroup
			for i := range clients {
				appends.Go(func() {
					for range b.N / clients {
						ev, c := signers[i].Event(b, storetest.Spec{})
						if _, err := l.st.Append(context.Background(), ev, c); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			appends.Wait()
			el := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(b.N/clients*clients)/el.Seconds(), "appends/s")
			if on {
				b.ReportMetric(float64(len(ws.requests())), "witness-requests")
			}
		})
	}
}
