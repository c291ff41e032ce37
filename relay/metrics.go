package relay

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/gorilla/mux"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/acrelay/acrelay/couriers"
	"github.com/acrelay/acrelay/hub"
	"github.com/acrelay/acrelay/store"
)

// Metrics holds the relay's Prometheus series (docs/operating.md "Metrics"
// lists them). cmd/acrelay makes one per process over its registry, passes
// it to the store as its store.Observer, to the couriers' Runners as their
// OnResult, and to New in Config.Metrics.
//
// Every label takes its values from a bounded set: route templates (never
// a path), methods, status codes, result codes, courier names, fixed
// store operation names. No project id, token, topic or callback is ever a
// label value.
type Metrics struct {
	reg prometheus.Registerer

	requests   *prometheus.CounterVec   // route, method, code
	duration   *prometheus.HistogramVec // route, method
	appends    *prometheus.CounterVec   // result
	deliveries *prometheus.CounterVec   // courier, outcome
	storeTx    *prometheus.HistogramVec // op, result
	commitDur  *prometheus.HistogramVec // result
	commitSize prometheus.Histogram
	refusals   *prometheus.CounterVec // limit (relay/limits.go, hub.LimitNames)
}

var _ store.Observer = (*Metrics)(nil)

// NewMetrics registers the relay's series, and the Go runtime and process
// collectors, on reg. It panics if one is already registered there (one
// Metrics per registry).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		reg: reg,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "acrelay_http_requests_total",
			Help: "HTTP requests answered, by route template, method and status code.",
		}, []string{"route", "method", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "acrelay_http_request_duration_seconds",
			Help:    "Time to answer an HTTP request, by route template and method (a wake stream's is its whole life).",
			Buckets: prometheus.DefBuckets,
		}, []string{"route", "method"}),
		appends: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "acrelay_appends_total",
			Help: "POST /v1/correspondence/events answers by result: created, retry (an exact retry, 200) or the refusal code.",
		}, []string{"result"}),
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "acrelay_courier_deliveries_total",
			Help: "Courier delivery attempts (one batch of records to one target) by courier and outcome: delivered, failed, gone.",
		}, []string{"courier", "outcome"}),
		storeTx: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "acrelay_store_transaction_duration_seconds",
			Help:    "Store write transactions by operation and result (ok, refused, unavailable).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"op", "result"}),
		commitDur: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "acrelay_store_group_commit_duration_seconds",
			Help:    "Group-commit transactions of appends, begin to commit, by result (ok, unavailable).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"result"}),
		commitSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "acrelay_store_group_commit_appends",
			Help:    "Appends per group-commit transaction.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 12), // 1 … 2048
		}),
	}
	m.refusals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "acrelay_limit_refusals_total",
		Help: "Requests refused by a limit (docs/operating.md \"Limits\"): client_rate, token_rate (429), websub_topic_subscriptions, websub_host_subscriptions, websub_project_subscriptions, websub_host_verifications (409).",
	}, []string{"limit"})
	reg.MustRegister(m.requests, m.duration, m.appends, m.deliveries, m.storeTx, m.commitDur, m.commitSize, m.refusals,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// The outcomes are known in advance: a fresh relay shows zeros rather
	// than no series.
	for _, r := range []string{"created", "retry"} {
		m.appends.WithLabelValues(r)
	}
	for _, l := range append([]string{limitClientRate, limitTokenRate}, hub.LimitNames...) {
		m.refusals.WithLabelValues(l)
	}
	return m
}

// ObserveTx implements store.Observer.
func (m *Metrics) ObserveTx(op string, d time.Duration, err error) {
	m.storeTx.WithLabelValues(op, txResult(err)).Observe(d.Seconds())
}

// ObserveGroupCommit implements store.Observer.
func (m *Metrics) ObserveGroupCommit(appends int, d time.Duration, err error) {
	m.commitDur.WithLabelValues(txResult(err)).Observe(d.Seconds())
	m.commitSize.Observe(float64(appends))
}

// txResult names a store error's class: ok, unavailable, or refused (the
// store's answer about the input: not found, exists, collision …).
func txResult(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, store.ErrUnavailable), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "unavailable"
	}
	return "refused"
}

// CourierResult counts one delivery attempt; it is couriers.Options.OnResult.
func (m *Metrics) CourierResult(courier, outcome string) {
	m.deliveries.WithLabelValues(courier, outcome).Inc()
}

// LimitRefused counts one request refused by the limit named (a
// limit* constant of relay/limits.go or a hub.Limit* name); it is also
// hub.Options.OnRefused.
func (m *Metrics) LimitRefused(limit string) {
	m.refusals.WithLabelValues(limit).Inc()
}

// WatchCouriers registers gauges read from status at scrape time: each
// courier's records behind, targets, failing targets and leased projects.
func (m *Metrics) WatchCouriers(status func() []couriers.Status) {
	m.reg.MustRegister(courierCollector(status))
}

type courierCollector func() []couriers.Status

var (
	descBehind = prometheus.NewDesc("acrelay_courier_records_behind",
		"Records not yet delivered, summed over the courier's targets in the projects this process leases.", []string{"courier"}, nil)
	descTargets = prometheus.NewDesc("acrelay_courier_targets",
		"Delivery targets of the courier in the projects this process leases.", []string{"courier"}, nil)
	descFailing = prometheus.NewDesc("acrelay_courier_targets_failing",
		"Targets whose last delivery failed.", []string{"courier"}, nil)
	descLeased = prometheus.NewDesc("acrelay_courier_projects_leased",
		"Projects whose courier lease this process holds.", []string{"courier"}, nil)
	descSubs = prometheus.NewDesc("acrelay_websub_subscriptions",
		"WebSub subscriptions whose lease has not ended, by state (active, failing).", []string{"state"}, nil)
	descWake = prometheus.NewDesc("acrelay_wake_subscribers",
		"Open wake (SSE) streams.", nil, nil)
)

func (c courierCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descBehind
	ch <- descTargets
	ch <- descFailing
	ch <- descLeased
}

func (c courierCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c() {
		ch <- prometheus.MustNewConstMetric(descBehind, prometheus.GaugeValue, float64(s.Behind), s.Courier)
		ch <- prometheus.MustNewConstMetric(descTargets, prometheus.GaugeValue, float64(s.Targets), s.Courier)
		ch <- prometheus.MustNewConstMetric(descFailing, prometheus.GaugeValue, float64(s.Failing), s.Courier)
		ch <- prometheus.MustNewConstMetric(descLeased, prometheus.GaugeValue, float64(s.Projects), s.Courier)
	}
}

// serverCollector reads the Server's own gauges at scrape time: wake
// streams, and WebSub subscriptions per state from the store.
type serverCollector struct{ s *Server }

func (c serverCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descSubs
	ch <- descWake
}

func (c serverCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(descWake, prometheus.GaugeValue, float64(c.s.wake.subscribers()))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	counts, err := c.s.subscriptionStates(ctx)
	if err != nil {
		c.s.log.Warn("metrics: count websub subscriptions", "err", err)
		ch <- prometheus.NewInvalidMetric(descSubs, err)
		return
	}
	for _, state := range []string{store.SubscriptionActive, store.SubscriptionFailing} {
		ch <- prometheus.MustNewConstMetric(descSubs, prometheus.GaugeValue, float64(counts[state]), state)
	}
}

// subscriptionStates counts the live subscriptions by state, in one
// query whatever the number of projects and subscriptions (store
// WebSubScans CountSubscriptionStates); states other than active and
// failing are not reported (the label set stays bounded).
func (s *Server) subscriptionStates(ctx context.Context) (map[string]int, error) {
	return s.st.CountSubscriptionStates(ctx)
}

// reqInfo is what the metrics wrapper learns while a request is served:
// the matched route's template (noteRoute) and the error code answered
// (writeError).
type reqInfo struct {
	route string
	code  string
}

type reqInfoKey struct{}

// noteErrorCode records the code writeError answers, for acrelay_appends_total.
func noteErrorCode(r *http.Request, code string) {
	if ri, ok := r.Context().Value(reqInfoKey{}).(*reqInfo); ok {
		ri.code = code
	}
}

// noteRoute is router middleware: it runs once a route matched and keeps
// its path template, the only form of the path a label may carry.
func noteRoute(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ri, ok := r.Context().Value(reqInfoKey{}).(*reqInfo); ok {
			if rt := mux.CurrentRoute(r); rt != nil {
				if tpl, err := rt.GetPathTemplate(); err == nil {
					ri.route = tpl
				}
			}
		}
		next.ServeHTTP(w, r)
	})
}

// noteRouteOf sets the route label of a request answered before routing.
func noteRouteOf(r *http.Request, route string) {
	if ri, ok := r.Context().Value(reqInfoKey{}).(*reqInfo); ok {
		ri.route = route
	}
}

// instrument counts and times every request h serves.
func (s *Server) instrument(h http.Handler) http.Handler {
	m := s.cfg.Metrics
	if m == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ri := &reqInfo{route: "unmatched"}
		sw := &statusWriter{ResponseWriter: w}
		h.ServeHTTP(sw, r.WithContext(context.WithValue(r.Context(), reqInfoKey{}, ri)))
		status := sw.status
		if status == 0 {
			status = http.StatusOK
		}
		method := metricMethod(r.Method)
		m.requests.WithLabelValues(ri.route, method, statusCode(status)).Inc()
		m.duration.WithLabelValues(ri.route, method).Observe(time.Since(start).Seconds())
		if ri.route == "/v1/correspondence/events" && r.Method == http.MethodPost {
			m.appends.WithLabelValues(appendResult(status, ri.code)).Inc()
		}
	})
}

// appendResult is an append's acrelay_appends_total result.
func appendResult(status int, code string) string {
	switch {
	case status == http.StatusCreated:
		return "created"
	case status == http.StatusOK:
		return "retry"
	case code != "":
		return code
	}
	return "status_" + statusCode(status)
}

// metricMethod bounds the method label: a client may send any token.
func metricMethod(m string) string {
	switch m {
	case "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS":
		return m
	}
	return "other"
}

func statusCode(status int) string {
	if status < 100 || status > 999 {
		return "other"
	}
	b := []byte{byte('0' + status/100), byte('0' + status/10%10), byte('0' + status%10)}
	return string(b)
}

// statusWriter remembers the status written. Unwrap lets
// http.ResponseController (the wake stream's flushes and deadlines) reach
// the connection underneath.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// handleMetrics: GET /metrics on the main listener, for the operator token
// only. The series carry no project data, but their volumes (appends,
// subscriptions, errors) are the relay's business, not a visitor's; a
// scraper sends the token (Prometheus: authorization.credentials_file),
// or the operator serves /metrics openly on a private --metrics-addr.
func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request) {
	p, err := s.authenticate(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if !p.Operator {
		s.writeError(w, r, errOperatorOnly)
		return
	}
	s.cfg.MetricsHandler.ServeHTTP(w, r)
}
