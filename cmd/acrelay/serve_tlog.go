package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/acrelay/acrelay/lease"
	"github.com/acrelay/acrelay/sequencer"
	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/tlog"
)

// The verifiable log (issue 24, spec tlog.md): the relay's log key, the
// sequencer that writes each project's tree, and `acrelay log-key show`.

// sequencerLease is the relay-wide lease (lease.Single) under which one
// process at a time integrates the trees.
const sequencerLease = "tlog-sequencer"

// openLogKey returns the relay's log key, created (named after the public
// URL's host and path, tlog.KeyName) and stored on the first start.
func openLogKey(ctx context.Context, st store.Tree, public string) (tlog.LogKey, error) {
	skey, err := st.LogKey(ctx, func() (string, error) {
		skey, _, err := tlog.NewLogKey(tlog.KeyName(public))
		return skey, err
	})
	if err != nil {
		return tlog.LogKey{}, fmt.Errorf("log key: %w", err)
	}
	return tlog.OpenLogKey(skey)
}

// sequencerStore is what the sequencer and its lease use.
type sequencerStore interface {
	sequencer.Store
	lease.Store
}

// tlogMetrics are the sequencer's figures on /metrics.
type tlogMetrics struct {
	lag    prometheus.Histogram
	leaves prometheus.Counter
}

func newTLogMetrics(reg prometheus.Registerer) *tlogMetrics {
	m := &tlogMetrics{
		lag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "acrelay_tlog_checkpoint_lag_seconds",
			Help:    "Time from a record's receipt to the commit of the checkpoint covering it (verifiable log).",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}),
		leaves: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "acrelay_tlog_leaves_integrated_total",
			Help: "Records integrated into the projects' verifiable-log trees by this process.",
		}),
	}
	reg.MustRegister(m.lag, m.leaves)
	return m
}

func (m *tlogMetrics) observe(_ string, n int, lags []time.Duration) {
	m.leaves.Add(float64(n))
	for _, l := range lags {
		m.lag.Observe(l.Seconds())
	}
}

// runSequencer keeps the relay-wide lease sequencerLease until ctx ends
// and, while this process holds it, runs the sequencer: with several
// processes on one database, one integrates at a time, and another takes
// over within a lease length when it stops (a sequencer that lost the
// lease is fenced by the tree's size: store.ErrConflict).
func runSequencer(ctx context.Context, st sequencerStore, key tlog.LogKey, public string, holder *lease.Identity, ttl time.Duration,
	onIntegrate func(string, int, []time.Duration), logger *slog.Logger) {
	seq := sequencer.New(st, sequencer.Options{PublicURL: public, Key: key, Logger: logger, OnIntegrate: onIntegrate})
	job := lease.NewSingle(st, lease.Options{Name: sequencerLease, Holder: holder, TTL: ttl, Logger: logger})
	job.RunDo(ctx, seq.Run)
}

// errNoLogKey: log-key show found a store without a log key.
var errNoLogKey = errors.New("this store has no log key yet: `acrelay serve` creates it at its first start")

func newLogKeyCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "log-key",
		Short: "The relay's verifiable-log key (signs each project's checkpoints)",
	}
	var sc storeConfig
	show := &cobra.Command{
		Use:   "show",
		Short: "Print the log key's verifier key (name+hash+key), which readers use to check checkpoints",
		Example: `  acrelay log-key show
  acrelay log-key show --database-url postgres://acrelay@db/acrelay`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			st, err := openStore(ctx, sc, slog.New(slog.DiscardHandler))
			if err != nil {
				return err
			}
			defer st.Close()
			skey, err := st.LogKey(ctx, func() (string, error) { return "", errNoLogKey })
			if err != nil {
				return err
			}
			k, err := tlog.OpenLogKey(skey)
			if err != nil {
				return fmt.Errorf("stored log key: %w", err)
			}
			fmt.Fprintln(cmd.OutOrStdout(), k.VerifierKey)
			return nil
		},
	}
	addStoreFlags(show, &sc)
	cmd.AddCommand(show)
	return cmd
}

func init() { rootCmd.AddCommand(newLogKeyCmd()) }
