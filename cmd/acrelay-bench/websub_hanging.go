package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	neturl "net/url"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
)

// acrelay-bench websub hanging: issue 27's "four hanging callbacks on one
// host hold all four of that host's delivery slots". One callback host
// serves --healthy subscriptions that answer at once and --hanging ones
// that never answer (the courier's request times out, 10 s); events are
// posted at a steady rate and the latency from each 201 to its arrival at
// every healthy subscription is measured, once with no hanging
// subscription (the bound of the same run) and once with them.

type hangingConfig struct {
	Healthy, Hanging int
	Interval         time.Duration
	Duration         time.Duration
	RelayBin         string
	JSON             bool
}

type hangingResult struct {
	Label     string  `json:"label"`
	Healthy   int     `json:"healthy"`
	Hanging   int     `json:"hanging"`
	Events    int     `json:"events"`
	P50Millis float64 `json:"p50_ms"`
	P99Millis float64 `json:"p99_ms"`
	MaxMillis float64 `json:"max_ms"`
	// After the first 15 s, by when every hanging subscription has timed
	// out once.
	LateP99Millis float64 `json:"late_p99_ms"`
	LateMaxMillis float64 `json:"late_max_ms"`
	Missing       int     `json:"missing"`
}

func newWebSubHangingCmd() *cobra.Command {
	c := hangingConfig{}
	cmd := &cobra.Command{
		Use:          "hanging",
		Short:        "Latency of healthy subscriptions on a host whose other subscriptions hang, against the same host without them",
		Example:      `  acrelay-bench websub hanging --healthy 8 --hanging 4 --duration 40s`,
		SilenceUsage: true,
		Args:         cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			bin, cleanup, err := resolveRelayBin(ctx, c.RelayBin)
			if err != nil {
				return err
			}
			defer cleanup()
			c.RelayBin = bin
			for _, k := range []int{0, c.Hanging} {
				res, err := hangingOnce(ctx, c, k)
				if err != nil {
					return err
				}
				printHanging(cmd.OutOrStdout(), c.JSON, res)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&c.Healthy, "healthy", 8, "subscriptions that answer at once")
	f.IntVar(&c.Hanging, "hanging", 4, "subscriptions on the same host that never answer")
	f.DurationVar(&c.Interval, "interval", 250*time.Millisecond, "time between events")
	f.DurationVar(&c.Duration, "duration", 40*time.Second, "how long events are posted")
	f.StringVar(&c.RelayBin, "relay-bin", "", "acrelay binary (default: acrelay next to this binary, else built from ./cmd/acrelay with go build)")
	f.BoolVar(&c.JSON, "json", false, "print results as JSON lines")
	return cmd
}

func printHanging(out io.Writer, asJSON bool, r hangingResult) {
	if asJSON {
		b, _ := json.Marshal(r)
		fmt.Fprintln(out, string(b))
		return
	}
	fmt.Fprintf(out, "%s: %d healthy + %d hanging subscriptions on one host, %d events: healthy p50 %.1f ms, p99 %.1f ms, max %.1f ms; after 15 s p99 %.1f ms, max %.1f ms; missing %d\n",
		r.Label, r.Healthy, r.Hanging, r.Events, r.P50Millis, r.P99Millis, r.MaxMillis, r.LateP99Millis, r.LateMaxMillis, r.Missing)
}

// hangingSink is the one callback host.
type hangingSink struct {
	mu       sync.Mutex
	verified map[string]bool
	arrivals map[string]map[string]time.Time // path → entry id → first arrival
	stop     chan struct{}
}

func (s *hangingSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
		s.mu.Lock()
		s.verified[r.URL.Path] = true
		s.mu.Unlock()
		_, _ = io.WriteString(w, r.URL.Query().Get("hub.challenge"))
	case http.MethodPost:
		if strings.HasPrefix(r.URL.Path, "/hang/") {
			select { // never answers; the relay gives up
			case <-r.Context().Done():
			case <-s.stop:
			}
			return
		}
		body, _ := io.ReadAll(r.Body)
		now := time.Now()
		s.mu.Lock()
		got := s.arrivals[r.URL.Path]
		if got == nil {
			got = map[string]time.Time{}
			s.arrivals[r.URL.Path] = got
		}
		atomEntryIDs(body, func(id []byte) {
			if _, ok := got[string(id)]; !ok {
				got[string(id)] = now
			}
		})
		s.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}
}

func hangingOnce(ctx context.Context, c hangingConfig, hanging int) (hangingResult, error) {
	res := hangingResult{Label: "websub-hanging", Healthy: c.Healthy, Hanging: hanging}
	r, err := startBenchRelay(ctx, benchRun{bin: c.RelayBin, extra: []string{
		"--websub-allow-hosts", "127.0.0.1", "--websub-retry-initial", "100ms", "--websub-retry-max", "1s"}}, "")
	if err != nil {
		return res, err
	}
	defer r.stop()
	client := &http.Client{Timeout: 30 * time.Second}
	m, err := benchAdmin(client, r.url, r.opToken, "/v1/admin/projects", map[string]any{"visibility": "public"})
	if err != nil {
		return res, err
	}
	projectID := m["project_id"].(string)
	m, err = benchAdmin(client, r.url, r.opToken, "/v1/admin/projects/"+projectID+"/tokens", map[string]any{"scopes": []string{"read", "append", "admin"}})
	if err != nil {
		return res, err
	}
	token := m["token"].(string)
	const repo = "repo:hanging"
	target, _ := neturl.Parse(r.url)
	n := int(c.Duration / c.Interval)
	evs, err := makeWebSubEvents(ctx, client, r.url, token, projectID, repo, n, 0, target.Host)
	if err != nil {
		return res, err
	}
	topic := r.url + "/v1/correspondence/events.atom?" + neturl.Values{"project_id": {projectID}, "repository_id": {repo}}.Encode()

	sink := &hangingSink{verified: map[string]bool{}, arrivals: map[string]map[string]time.Time{}, stop: make(chan struct{})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return res, err
	}
	srv := &http.Server{Handler: sink, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer func() { close(sink.stop); srv.Close() }()
	var paths []string
	for i := range c.Healthy {
		paths = append(paths, "/ok/"+strconv.Itoa(i))
	}
	for i := range hanging {
		paths = append(paths, "/hang/"+strconv.Itoa(i))
	}
	for _, p := range paths {
		form := neturl.Values{"hub.mode": {"subscribe"}, "hub.topic": {topic}, "hub.callback": {"http://" + ln.Addr().String() + p}, "hub.lease_seconds": {"86400"}}
		resp, err := client.PostForm(r.url+"/websub/hub", form)
		if err != nil {
			return res, err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			return res, fmt.Errorf("subscribe %s: status %d", p, resp.StatusCode)
		}
	}
	if !waitFor(ctx, time.Minute, func() bool {
		subs, err := relaySubscriptions(client, r.url, r.opToken)
		return err == nil && subs == len(paths)
	}) {
		return res, fmt.Errorf("the %d subscriptions were not all active in a minute", len(paths))
	}

	bc := &benchConn{}
	defer bc.close()
	posted := make([]time.Time, n)
	tick := time.NewTicker(c.Interval)
	defer tick.Stop()
	start := time.Now()
	for e := range n {
		<-tick.C
		status, err := bc.post(target.Host, evs.requests[e], nil)
		posted[e] = time.Now()
		if err != nil || status != http.StatusCreated {
			return res, fmt.Errorf("post event %d: status %d, %v", e, status, err)
		}
	}
	res.Events = n
	last := evs.ids[n-1]
	waitFor(ctx, 30*time.Second, func() bool {
		sink.mu.Lock()
		defer sink.mu.Unlock()
		for i := range c.Healthy {
			if _, ok := sink.arrivals["/ok/"+strconv.Itoa(i)][last]; !ok {
				return false
			}
		}
		return true
	})
	var lat, late []time.Duration
	sink.mu.Lock()
	for i := range c.Healthy {
		got := sink.arrivals["/ok/"+strconv.Itoa(i)]
		for e, id := range evs.ids[:n] {
			at, ok := got[id]
			if !ok {
				res.Missing++
				continue
			}
			lat = append(lat, at.Sub(posted[e]))
			if posted[e].Sub(start) >= 15*time.Second {
				late = append(late, at.Sub(posted[e]))
			}
		}
	}
	sink.mu.Unlock()
	slices.Sort(lat)
	slices.Sort(late)
	res.P50Millis, res.P99Millis = ms(percentile(lat, 0.5)), ms(percentile(lat, 0.99))
	res.LateP99Millis = ms(percentile(late, 0.99))
	if len(lat) > 0 {
		res.MaxMillis = ms(lat[len(lat)-1])
	}
	if len(late) > 0 {
		res.LateMaxMillis = ms(late[len(late)-1])
	}
	return res, ctx.Err()
}
