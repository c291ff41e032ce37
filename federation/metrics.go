package federation

import (
	"context"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// descRefused is the one metric a Manager collects: the refused foreign
// records the store keeps (so every process reports the same numbers, and
// a restart loses none), by reason and finality.
var descRefused = prometheus.NewDesc("acrelay_federation_refused_records",
	"Foreign records refused by this relay's peer links and kept, by stable reason code and whether the refusal is final (false: it may pass and is retried).",
	[]string{"reason", "final"}, nil)

var _ prometheus.Collector = (*Manager)(nil)

// Describe is prometheus.Collector's.
func (m *Manager) Describe(ch chan<- *prometheus.Desc) { ch <- descRefused }

// Collect reads the kept refusals of every link (store.Refusals) at
// scrape time.
func (m *Manager) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	sum, err := m.st.SummarizeRefusals(ctx, "", "")
	if err != nil {
		ch <- prometheus.NewInvalidMetric(descRefused, err)
		return
	}
	for _, c := range sum.Counts {
		ch <- prometheus.MustNewConstMetric(descRefused, prometheus.GaugeValue, float64(c.Count), c.Reason, strconv.FormatBool(c.Final))
	}
}
