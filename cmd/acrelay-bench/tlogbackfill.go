package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/acrelay/acrelay/sequencer"
	"github.com/acrelay/acrelay/store/sqlite"
	acrtlog "github.com/acrelay/acrelay/tlog"
)

func init() { rootCmd.AddCommand(newTLogBackfillCmd()) }

type tlogBackfillConfig struct {
	Records int
	Sample  time.Duration
	JSON    bool
}

// tlogBackfillResult is the figure of an existing store's tree being
// built: the time the sequencer takes from its start to a checkpoint of
// every record, and the Go heap while it does.
type tlogBackfillResult struct {
	Records       int     `json:"records"`
	SeedSeconds   float64 `json:"seed_seconds"`
	Seconds       float64 `json:"integrate_seconds"`
	PerRecordUs   float64 `json:"integrate_us_per_record"`
	Steps         int     `json:"steps"`
	HeapBeforeMiB float64 `json:"heap_before_mib"`
	HeapPeakMiB   float64 `json:"heap_peak_mib"`
	GoPeakMiB     float64 `json:"go_total_peak_mib"`
	Samples       int     `json:"samples"`
}

func newTLogBackfillCmd() *cobra.Command {
	var c tlogBackfillConfig
	cmd := &cobra.Command{
		Use:   "tlog-backfill",
		Short: "Verifiable log of an existing store: time and Go heap of the sequencer integrating N stored records from size 0",
		Long: `tlog-backfill seeds one project of a fresh SQLite store (a temporary
directory) with --records signed records through the store's page append
(AppendPageAt, pages of 1000) with no sequencer running, as a store
written before the log existed; then collects garbage, starts the
sequencer (sequencer.Run, default options, in this process) and reports
the time from its start to the step that integrates the last record, the
number of steps, and the Go heap sampled every --sample while it runs:
live heap objects (runtime/metrics /memory/classes/heap/objects:bytes)
before the start and at their peak, and the peak of all memory the Go
runtime mapped (/memory/classes/total:bytes). The SQLite driver's page
cache is outside the Go heap.`,
		Example: `  acrelay-bench tlog-backfill --records 1000000`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := runTLogBackfill(cmd.Context(), c, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if c.JSON {
				return json.NewEncoder(out).Encode(r)
			}
			fmt.Fprintf(out, "tlog-backfill sqlite, %d records (seeded in %.1f s)\n", r.Records, r.SeedSeconds)
			fmt.Fprintf(out, "integrated from size 0 in %.1f s (%.1f µs/record, %d steps)\n", r.Seconds, r.PerRecordUs, r.Steps)
			fmt.Fprintf(out, "Go heap objects: %.1f MiB before, peak %.1f MiB while integrating; Go runtime total peak %.1f MiB (%d samples)\n",
				r.HeapBeforeMiB, r.HeapPeakMiB, r.GoPeakMiB, r.Samples)
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&c.Records, "records", 1000000, "records stored before the sequencer starts")
	f.DurationVar(&c.Sample, "sample", 5*time.Millisecond, "how often the Go heap is read while the sequencer runs")
	f.BoolVar(&c.JSON, "json", false, "print the result as JSON")
	return cmd
}

func runTLogBackfill(ctx context.Context, c tlogBackfillConfig, progress io.Writer) (tlogBackfillResult, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	res := tlogBackfillResult{Records: c.Records}
	if c.Records < 1 || c.Sample <= 0 {
		return res, fmt.Errorf("--records must be ≥ 1 and --sample > 0")
	}
	dir, err := os.MkdirTemp("", "acrelay-tlog-backfill-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	st, err := sqlite.Open(ctx, filepath.Join(dir, "acrelay.db"), slog.New(slog.DiscardHandler))
	if err != nil {
		return res, err
	}
	defer st.Close()
	t0 := time.Now()
	proj, _, err := seedBenchLog(ctx, st, c.Records, 1000, progress)
	if err != nil {
		return res, err
	}
	res.SeedSeconds = time.Since(t0).Seconds()

	skey, _, err := acrtlog.NewLogKey("bench.test")
	if err != nil {
		return res, err
	}
	lk, err := acrtlog.OpenLogKey(skey)
	if err != nil {
		return res, err
	}
	var integrated atomic.Int64
	var steps atomic.Int64
	done := make(chan time.Time, 1)
	seq := sequencer.New(st, sequencer.Options{PublicURL: "http://127.0.0.1", Key: lk,
		OnIntegrate: func(p string, leaves int, _ []time.Duration) {
			steps.Add(1)
			if p == proj && integrated.Add(int64(leaves)) == int64(c.Records) {
				done <- time.Now()
			}
		}})

	samples := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/total:bytes"}}
	runtime.GC()
	metrics.Read(samples)
	res.HeapBeforeMiB = mib(samples[0].Value.Uint64())
	var heapPeak, totalPeak uint64

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	runErr := make(chan error, 1)
	start := time.Now()
	go func() { runErr <- seq.Run(runCtx) }()
	tick := time.NewTicker(c.Sample)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case err := <-runErr:
			return res, fmt.Errorf("sequencer stopped after %d of %d records: %v", integrated.Load(), c.Records, err)
		case end := <-done:
			cancel()
			<-runErr
			res.Seconds = end.Sub(start).Seconds()
			res.PerRecordUs = res.Seconds * 1e6 / float64(c.Records)
			res.Steps = int(steps.Load())
			res.HeapPeakMiB, res.GoPeakMiB = mib(heapPeak), mib(totalPeak)
			head, err := st.TreeHead(ctx, proj)
			if err != nil {
				return res, err
			}
			if head.Size != int64(c.Records) {
				return res, fmt.Errorf("tree head at %d of %d records", head.Size, c.Records)
			}
			return res, nil
		case <-tick.C:
			metrics.Read(samples)
			heapPeak = max(heapPeak, samples[0].Value.Uint64())
			totalPeak = max(totalPeak, samples[1].Value.Uint64())
			res.Samples++
			if res.Samples%int(max(1, 10*time.Second/c.Sample)) == 0 {
				fmt.Fprintf(progress, "integrated %d/%d, heap %.1f MiB\n", integrated.Load(), c.Records, mib(samples[0].Value.Uint64()))
			}
		}
	}
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }
