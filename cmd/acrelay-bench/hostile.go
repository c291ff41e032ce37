package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	neturl "net/url"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/acrelay/acrelay/wire"
)

// acrelay-bench hostile: issue 27's hostile load through the real binary.
// One callback host floods --requests subscribe requests at a public topic
// (from --flood-addresses client addresses, given as X-Forwarded-For to a
// relay that trusts the bench as its proxy, so the per-address rate does
// not hide the hub's caps) while --agents agents post events at a fixed
// rate to the same topic. The relay runs with the limits given here (the
// serve defaults unless changed). It reports the agents' append latency
// without the flood (a quiet phase before it and one after, the bound of
// the same run) and during it, the relay's peak RSS, the hub's answers,
// the subscriptions the relay holds (against the caps) and whether every
// acknowledged event is stored.

type hostileConfig struct {
	Requests       int
	FloodClients   int
	FloodAddresses int
	Agents         int
	Rate           float64 // events per second per agent
	Quiet          time.Duration
	MaxFlood       time.Duration // the agents' events last this long into the flood
	RelayBin       string
	JSON           bool
	// The relay's limits (serve's flags of the same names).
	RateClient, RateClientBurst           int
	RateTokenWrites, RateTokenWritesBurst int
	PerTopic, PerHost, PerProject         int
	PendingPerHost                        int
	// RefusalHold is the relay's --rate-refusal-hold, passed only when
	// set (a relay built before the flag refuses it).
	RefusalHold string
}

type hostileResult struct {
	Requests       int     `json:"requests"`
	FloodAddresses int     `json:"flood_addresses"`
	FloodSeconds   float64 `json:"flood_seconds"`
	FloodPerSecond float64 `json:"flood_requests_per_second"`
	// CPU per flood request over the flood (agents' appends and
	// deliveries included in the relay's): the relay's and this
	// process's (the load generator's, flood and agents).
	RelayCPUMicrosPerRequest float64 `json:"relay_cpu_us_per_request"`
	LoadCPUMicrosPerRequest  float64 `json:"load_cpu_us_per_request"`
	Agents                   int     `json:"agents"`
	EventsPerSecond          float64 `json:"events_per_second"`
	// Append latency (201 received) of the agents: before the flood (no
	// subscriptions), during it, and after it (the subscriptions it made
	// held and served, no more requests).
	BeforeP50Millis float64 `json:"before_p50_ms"`
	BeforeP99Millis float64 `json:"before_p99_ms"`
	FloodP50Millis  float64 `json:"flood_p50_ms"`
	FloodP99Millis  float64 `json:"flood_p99_ms"`
	AfterP50Millis  float64 `json:"after_p50_ms"`
	AfterP99Millis  float64 `json:"after_p99_ms"`
	// P99Ratio is flood / before; P99RatioAfter flood / after, the cost
	// of the requests alone (the limits' part).
	P99Ratio      float64 `json:"p99_ratio"`
	P99RatioAfter float64 `json:"p99_ratio_after"`
	// The hub's answers to the flood, by status and code.
	Answers map[string]int `json:"answers"`
	// Refusals is acrelay_limit_refusals_total by limit, from /metrics.
	Refusals map[string]int `json:"refusals"`
	// What the relay holds after the flood's verifications settled.
	Subscriptions int     `json:"subscriptions"`
	Verified      int64   `json:"callbacks_verified"`
	Deliveries    int64   `json:"deliveries"`
	CapHeld       bool    `json:"caps_held"`
	PeakRSSMiB    float64 `json:"peak_rss_mib"`
	StartRSSMiB   float64 `json:"start_rss_mib"`
	Acknowledged  int     `json:"events_acknowledged"`
	Stored        int     `json:"events_stored"`
	Lost          int     `json:"events_lost"`
	AppendErrors  int64   `json:"append_errors"`
}

func init() { rootCmd.AddCommand(newHostileCmd()) }

func newHostileCmd() *cobra.Command {
	c := hostileConfig{}
	cmd := &cobra.Command{
		Use:   "hostile",
		Short: "Flood the embedded hub with subscribe requests while agents post: caps held, RSS, append p99 against the same run without the flood",
		Example: `  acrelay-bench hostile --requests 100000 --agents 4 --rate 25
  acrelay-bench hostile --requests 100000 --flood-addresses 1   # one client address: the per-address rate answers nearly all`,
		SilenceUsage: true,
		Args:         cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			res, err := runHostile(ctx, c)
			if err != nil {
				return err
			}
			printHostile(cmd.OutOrStdout(), c.JSON, res)
			if !res.CapHeld || res.Lost > 0 {
				return fmt.Errorf("caps held %v, events lost %d", res.CapHeld, res.Lost)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&c.Requests, "requests", 100_000, "subscribe requests of the flood")
	f.IntVar(&c.FloodClients, "flood-clients", 16, "connections the flood is sent over")
	f.IntVar(&c.FloodAddresses, "flood-addresses", 1000, "client addresses the flood comes from (X-Forwarded-For through a trusted proxy); 1 = one address")
	f.IntVar(&c.Agents, "agents", 4, "agents posting events, each with its own token")
	f.Float64Var(&c.Rate, "rate", 25, "events per second of each agent")
	f.DurationVar(&c.Quiet, "quiet", 15*time.Second, "length of each phase without the flood (one before, one after)")
	f.DurationVar(&c.MaxFlood, "max-flood", 5*time.Minute, "longest flood the agents post through (events are signed in advance)")
	f.StringVar(&c.RelayBin, "relay-bin", "", "acrelay binary (default: acrelay next to this binary, else built from ./cmd/acrelay with go build)")
	f.BoolVar(&c.JSON, "json", false, "print the result as JSON")
	f.IntVar(&c.RateClient, "rate-client", 20, "the relay's --rate-client")
	f.IntVar(&c.RateClientBurst, "rate-client-burst", 100, "the relay's --rate-client-burst")
	f.IntVar(&c.RateTokenWrites, "rate-token-writes", 100, "the relay's --rate-token-writes")
	f.IntVar(&c.RateTokenWritesBurst, "rate-token-writes-burst", 200, "the relay's --rate-token-writes-burst")
	f.IntVar(&c.PerTopic, "websub-max-subscriptions-per-topic", 1000, "the relay's cap")
	f.IntVar(&c.PerHost, "websub-max-subscriptions-per-host", 1000, "the relay's cap")
	f.IntVar(&c.PerProject, "websub-max-subscriptions-per-project", 10000, "the relay's cap")
	f.IntVar(&c.PendingPerHost, "websub-max-pending-per-host", 32, "the relay's cap")
	f.StringVar(&c.RefusalHold, "rate-refusal-hold", "", "the relay's --rate-refusal-hold (e.g. 0 or 1s); unset: the relay's default, the flag not passed")
	return cmd
}

func printHostile(out io.Writer, asJSON bool, r hostileResult) {
	if asJSON {
		b, _ := json.Marshal(r)
		fmt.Fprintln(out, string(b))
		return
	}
	codes := make([]string, 0, len(r.Answers))
	for k, v := range r.Answers {
		codes = append(codes, fmt.Sprintf("%s %d", k, v))
	}
	slices.Sort(codes)
	fmt.Fprintf(out, "hostile: %d subscribe requests from %d addresses in %.1f s (%.0f/s); answers: %s\n",
		r.Requests, r.FloodAddresses, r.FloodSeconds, r.FloodPerSecond, strings.Join(codes, ", "))
	fmt.Fprintf(out, "  CPU per flood request: relay %.1f µs, load generator %.1f µs\n", r.RelayCPUMicrosPerRequest, r.LoadCPUMicrosPerRequest)
	fmt.Fprintf(out, "  subscriptions held %d, callbacks verified %d, deliveries %d, caps held %v\n", r.Subscriptions, r.Verified, r.Deliveries, r.CapHeld)
	fmt.Fprintf(out, "  appends (%d agents, %.0f events/s): p50/p99 before %.2f/%.2f ms, during %.2f/%.2f ms, after %.2f/%.2f ms; p99 during/before %.2f, during/after %.2f; errors %d\n",
		r.Agents, r.EventsPerSecond, r.BeforeP50Millis, r.BeforeP99Millis, r.FloodP50Millis, r.FloodP99Millis, r.AfterP50Millis, r.AfterP99Millis,
		r.P99Ratio, r.P99RatioAfter, r.AppendErrors)
	fmt.Fprintf(out, "  relay RSS: %.1f MiB at start, peak %.1f MiB; events acknowledged %d, stored %d, lost %d\n",
		r.StartRSSMiB, r.PeakRSSMiB, r.Acknowledged, r.Stored, r.Lost)
}

// hostileSink is the flood's callback host: it confirms every
// verification and takes every delivery.
type hostileSink struct {
	verified   sync.Map
	nVerified  atomic.Int64
	deliveries atomic.Int64
}

func (s *hostileSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
		if _, dup := s.verified.LoadOrStore(r.URL.Path, true); !dup {
			s.nVerified.Add(1)
		}
		_, _ = io.WriteString(w, r.URL.Query().Get("hub.challenge"))
	case http.MethodPost:
		_, _ = io.Copy(io.Discard, r.Body)
		s.deliveries.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}
}

// agentLoad is one agent's pre-signed events and the latencies of the
// posts it made, by phase.
type agentLoad struct {
	reqs  [][]byte
	ids   []string
	next  int
	acked []string
	lat   [3][]time.Duration
	errs  int64
}

func runHostile(ctx context.Context, c hostileConfig) (hostileResult, error) {
	res := hostileResult{Requests: c.Requests, FloodAddresses: c.FloodAddresses, Agents: c.Agents, EventsPerSecond: float64(c.Agents) * c.Rate,
		Answers: map[string]int{}}
	if c.Requests < 1 || c.FloodClients < 1 || c.FloodAddresses < 1 || c.Agents < 1 || c.Rate <= 0 || c.Quiet <= 0 || c.MaxFlood <= 0 {
		return res, fmt.Errorf("--requests, --flood-clients, --flood-addresses, --agents, --rate and --quiet must be positive")
	}
	var hold []string
	if c.RefusalHold != "" {
		hold = []string{"--rate-refusal-hold", c.RefusalHold}
	}
	bin, cleanup, err := resolveRelayBin(ctx, c.RelayBin)
	if err != nil {
		return res, err
	}
	defer cleanup()
	itoa := strconv.Itoa
	r, err := startBenchRelay(ctx, benchRun{bin: bin, extra: append([]string{
		"--websub-allow-hosts", "127.0.0.1", "--trusted-proxies", "127.0.0.1",
		"--rate-client", itoa(c.RateClient), "--rate-client-burst", itoa(c.RateClientBurst),
		"--rate-token-writes", itoa(c.RateTokenWrites), "--rate-token-writes-burst", itoa(c.RateTokenWritesBurst),
		"--websub-max-subscriptions-per-topic", itoa(c.PerTopic), "--websub-max-subscriptions-per-host", itoa(c.PerHost),
		"--websub-max-subscriptions-per-project", itoa(c.PerProject), "--websub-max-pending-per-host", itoa(c.PendingPerHost),
		"--websub-retry-initial", "1s", "--websub-retry-max", "5s"}, hold...)}, "")
	if err != nil {
		return res, err
	}
	defer r.stop()
	pid := r.cmd.Process.Pid
	client := &http.Client{Timeout: 30 * time.Second}
	m, err := benchAdmin(client, r.url, r.opToken, "/v1/admin/projects", map[string]any{"visibility": "public"})
	if err != nil {
		return res, err
	}
	projectID := m["project_id"].(string)
	const repo = "repo:hostile"
	target, _ := neturl.Parse(r.url)
	perPhase := int(c.Rate*c.Quiet.Seconds()) + 1
	agents := make([]*agentLoad, c.Agents)
	var readToken string
	for i := range agents {
		m, err := benchAdmin(client, r.url, r.opToken, "/v1/admin/projects/"+projectID+"/tokens", map[string]any{"scopes": []string{"read", "append", "admin"}})
		if err != nil {
			return res, err
		}
		tok := m["token"].(string)
		readToken = tok
		// Room for two quiet phases and a flood of up to --max-flood.
		evs, err := makeWebSubEvents(ctx, client, r.url, tok, projectID, repo, 2*perPhase+int(c.Rate*c.MaxFlood.Seconds()), 0, target.Host)
		if err != nil {
			return res, err
		}
		agents[i] = &agentLoad{reqs: evs.requests, ids: evs.ids}
	}
	topic := r.url + "/v1/correspondence/events.atom?" + neturl.Values{"project_id": {projectID}, "repository_id": {repo}}.Encode()

	sink := &hostileSink{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return res, err
	}
	cbSrv := &http.Server{Handler: sink, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = cbSrv.Serve(ln) }()
	defer cbSrv.Close()
	cbBase := "http://" + ln.Addr().String() + "/cb/"

	// RSS, sampled all along.
	var peakRSS atomic.Int64
	rss0, _ := procRSS(pid)
	res.StartRSSMiB = float64(rss0) / (1 << 20)
	sampleCtx, stopSample := context.WithCancel(ctx)
	defer stopSample()
	go func() {
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			if v, err := procRSS(pid); err == nil && v > peakRSS.Load() {
				peakRSS.Store(v)
			}
			select {
			case <-sampleCtx.Done():
				return
			case <-t.C:
			}
		}
	}()

	// The agents: each posts at its rate until its phase ends.
	runPhase := func(phase int, until func() bool) {
		var wg sync.WaitGroup
		for _, a := range agents {
			wg.Go(func() {
				bc := &benchConn{}
				defer bc.close()
				tick := time.NewTicker(time.Duration(float64(time.Second) / c.Rate))
				defer tick.Stop()
				for !until() && ctx.Err() == nil && a.next < len(a.reqs) {
					<-tick.C
					i := a.next
					a.next++
					start := time.Now()
					status, err := bc.post(target.Host, a.reqs[i], nil)
					d := time.Since(start)
					if err != nil {
						bc.close()
					}
					if err != nil || status != http.StatusCreated {
						a.errs++
						continue
					}
					a.acked = append(a.acked, a.ids[i])
					a.lat[phase] = append(a.lat[phase], d)
				}
			})
		}
		wg.Wait()
	}
	timeUp := func(d time.Duration) func() bool {
		end := time.Now().Add(d)
		return func() bool { return time.Now().After(end) }
	}
	runPhase(0, timeUp(c.Quiet))

	// The flood, with the agents posting until it has ended and a quiet
	// phase's length has passed.
	var sent atomic.Int64
	var answersMu sync.Mutex
	relayCPU0, _ := cpuTime(pid)
	loadCPU0, _ := cpuTime(os.Getpid())
	floodStart := time.Now()
	var floodDone atomic.Bool
	var fwg sync.WaitGroup
	for range c.FloodClients {
		fwg.Go(func() {
			hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}, Timeout: 30 * time.Second}
			defer hc.CloseIdleConnections()
			local := map[string]int{}
			defer func() {
				answersMu.Lock()
				for k, v := range local {
					res.Answers[k] += v
				}
				answersMu.Unlock()
			}()
			for ctx.Err() == nil {
				i := int(sent.Add(1)) - 1
				if i >= c.Requests {
					return
				}
				form := "hub.mode=subscribe&hub.topic=" + neturl.QueryEscape(topic) + "&hub.callback=" + neturl.QueryEscape(cbBase+itoa(i)) + "&hub.lease_seconds=86400"
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, r.url+"/websub/hub", strings.NewReader(form))
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				a := i % c.FloodAddresses
				req.Header.Set("X-Forwarded-For", fmt.Sprintf("10.%d.%d.%d", a>>16&255, a>>8&255, a&255))
				resp, err := hc.Do(req)
				if err != nil {
					local["error"]++
					continue
				}
				var e wire.Error
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				_ = json.Unmarshal(b, &e)
				key := strconv.Itoa(resp.StatusCode)
				if e.Error != "" {
					key += " " + e.Error
				}
				local[key]++
			}
		})
	}
	var floodEnd atomic.Int64
	go func() { fwg.Wait(); floodEnd.Store(time.Now().UnixNano()); floodDone.Store(true) }()
	minFlood := timeUp(c.Quiet)
	runPhase(1, func() bool { return floodDone.Load() && minFlood() })
	fwg.Wait()
	for !floodDone.Load() {
		time.Sleep(time.Millisecond)
	}
	res.FloodSeconds = time.Duration(floodEnd.Load() - floodStart.UnixNano()).Seconds()
	res.FloodPerSecond = float64(c.Requests) / res.FloodSeconds
	if relayCPU1, ok := cpuTime(pid); ok {
		res.RelayCPUMicrosPerRequest = float64(relayCPU1-relayCPU0) / float64(time.Microsecond) / float64(c.Requests)
	}
	if loadCPU1, ok := cpuTime(os.Getpid()); ok {
		res.LoadCPUMicrosPerRequest = float64(loadCPU1-loadCPU0) / float64(time.Microsecond) / float64(c.Requests)
	}
	runPhase(2, timeUp(c.Quiet))
	stopSample()

	// Let the accepted verifications finish, then count what is held.
	time.Sleep(3 * time.Second)
	res.PeakRSSMiB = float64(peakRSS.Load()) / (1 << 20)
	if hwm, err := procStatus(pid, "VmHWM:"); err == nil && float64(hwm)/(1<<20) > res.PeakRSSMiB {
		res.PeakRSSMiB = float64(hwm) / (1 << 20)
	}
	subs, refusals, err := relayMetrics(client, r.url, r.opToken)
	if err != nil {
		return res, err
	}
	res.Subscriptions, res.Refusals = subs, refusals
	res.Verified = sink.nVerified.Load()
	res.Deliveries = sink.deliveries.Load()
	accepted := res.Answers["202"]
	res.CapHeld = subs <= min(c.PerTopic, c.PerHost, c.PerProject) && accepted <= min(c.PerTopic, c.PerHost, c.PerProject) &&
		res.Verified <= int64(accepted)

	var lat [3][]time.Duration
	for _, a := range agents {
		for p := range lat {
			lat[p] = append(lat[p], a.lat[p]...)
		}
		res.AppendErrors += a.errs
		res.Acknowledged += len(a.acked)
	}
	for p := range lat {
		slices.Sort(lat[p])
	}
	res.BeforeP50Millis, res.BeforeP99Millis = ms(percentile(lat[0], 0.5)), ms(percentile(lat[0], 0.99))
	res.FloodP50Millis, res.FloodP99Millis = ms(percentile(lat[1], 0.5)), ms(percentile(lat[1], 0.99))
	res.AfterP50Millis, res.AfterP99Millis = ms(percentile(lat[2], 0.5)), ms(percentile(lat[2], 0.99))
	if res.BeforeP99Millis > 0 && res.AfterP99Millis > 0 {
		res.P99Ratio = res.FloodP99Millis / res.BeforeP99Millis
		res.P99RatioAfter = res.FloodP99Millis / res.AfterP99Millis
	}

	// Nothing acknowledged is lost: read the repository back.
	stored, err := storedEventIDs(client, r.url, readToken, repo)
	if err != nil {
		return res, err
	}
	res.Stored = len(stored)
	for _, a := range agents {
		for _, id := range a.acked {
			if !stored[id] {
				res.Lost++
			}
		}
	}
	return res, ctx.Err()
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// procRSS is the resident set of process pid, in bytes.
func procRSS(pid int) (int64, error) { return procStatus(pid, "VmRSS:") }

// procStatus reads a "kB" field of /proc/pid/status, in bytes.
func procStatus(pid int, field string) (int64, error) {
	f, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// relaySubscriptions sums acrelay_websub_subscriptions from the relay's
// /metrics (operator token).
func relaySubscriptions(client *http.Client, url, opToken string) (int, error) {
	n, _, err := relayMetrics(client, url, opToken)
	return n, err
}

// relayMetrics reads the relay's /metrics (operator token): the sum of
// acrelay_websub_subscriptions, and acrelay_limit_refusals_total by limit.
func relayMetrics(client *http.Client, url, opToken string) (subs int, refusals map[string]int, err error) {
	req, _ := http.NewRequest(http.MethodGet, url+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+opToken)
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, nil, fmt.Errorf("/metrics: status %d", resp.StatusCode)
	}
	refusals = map[string]int{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		v, _ := strconv.ParseFloat(f[len(f)-1], 64)
		switch {
		case strings.HasPrefix(line, "acrelay_websub_subscriptions{"):
			subs += int(v)
		case strings.HasPrefix(line, `acrelay_limit_refusals_total{limit="`):
			name, _, _ := strings.Cut(strings.TrimPrefix(line, `acrelay_limit_refusals_total{limit="`), `"`)
			refusals[name] = int(v)
		}
	}
	return subs, refusals, sc.Err()
}

// storedEventIDs pages through a repository's events.
func storedEventIDs(client *http.Client, url, token, repo string) (map[string]bool, error) {
	ids := map[string]bool{}
	after := ""
	for {
		q := neturl.Values{"repository_id": {repo}, "limit": {"200"}}
		if after != "" {
			q.Set("after", after)
		}
		req, _ := http.NewRequest(http.MethodGet, url+"/v1/correspondence/events?"+q.Encode(), nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := client.Do(req)
		if err != nil {
			return nil, err
		}
		var page struct {
			Events []struct {
				Event struct {
					ID string `json:"event_id"`
				} `json:"event"`
			} `json:"events"`
			Page wire.Page `json:"page"`
		}
		err = json.NewDecoder(resp.Body).Decode(&page)
		resp.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("read events: status %d: %w", resp.StatusCode, err)
		}
		for _, rec := range page.Events {
			ids[rec.Event.ID] = true
		}
		if !page.Page.HasMore || page.Page.NextAfter == nil {
			return ids, nil
		}
		after = *page.Page.NextAfter
	}
}
