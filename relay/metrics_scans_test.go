package relay_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/acrelay/acrelay/relay"
	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/sqlite"
	"github.com/acrelay/acrelay/store/storetest"
)

// subscriptionReads counts the store reads a scrape may make of the
// WebSub subscriptions.
type subscriptionReads struct {
	store.Store
	mu    sync.Mutex
	calls map[string]int
}

func (c *subscriptionReads) count(m string) {
	c.mu.Lock()
	c.calls[m]++
	c.mu.Unlock()
}

func (c *subscriptionReads) Subscriptions(ctx context.Context, pid string) ([]store.Subscription, error) {
	c.count("Subscriptions")
	return c.Store.Subscriptions(ctx, pid)
}

func (c *subscriptionReads) SubscribedProjects(ctx context.Context) ([]string, error) {
	c.count("SubscribedProjects")
	return c.Store.SubscribedProjects(ctx)
}

func (c *subscriptionReads) CountSubscriptionStates(ctx context.Context) (map[string]int, error) {
	c.count("CountSubscriptionStates")
	return c.Store.CountSubscriptionStates(ctx)
}

// TestMetricsSubscriptionsGaugeIsOneQuery: acrelay_websub_subscriptions
// over 30 projects is one counting query per scrape (it was one list per
// project), with exact counts by state; ended leases are not counted.
func TestMetricsSubscriptionsGaugeIsOneQuery(t *testing.T) {
	db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "acrelay.db"), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	st := &subscriptionReads{Store: db, calls: map[string]int{}}
	ctx := context.Background()
	for i := range 30 {
		p, err := db.CreateProject(ctx, storetest.NewUUID())
		if err != nil {
			t.Fatal(err)
		}
		for j, lease := range []int64{3600, 0} { // the second has ended
			v := store.Verification{ID: storetest.NewUUID(), ProjectID: p.ID, Mode: "subscribe", Topic: "https://relay.test/t/" + p.ID,
				RepositoryID: "repo-a", Format: "atom", Callback: "https://cb.example/" + strconv.Itoa(j), LeaseSeconds: lease}
			sub, err := db.ActivateSubscription(ctx, v, storetest.NewUUID())
			if err != nil {
				t.Fatal(err)
			}
			if i < 4 && j == 0 {
				if err := db.SetSubscriptionState(ctx, p.ID, sub.ID, store.SubscriptionFailing); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	reg := prometheus.NewRegistry()
	m := relay.NewMetrics(reg)
	h := relay.New(st, relay.Config{OperatorToken: operatorToken, PublicURL: "http://relay.test",
		Metrics: m, MetricsHandler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{})})
	srv := httptest.NewServer(h.Handler())
	t.Cleanup(srv.Close)

	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+operatorToken)
	res, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d", res.StatusCode)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mt := range fams["acrelay_websub_subscriptions"].GetMetric() {
		got[mt.GetLabel()[0].GetValue()] = mt.GetGauge().GetValue()
	}
	if want := map[string]float64{store.SubscriptionActive: 26, store.SubscriptionFailing: 4}; !maps.Equal(got, want) {
		t.Fatalf("acrelay_websub_subscriptions = %v, want %v", got, want)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if want := map[string]int{"CountSubscriptionStates": 1}; !maps.Equal(st.calls, want) {
		t.Fatalf("subscription reads of one scrape = %v, want %v", st.calls, want)
	}
}
