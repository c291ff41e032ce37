package federation

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/acrelay/acrelay/store"
)

// descRefused, one of the two metrics a Manager collects, counts the refused foreign
// records the store keeps (so every process reports the same numbers, and
// a restart loses none), by reason and finality.
var descRefused = prometheus.NewDesc("acrelay_federation_refused_records",
	"Foreign records refused by this relay's peer links and kept, by stable reason code and whether the refusal is final (false: it may pass and is retried).",
	[]string{"reason", "final"}, nil)

// descSplitViews counts the split-view evidence the store keeps
// (witness.go): link "stopped" for a link still configured (it mirrors
// nothing until removed), "removed" for one the operator removed since.
var descSplitViews = prometheus.NewDesc("acrelay_federation_split_views",
	"Split views a peer link saw (two checkpoints of the remote's log that cannot both hold), kept as evidence; link=stopped while the link is still configured (it mirrors nothing more), removed after.",
	[]string{"link"}, nil)

var _ prometheus.Collector = (*Manager)(nil)

// Describe is prometheus.Collector's.
func (m *Manager) Describe(ch chan<- *prometheus.Desc) {
	ch <- descRefused
	ch <- descSplitViews
}

// Collect reads the kept refusals of every link (store.Refusals) at
// scrape time.
func (m *Manager) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	sum, err := m.st.SummarizeRefusals(ctx, "", "")
	if err != nil {
		ch <- prometheus.NewInvalidMetric(descRefused, err)
	} else {
		for _, c := range sum.Counts {
			ch <- prometheus.MustNewConstMetric(descRefused, prometheus.GaugeValue, float64(c.Count), c.Reason, strconv.FormatBool(c.Final))
		}
	}
	views, err := m.st.SplitViews(ctx, "")
	if err != nil {
		ch <- prometheus.NewInvalidMetric(descSplitViews, err)
		return
	}
	stopped, removed := 0, 0
	for _, v := range views {
		if strings.HasPrefix(v.PeerID, store.LogWitnessPeerPrefix) {
			continue // an external witness's, not a link's (acrelay_log_witness_split_views)
		}
		if v.LinkRemoved {
			removed++
		} else {
			stopped++
		}
	}
	ch <- prometheus.MustNewConstMetric(descSplitViews, prometheus.GaugeValue, float64(stopped), "stopped")
	ch <- prometheus.MustNewConstMetric(descSplitViews, prometheus.GaugeValue, float64(removed), "removed")
}
