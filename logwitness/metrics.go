package logwitness

import (
	"context"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

var (
	descCosignedSize = prometheus.NewDesc("acrelay_log_witness_cosigned_size",
		"Tree size of the latest checkpoint an external witness (--log-witness) cosigned for a project's log, as stored.",
		[]string{"project_id", "witness"}, nil)
	descCosignedAt = prometheus.NewDesc("acrelay_log_witness_cosigned_timestamp_seconds",
		"When the latest cosignature of an external witness on a project's checkpoint was received (Unix seconds; absent before the first).",
		[]string{"project_id", "witness"}, nil)
	descFailing = prometheus.NewDesc("acrelay_log_witness_failing",
		"1 while the last submission of a project's checkpoint to an external witness failed (see `acrelay log witnesses` for the error), else 0.",
		[]string{"project_id", "witness"}, nil)
	descSplitViews = prometheus.NewDesc("acrelay_log_witness_split_views",
		"Checkpoints of this relay's logs that a configured external witness refused as inconsistent with one it cosigned (422), kept as evidence: a split view of our own log, or a witness fault.",
		[]string{"witness"}, nil)
)

// Metrics is the witnesses' figures on /metrics: the stored states (read
// at scrape time, so every process reports the same), the evidence, and
// this process's requests by result.
type Metrics struct {
	st        Store
	witnesses []Witness
	Requests  *prometheus.CounterVec
}

// NewMetrics returns the collector of st's states for witnesses; its
// Requests counter (acrelay_log_witness_requests_total) is fed by
// Options.OnSubmit (Metrics.Observe).
func NewMetrics(st Store, witnesses []Witness) *Metrics {
	return &Metrics{st: st, witnesses: witnesses, Requests: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "acrelay_log_witness_requests_total",
		Help: "add-checkpoint requests this process sent to external witnesses, by witness and result (cosigned, conflict, refused_inconsistent, error).",
	}, []string{"witness", "result"})}
}

// Observe counts one request (Options.OnSubmit).
func (m *Metrics) Observe(witness, result string) { m.Requests.WithLabelValues(witness, result).Inc() }

var _ prometheus.Collector = (*Metrics)(nil)

// Describe is prometheus.Collector's.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- descCosignedSize
	ch <- descCosignedAt
	ch <- descFailing
	ch <- descSplitViews
	m.Requests.Describe(ch)
}

// Collect is prometheus.Collector's.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.Requests.Collect(ch)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	names := map[string]string{}
	for _, w := range m.witnesses {
		names[w.VerifierKey] = w.Name
	}
	states, err := m.st.LogWitnessStates(ctx, "")
	if err != nil {
		ch <- prometheus.NewInvalidMetric(descCosignedSize, err)
	} else {
		for _, s := range states {
			name, ok := names[s.Witness]
			if !ok {
				continue // a witness no longer configured
			}
			ch <- prometheus.MustNewConstMetric(descCosignedSize, prometheus.GaugeValue, float64(s.CosignedSize), s.ProjectID, name)
			if !s.CosignedAt.IsZero() {
				ch <- prometheus.MustNewConstMetric(descCosignedAt, prometheus.GaugeValue, float64(s.CosignedAt.UnixMilli())/1000, s.ProjectID, name)
			}
			failing := 0.0
			if s.LastError != "" {
				failing = 1
			}
			ch <- prometheus.MustNewConstMetric(descFailing, prometheus.GaugeValue, failing, s.ProjectID, name)
		}
	}
	views, err := m.st.SplitViews(ctx, "")
	if err != nil {
		ch <- prometheus.NewInvalidMetric(descSplitViews, err)
		return
	}
	count := map[string]int{}
	for _, w := range m.witnesses {
		count[w.Name] = 0
	}
	for _, v := range views {
		if name, ok := strings.CutPrefix(v.PeerID, PeerPrefix); ok {
			if _, configured := count[name]; configured {
				count[name]++
			}
		}
	}
	for name, n := range count {
		ch <- prometheus.MustNewConstMetric(descSplitViews, prometheus.GaugeValue, float64(n), name)
	}
}
