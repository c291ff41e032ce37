package relay_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/acrelay/acrelay/couriers"
	"github.com/acrelay/acrelay/relay"
	"github.com/acrelay/acrelay/store/sqlite"
)

// newMetricsEnv is newEnv with metrics: the store observed, the couriers'
// statuses given by status, /metrics on the main listener.
func newMetricsEnv(t *testing.T, status func() []couriers.Status) (*env, *relay.Metrics) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m := relay.NewMetrics(reg)
	m.WatchCouriers(status)
	st, err := sqlite.OpenWith(context.Background(), filepath.Join(t.TempDir(), "acrelay.db"), slog.New(slog.DiscardHandler), sqlite.Options{Observer: m})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	h := relay.New(st, relay.Config{OperatorToken: operatorToken, PublicURL: "http://relay.test",
		Metrics: m, MetricsHandler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), Couriers: status})
	srv := httptest.NewServer(h.Handler())
	t.Cleanup(srv.Close)
	return &env{t: t, st: st, srv: srv, url: srv.URL}, m
}

// TestMetrics scrapes /metrics after traffic and checks named series with
// their exact label sets, and that no label value carries a project id,
// token or request path.
func TestMetrics(t *testing.T) {
	status := func() []couriers.Status {
		return []couriers.Status{{Courier: "websub", Projects: 1, Targets: 2, Behind: 3, Failing: 1, LastError: "callback answered 500"}}
	}
	e, m := newMetricsEnv(t, status)
	pid, tok := e.newProject("")
	a := e.newAgent(pid, tok)
	ev := a.intent("repo-1", "metrics")
	mustStatus(t, e.post(a, ev), http.StatusCreated)
	mustStatus(t, e.post(a, ev), http.StatusOK) // exact retry

	// An event signed with another key: 403 signature_invalid.
	_, other, _ := ed25519.GenerateKey(rand.Reader)
	forger := &agent{ProjectID: pid, IdentityID: a.IdentityID, KeyID: a.KeyID, DeviceID: a.DeviceID, SessionID: a.SessionID, Priv: other, Token: tok}
	r := e.post(forger, forger.intent("repo-1", "forged"))
	mustStatus(t, r, http.StatusForbidden)
	refusal := r.code(t)
	mustStatus(t, e.do("POST", "/v1/correspondence/events", "", eventJSON(t, a.intent("repo-1", "no token"))), http.StatusUnauthorized)
	mustStatus(t, e.do("GET", "/v1/correspondence/events?repository_id=repo-1", tok, nil), http.StatusOK)
	mustStatus(t, e.do("GET", "/no/such/"+pid, "", nil), http.StatusNotFound)
	m.CourierResult("websub", "delivered")

	// The main listener's /metrics is the operator's.
	mustStatus(t, e.do("GET", "/metrics", "", nil), http.StatusUnauthorized)
	mustStatus(t, e.do("GET", "/metrics", tok, nil), http.StatusForbidden)
	res := e.do("GET", "/metrics", operatorToken, nil)
	mustStatus(t, res, http.StatusOK)

	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(res.Body))
	if err != nil {
		t.Fatalf("parse /metrics: %v\n%s", err, res.Body)
	}
	tests := []struct {
		name   string
		family string
		labels map[string]string
		min    float64 // the counter, gauge or histogram count is at least this
		max    float64 // and at most this (0: no bound)
	}{
		{"append created", "acrelay_appends_total", map[string]string{"result": "created"}, 1, 1},
		{"append retry", "acrelay_appends_total", map[string]string{"result": "retry"}, 1, 1},
		{"append refusal", "acrelay_appends_total", map[string]string{"result": refusal}, 1, 1},
		{"append unauthorized", "acrelay_appends_total", map[string]string{"result": "unauthorized"}, 1, 1},
		{"requests by template", "acrelay_http_requests_total", map[string]string{"route": "/v1/correspondence/events", "method": "POST", "code": "201"}, 1, 1},
		{"admin route template", "acrelay_http_requests_total", map[string]string{"route": "/v1/admin/projects/{project_id}/identities", "method": "POST", "code": "201"}, 1, 1},
		{"unmatched path", "acrelay_http_requests_total", map[string]string{"route": "unmatched", "method": "GET", "code": "404"}, 1, 1},
		{"latency", "acrelay_http_request_duration_seconds", map[string]string{"route": "/v1/correspondence/events", "method": "GET"}, 1, 1},
		{"group commit", "acrelay_store_group_commit_duration_seconds", map[string]string{"result": "ok"}, 1, 0},
		{"group commit size", "acrelay_store_group_commit_appends", map[string]string{}, 1, 0},
		{"store tx", "acrelay_store_transaction_duration_seconds", map[string]string{"op": "append", "result": "ok"}, 1, 0},
		{"courier lag", "acrelay_courier_records_behind", map[string]string{"courier": "websub"}, 3, 3},
		{"courier failing", "acrelay_courier_targets_failing", map[string]string{"courier": "websub"}, 1, 1},
		{"courier deliveries", "acrelay_courier_deliveries_total", map[string]string{"courier": "websub", "outcome": "delivered"}, 1, 1},
		{"websub active", "acrelay_websub_subscriptions", map[string]string{"state": "active"}, 0, 0},
		{"wake", "acrelay_wake_subscribers", map[string]string{}, 0, 0},
		{"go runtime", "go_goroutines", map[string]string{}, 1, 0},
		{"process", "process_cpu_seconds_total", map[string]string{}, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := fams[tc.family]
			if f == nil {
				t.Fatalf("no family %s", tc.family)
			}
			for _, mt := range f.GetMetric() {
				if !sameLabels(mt.GetLabel(), tc.labels) {
					continue
				}
				v := value(f.GetType(), mt)
				if v < tc.min || (tc.max > 0 && v > tc.max) {
					t.Fatalf("%s%v = %v, want %v..%v", tc.family, tc.labels, v, tc.min, tc.max)
				}
				return
			}
			t.Fatalf("no series %s%v", tc.family, tc.labels)
		})
	}
	secrets := []string{pid, tok, operatorToken, a.IdentityID, a.KeyID, "repo-1", "/no/such"}
	for name, f := range fams {
		for _, mt := range f.GetMetric() {
			for _, l := range mt.GetLabel() {
				for _, s := range secrets {
					if strings.Contains(l.GetValue(), s) {
						t.Errorf("%s label %s=%q carries %q", name, l.GetName(), l.GetValue(), s)
					}
				}
			}
		}
	}
}

func sameLabels(got []*dto.LabelPair, want map[string]string) bool {
	if len(got) != len(want) {
		return false
	}
	return !slices.ContainsFunc(got, func(l *dto.LabelPair) bool { v, ok := want[l.GetName()]; return !ok || v != l.GetValue() })
}

func value(t dto.MetricType, m *dto.Metric) float64 {
	switch t {
	case dto.MetricType_COUNTER:
		return m.GetCounter().GetValue()
	case dto.MetricType_GAUGE:
		return m.GetGauge().GetValue()
	case dto.MetricType_HISTOGRAM:
		return float64(m.GetHistogram().GetSampleCount())
	}
	return m.GetUntyped().GetValue()
}
