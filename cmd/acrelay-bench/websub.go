package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
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

	"github.com/acrelay/acrelay/canonicaljson"
	"github.com/acrelay/acrelay/correspondence"
)

// acrelay-bench websub: the embedded hub and the WebSub courier under
// load. For each number of subscriptions N it starts a relay, serves the
// callbacks itself (at most --callback-servers loopback HTTP servers, each
// with many /cb/{i} paths), subscribes N callbacks to one private topic,
// and measures the latency from an event's 201 to its arrival at every
// callback, the sustained deliveries/s of a burst, the relay's CPU per
// delivery, and its memory per idle subscription. The bound of the same
// round is a bare loop in this process that POSTs the same delivery
// bodies, re-signed per subscription, to the same callbacks under the
// courier's limits (couriers.Options: 32 in flight, 4 per callback host,
// one at a time per subscription): the most the callbacks, loopback and
// net/http leave for a hub.

// Limits of the courier as serve runs it by default (--websub-concurrency,
// --websub-host-limit); --concurrency and --host-limit change both the
// relay's and the bound's.
const (
	courierConcurrency = 32
	courierHostLimit   = 4
)

type websubConfig struct {
	Subscriptions   []int
	CallbackServers int
	// Concurrency and HostLimit are the courier's limits, given to the
	// relay and used by the bound.
	Concurrency, HostLimit int
	Events                 int // latency events, posted one at a time
	Burst                  int // throughput events, posted at once
	Rounds                 int
	RelayBin               string
	JSON                   bool
	// Wait bounds each wait for deliveries (verification, one event's
	// fan-out, the burst).
	Wait time.Duration
	// CPUProfileDir, when set, receives a relay CPU profile of each
	// burst (cpu-N<n>-r<round>.prof).
	CPUProfileDir string
}

type websubResult struct {
	Label           string `json:"label"`
	Subscriptions   int    `json:"subscriptions"`
	CallbackServers int    `json:"callback_servers"`
	Concurrency     int    `json:"concurrency"`
	HostLimit       int    `json:"host_limit"`
	Events          int    `json:"events"`
	Burst           int    `json:"burst"`
	Rounds          int    `json:"rounds,omitempty"`
	// Latency from an event's 201 to its arrival at a callback, over
	// every (subscription, event); Missing counts those that never came.
	P50Millis float64 `json:"p50_ms"`
	P99Millis float64 `json:"p99_ms"`
	MaxMillis float64 `json:"max_ms"`
	Missing   int64   `json:"missing"`
	// The burst: entries delivered to subscriptions per second and HTTP
	// deliveries per second, from its first POST to its last arrival.
	EntriesPerSecond    float64 `json:"entries_per_second"`
	DeliveriesPerSecond float64 `json:"deliveries_per_second"`
	// The bare HMAC-POST loop over the same deliveries.
	BoundDeliveriesPerSecond float64 `json:"bound_deliveries_per_second"`
	RatioToBound             float64 `json:"ratio_to_bound"`
	ServerCPUMicros          float64 `json:"server_cpu_us_per_delivery"`
	ServerCPUMicrosPerEntry  float64 `json:"server_cpu_us_per_entry"`
	// Memory per idle subscription: the relay's Go heap in use (after a
	// GC) and its RSS, after the subscriptions less before, over N.
	HeapBytesPerSub float64 `json:"heap_bytes_per_subscription"`
	RSSBytesPerSub  float64 `json:"rss_bytes_per_subscription"`
	VerifySeconds   float64 `json:"verify_seconds"`
	MachineBusy     float64 `json:"machine_busy"`
	BadSignatures   int64   `json:"bad_signatures"`
	Errors          int64   `json:"errors"`
}

func init() {
	w := newWebSubCmd()
	w.AddCommand(newWebSubHangingCmd()) // acrelay-bench websub hanging (websub_hanging.go)
	rootCmd.AddCommand(w)
}

func newWebSubCmd() *cobra.Command {
	c := websubConfig{}
	var subs string
	cmd := &cobra.Command{
		Use:   "websub",
		Short: "Measure the embedded WebSub hub and courier: fan-out latency, deliveries/s against a bare HMAC-POST bound, CPU and memory per subscription",
		Example: `  acrelay-bench websub --subscriptions 1,100,1000 --events 20 --burst 100 --rounds 3
  acrelay-bench websub --subscriptions 10000 --events 5 --burst 20 --profile-dir /tmp/prof`,
		SilenceUsage: true,
		Args:         cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, f := range strings.Split(subs, ",") {
				n, err := strconv.Atoi(strings.TrimSpace(f))
				if err != nil || n < 1 {
					return fmt.Errorf("--subscriptions %q: want positive integers separated by commas", subs)
				}
				c.Subscriptions = append(c.Subscriptions, n)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runWebSub(ctx, c, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&subs, "subscriptions", "1,100,1000", "numbers of subscriptions to measure, comma-separated")
	f.IntVar(&c.CallbackServers, "callback-servers", 50, "most callback HTTP servers (subscriptions are spread over them)")
	f.IntVar(&c.Concurrency, "concurrency", courierConcurrency, "deliveries in flight, the relay's (--websub-concurrency) and the bound's")
	f.IntVar(&c.HostLimit, "host-limit", courierHostLimit, "deliveries in flight per callback host, the relay's (--websub-host-limit) and the bound's")
	f.IntVar(&c.Events, "events", 20, "events posted one at a time for the latency (each waits for its fan-out)")
	f.IntVar(&c.Burst, "burst", 100, "events posted at once for the throughput")
	f.IntVar(&c.Rounds, "rounds", 1, "repeat every measurement this many times, interleaved, and report medians")
	f.StringVar(&c.RelayBin, "relay-bin", "", "acrelay binary (default: acrelay next to this binary, else built from ./cmd/acrelay with go build)")
	f.BoolVar(&c.JSON, "json", false, "print results as JSON lines")
	f.DurationVar(&c.Wait, "wait", 5*time.Minute, "longest wait for verifications or deliveries")
	f.StringVar(&c.CPUProfileDir, "profile-dir", "", "save relay profiles into this directory: the heap with the idle subscriptions (heap-N<n>-r<round>.prof) and 5 s of CPU from the burst's start (cpu-…)")
	return cmd
}

func runWebSub(ctx context.Context, c websubConfig, out io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if c.Concurrency == 0 && c.HostLimit == 0 {
		c.Concurrency, c.HostLimit = courierConcurrency, courierHostLimit
	}
	if c.Events < 1 || c.Burst < 1 || c.Rounds < 1 || c.CallbackServers < 1 || c.Concurrency < 1 || c.HostLimit < 1 || len(c.Subscriptions) == 0 {
		return fmt.Errorf("--subscriptions, --events, --burst, --rounds, --callback-servers, --concurrency and --host-limit must be positive")
	}
	bin, cleanup, err := resolveRelayBin(ctx, c.RelayBin)
	if err != nil {
		return err
	}
	defer cleanup()
	c.RelayBin = bin
	results := make([][]websubResult, len(c.Subscriptions))
	for round := range c.Rounds {
		for i, n := range c.Subscriptions {
			res, err := websubOnce(ctx, c, n, round)
			if err != nil {
				return fmt.Errorf("%d subscriptions: %w", n, err)
			}
			results[i] = append(results[i], res)
			printWebSub(out, c.JSON, res)
		}
	}
	if c.Rounds > 1 {
		for _, rs := range results {
			printWebSub(out, c.JSON, medianWebSub(rs))
		}
	}
	return nil
}

func printWebSub(out io.Writer, asJSON bool, r websubResult) {
	if asJSON {
		b, _ := json.Marshal(r)
		fmt.Fprintln(out, string(b))
		return
	}
	fmt.Fprintf(out, "%s: %d subscriptions on %d callback servers, %d in flight (%d per host): latency p50 %.1f ms, p99 %.1f ms, max %.1f ms (%d events, %d missing); "+
		"burst of %d: %.0f entries/s, %.0f deliveries/s, bound %.0f deliveries/s, ratio %.2f; server CPU %.0f µs/delivery (%.1f µs/entry); "+
		"idle heap %.0f B/subscription, RSS %.0f B/subscription; verified in %.1f s; bad signatures %d, errors %d (machine %.0f%% busy)\n",
		r.Label, r.Subscriptions, r.CallbackServers, r.Concurrency, r.HostLimit, r.P50Millis, r.P99Millis, r.MaxMillis, r.Events, r.Missing,
		r.Burst, r.EntriesPerSecond, r.DeliveriesPerSecond, r.BoundDeliveriesPerSecond, r.RatioToBound, r.ServerCPUMicros, r.ServerCPUMicrosPerEntry,
		r.HeapBytesPerSub, r.RSSBytesPerSub, r.VerifySeconds, r.BadSignatures, r.Errors, 100*r.MachineBusy)
}

// medianWebSub is the median of each figure over rounds of one N; the
// counts of failures are totals.
func medianWebSub(rs []websubResult) websubResult {
	m := rs[0]
	median := func(f func(websubResult) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		return medianOf(v)
	}
	m.Label = fmt.Sprintf("websub, median of %d rounds", len(rs))
	m.Rounds = len(rs)
	m.P50Millis = median(func(r websubResult) float64 { return r.P50Millis })
	m.P99Millis = median(func(r websubResult) float64 { return r.P99Millis })
	m.MaxMillis = median(func(r websubResult) float64 { return r.MaxMillis })
	m.EntriesPerSecond = median(func(r websubResult) float64 { return r.EntriesPerSecond })
	m.DeliveriesPerSecond = median(func(r websubResult) float64 { return r.DeliveriesPerSecond })
	m.BoundDeliveriesPerSecond = median(func(r websubResult) float64 { return r.BoundDeliveriesPerSecond })
	m.RatioToBound = median(func(r websubResult) float64 { return r.RatioToBound })
	m.ServerCPUMicros = median(func(r websubResult) float64 { return r.ServerCPUMicros })
	m.ServerCPUMicrosPerEntry = median(func(r websubResult) float64 { return r.ServerCPUMicrosPerEntry })
	m.HeapBytesPerSub = median(func(r websubResult) float64 { return r.HeapBytesPerSub })
	m.RSSBytesPerSub = median(func(r websubResult) float64 { return r.RSSBytesPerSub })
	m.VerifySeconds = median(func(r websubResult) float64 { return r.VerifySeconds })
	m.MachineBusy = median(func(r websubResult) float64 { return r.MachineBusy })
	m.Missing, m.BadSignatures, m.Errors = 0, 0, 0
	for _, r := range rs {
		m.Missing += r.Missing
		m.BadSignatures += r.BadSignatures
		m.Errors += r.Errors
	}
	return m
}

// medianOf returns the median of v (which it sorts).
func medianOf(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// percentile returns the nearest-rank p-quantile (0 < p ≤ 1) of sorted.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// atomEntryIDs calls fn with the <id> of every <entry> of an Atom feed
// document, in order, and returns how many it found. It is a scan, not a
// parser: the relay's entries put <id> first and escape their content, so
// the feed's own <id> (before the first entry) is skipped and no content
// can look like an element.
func atomEntryIDs(body []byte, fn func(id []byte)) int {
	n := 0
	for {
		i := bytes.Index(body, []byte("<entry>"))
		if i < 0 {
			return n
		}
		body = body[i+len("<entry>"):]
		j := bytes.Index(body, []byte("<id>"))
		if j < 0 {
			return n
		}
		body = body[j+len("<id>"):]
		k := bytes.Index(body, []byte("</id>"))
		if k < 0 {
			return n
		}
		fn(body[:k])
		n++
		body = body[k+len("</id>"):]
	}
}

// signatureOK reports whether header is "sha256=" and the lowercase hex
// HMAC-SHA256 of body under secret (W3C WebSub #signing-content).
func signatureOK(secret, body []byte, header string) bool {
	hexSum, ok := strings.CutPrefix(header, "sha256=")
	if !ok || len(hexSum) != 2*sha256.Size || strings.ToLower(hexSum) != hexSum {
		return false
	}
	got, err := hex.DecodeString(hexSum)
	if err != nil {
		return false
	}
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return hmac.Equal(got, m.Sum(nil))
}

// websubSignature is what the bound signs with: the value the courier
// sends.
func websubSignature(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Phases of a sink: what a delivery POST's entries count toward.
const (
	phaseRelay = iota // arrivals of the relay's deliveries are recorded
	phaseBound        // the bound's POSTs: checked and counted only
)

// wsSink is the callbacks' state, shared by every callback server: the
// subscriptions' secrets, the events whose arrivals it records, and the
// counters. Handlers do the same work in both phases (read, HMAC check,
// id scan, lookups), so the bound's POSTs cost the callbacks what the
// relay's do.
type wsSink struct {
	n       int
	secrets [][]byte
	events  map[string]int // measured event id → index
	probes  map[string]bool
	nEvents int

	phase      atomic.Int32
	verified   []atomic.Bool
	nVerified  atomic.Int64
	lastGet    atomic.Int64 // UnixNano of the latest verification GET
	probeSeen  []atomic.Bool
	nProbed    atomic.Int64
	arrivals   []atomic.Int64 // [sub*nEvents+event]: UnixNano of the first arrival
	arrived    []atomic.Int64 // per event: subscriptions it reached
	last       atomic.Int64   // UnixNano of the latest first arrival
	deliveries atomic.Int64   // delivery POSTs in phaseRelay
	entries    atomic.Int64   // entries in them (repeats included)
	repeats    atomic.Int64   // entries that had arrived before
	badSig     atomic.Int64
	bound      atomic.Int64 // POSTs in phaseBound
	boundLast  atomic.Int64 // UnixNano of the latest in phaseBound

	capMu     sync.Mutex
	capturing bool
	bodies    [][]byte
	bodyIdx   map[[sha256.Size]byte]int
	captured  [][]int // per subscription: indexes into bodies, in arrival order
	bufs      sync.Pool
}

func newWSSink(n int, secrets [][]byte, events []string, probes []string) *wsSink {
	s := &wsSink{n: n, secrets: secrets, events: make(map[string]int, len(events)), probes: make(map[string]bool, len(probes)),
		nEvents: len(events), verified: make([]atomic.Bool, n), probeSeen: make([]atomic.Bool, n),
		arrivals: make([]atomic.Int64, n*len(events)), arrived: make([]atomic.Int64, len(events)),
		bodyIdx: map[[sha256.Size]byte]int{}, captured: make([][]int, n)}
	for i, id := range events {
		s.events[id] = i
	}
	for _, id := range probes {
		s.probes[id] = true
	}
	s.bufs.New = func() any { return new(bytes.Buffer) }
	return s
}

func (s *wsSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	i, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/cb/"))
	if err != nil || i < 0 || i >= s.n {
		http.NotFound(w, r)
		return
	}
	switch r.Method {
	case http.MethodGet: // verification of intent (W3C WebSub #hub-verifies-intent)
		q := r.URL.Query()
		if q.Get("hub.mode") != "subscribe" {
			http.NotFound(w, r)
			return
		}
		if !s.verified[i].Swap(true) {
			s.nVerified.Add(1)
		}
		s.lastGet.Store(time.Now().UnixNano())
		_, _ = io.WriteString(w, q.Get("hub.challenge"))
	case http.MethodPost:
		buf := s.bufs.Get().(*bytes.Buffer)
		buf.Reset()
		_, err := buf.ReadFrom(r.Body)
		body := buf.Bytes()
		now := time.Now().UnixNano()
		if err != nil {
			s.bufs.Put(buf)
			http.Error(w, "read", http.StatusBadRequest)
			return
		}
		if !signatureOK(s.secrets[i], body, r.Header.Get("X-Hub-Signature")) {
			s.badSig.Add(1)
		}
		if s.phase.Load() == phaseBound {
			atomEntryIDs(body, func(id []byte) { _, _ = s.events[string(id)] })
			s.bound.Add(1)
			s.boundLast.Store(now)
		} else {
			s.deliveries.Add(1)
			s.entries.Add(int64(atomEntryIDs(body, func(id []byte) { s.arrive(i, id, now) })))
			s.capture(i, body)
		}
		s.bufs.Put(buf)
		w.WriteHeader(http.StatusNoContent)
	default:
		http.Error(w, "method", http.StatusMethodNotAllowed)
	}
}

// arrive records entry id's arrival at subscription i.
func (s *wsSink) arrive(i int, id []byte, now int64) {
	e, ok := s.events[string(id)]
	if !ok {
		if s.probes[string(id)] && !s.probeSeen[i].Swap(true) {
			s.nProbed.Add(1)
		}
		return
	}
	if !s.arrivals[i*s.nEvents+e].CompareAndSwap(0, now) {
		s.repeats.Add(1)
		return
	}
	s.arrived[e].Add(1)
	for {
		l := s.last.Load()
		if now <= l || s.last.CompareAndSwap(l, now) {
			break
		}
	}
}

// capture keeps, while capturing, which body subscription i received
// (identical bodies once: every subscription of one topic gets the same
// bytes for the same entries).
func (s *wsSink) capture(i int, body []byte) {
	s.capMu.Lock()
	defer s.capMu.Unlock()
	if !s.capturing {
		return
	}
	sum := sha256.Sum256(body)
	k, ok := s.bodyIdx[sum]
	if !ok {
		k = len(s.bodies)
		s.bodies = append(s.bodies, bytes.Clone(body))
		s.bodyIdx[sum] = k
	}
	s.captured[i] = append(s.captured[i], k)
}

// boundJob is one subscription's deliveries for the bound: indexes into
// the captured bodies, sent one at a time, in order.
type boundJob struct {
	callback string
	host     string
	secret   []byte
	bodies   []int
}

// runBound is the bare HMAC-POST loop: each job's bodies POSTed in order
// to its callback, signed with its secret, under the courier's limits
// (one delivery at a time per subscription; per delivery the host's slot
// first, then one of the global slots, as couriers.Runner takes them).
// It returns the deliveries made and the failed ones.
func runBound(ctx context.Context, client *http.Client, bodies [][]byte, jobs []boundJob, concurrency, hostLimit int) (delivered, failed int64) {
	global := make(chan struct{}, concurrency)
	hosts := map[string]chan struct{}{}
	for _, j := range jobs {
		if hosts[j.host] == nil {
			hosts[j.host] = make(chan struct{}, hostLimit)
		}
	}
	var ok, bad atomic.Int64
	var wg sync.WaitGroup
	for _, j := range jobs {
		host := hosts[j.host]
		wg.Go(func() {
			for _, k := range j.bodies {
				if ctx.Err() != nil {
					return
				}
				host <- struct{}{}
				global <- struct{}{}
				body := bodies[k]
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, j.callback, bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/atom+xml")
				req.Header.Set("X-Hub-Signature", websubSignature(j.secret, body))
				res, err := client.Do(req)
				if err == nil {
					_, _ = io.Copy(io.Discard, res.Body)
					res.Body.Close()
				}
				<-global
				<-host
				if err != nil || res.StatusCode/100 != 2 {
					bad.Add(1)
				} else {
					ok.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return ok.Load(), bad.Load()
}

// websubEvents are the signed events of one run: measured (latency, then
// burst) and the readiness probes, as POST requests.
type websubEvents struct {
	ids, probeIDs        []string
	requests, probeBytes [][]byte
}

func makeWebSubEvents(ctx context.Context, client *http.Client, url, token, projectID, repo string, measured, probes int, host string) (websubEvents, error) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	m, err := benchAdmin(client, url, token, "/v1/admin/projects/"+projectID+"/identities", map[string]any{"display_name": "bench"})
	if err != nil {
		return websubEvents{}, err
	}
	identity := m["identity_id"].(string)
	m, err = benchAdmin(client, url, token, "/v1/admin/identities/"+identity+"/keys", map[string]any{"public_key_b64url": correspondence.EncodePublicKey(pub)})
	if err != nil {
		return websubEvents{}, err
	}
	keyID := m["signing_key_id"].(string)
	device, probeSession, session := newBenchUUID(), newBenchUUID(), newBenchUUID()
	now := correspondence.FormatTimestamp(time.Now())
	head := "POST /v1/correspondence/events HTTP/1.1\r\nHost: " + host +
		"\r\nAuthorization: Bearer " + token + "\r\nContent-Type: application/json\r\nContent-Length: "
	var evs websubEvents
	// The probes have a session of their own: only some of them are
	// posted.
	for i := range probes + measured {
		sess, seq := session, i-probes+1
		if i < probes {
			sess, seq = probeSession, i+1
		}
		if ctx.Err() != nil {
			return websubEvents{}, ctx.Err()
		}
		ev := &correspondence.Event{
			ProjectID: projectID, RepositoryID: repo, ThreadID: "bench",
			Sender: correspondence.Sender{IdentityID: identity, SigningKeyID: keyID, DeviceID: device, SessionID: sess},
			Kind:   correspondence.KindProgress, Parents: []string{}, SessionSeq: int64(seq), IssuedAt: now,
			Scope: correspondence.Scope{Paths: []string{"packages/sdk", "docs"}},
			Body: canonicaljson.ObjectValue(canonicaljson.Member{Name: "summary",
				Value: canonicaljson.StringValue("websub bench event " + strconv.Itoa(i) + ": " + strings.Repeat("progress report text ", 40))}),
		}
		if err := ev.Sign(priv); err != nil {
			return websubEvents{}, err
		}
		b, err := ev.CanonicalJSON()
		if err != nil {
			return websubEvents{}, err
		}
		req := append([]byte(head+strconv.Itoa(len(b))+"\r\n\r\n"), b...)
		if i < probes {
			evs.probeIDs, evs.probeBytes = append(evs.probeIDs, ev.ID), append(evs.probeBytes, req)
		} else {
			evs.ids, evs.requests = append(evs.ids, ev.ID), append(evs.requests, req)
		}
	}
	return evs, nil
}

// relayMemory returns the relay's Go heap in use after a GC (from its
// pprof heap page) and its resident set (from /proc).
func relayMemory(pprofURL string, pid int) (heap, rss int64, err error) {
	res, err := http.Get(pprofURL + "/debug/pprof/heap?debug=1&gc=1")
	if err != nil {
		return 0, 0, err
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "# HeapInuse = "); ok {
			heap, _ = strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	if heap == 0 {
		return 0, 0, fmt.Errorf("no HeapInuse in the relay's heap profile")
	}
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
				rss = kb << 10
			}
		}
	}
	return heap, rss, nil
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// waitFor polls cond every 5 ms until it holds, ctx ends or d passes.
func waitFor(ctx context.Context, d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if ctx.Err() != nil || time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}

func websubOnce(ctx context.Context, c websubConfig, n, round int) (websubResult, error) {
	res := websubResult{Label: "websub", Subscriptions: n, CallbackServers: min(n, c.CallbackServers), Concurrency: c.Concurrency,
		HostLimit: c.HostLimit, Events: c.Events, Burst: c.Burst}
	pprofAddr, err := freeAddr()
	if err != nil {
		return res, err
	}
	r, err := startBenchRelay(ctx, benchRun{bin: c.RelayBin, extra: []string{
		"--websub-allow-hosts", "127.0.0.1", "--websub-lease-min", "1s",
		"--websub-retry-initial", "100ms", "--websub-retry-max", "1s", "--pprof-addr", pprofAddr,
		// The caps (issue 27) are not what this measures: every N
		// subscribes to one topic on at most 50 hosts, and with every
		// cap off the hub counts nothing per subscribe.
		"--websub-max-subscriptions-per-topic", "0", "--websub-max-subscriptions-per-host", "0",
		"--websub-max-subscriptions-per-project", "0", "--websub-max-pending-per-host", "0",
		"--websub-concurrency", strconv.Itoa(c.Concurrency), "--websub-host-limit", strconv.Itoa(c.HostLimit)}}, "")
	if err != nil {
		return res, err
	}
	defer r.stop()
	pid, pprofURL := r.cmd.Process.Pid, "http://"+pprofAddr
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	m, err := benchAdmin(client, r.url, r.opToken, "/v1/admin/projects", map[string]any{})
	if err != nil {
		return res, err
	}
	projectID := m["project_id"].(string)
	m, err = benchAdmin(client, r.url, r.opToken, "/v1/admin/projects/"+projectID+"/tokens", map[string]any{"scopes": []string{"read", "append", "admin"}})
	if err != nil {
		return res, err
	}
	token := m["token"].(string)
	const repo = "repo:bench"
	target, _ := neturl.Parse(r.url)
	const probes = 50
	evs, err := makeWebSubEvents(ctx, client, r.url, token, projectID, repo, c.Events+c.Burst, probes, target.Host)
	if err != nil {
		return res, err
	}
	topic := r.url + "/v1/correspondence/events.atom?" + neturl.Values{"project_id": {projectID}, "repository_id": {repo}}.Encode()

	secrets := make([][]byte, n)
	for i := range secrets {
		var b [16]byte
		_, _ = rand.Read(b[:])
		secrets[i] = []byte(hex.EncodeToString(b[:]))
	}
	sink := newWSSink(n, secrets, evs.ids, evs.probeIDs)
	servers := res.CallbackServers
	callbacks := make([]string, n)
	hostOf := make([]string, n)
	for k := range servers {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return res, err
		}
		srv := &http.Server{Handler: sink, ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		defer srv.Close()
		for i := k; i < n; i += servers {
			hostOf[i] = ln.Addr().String()
			callbacks[i] = "http://" + hostOf[i] + "/cb/" + strconv.Itoa(i)
		}
	}

	// The idle baseline: after one event went through the store and the
	// relay's start-up garbage is gone (the first readings after start
	// are megabytes above the later ones).
	ev := &benchConn{}
	defer ev.close()
	post := func(req []byte) (time.Time, error) {
		reused := ev.c != nil
		status, err := ev.post(target.Host, req, nil)
		if err != nil && reused {
			// The relay closed the idle connection while the
			// subscriptions were verified (minutes at N = 10,000): the
			// request did not go out; send it on a new one.
			ev.close()
			status, err = ev.post(target.Host, req, nil)
		}
		at := time.Now()
		if err != nil {
			ev.close()
			return at, err
		}
		if status != http.StatusCreated {
			return at, fmt.Errorf("post event: status %d", status)
		}
		return at, nil
	}
	if _, err := post(evs.probeBytes[0]); err != nil {
		return res, err
	}
	var heap0, rss0 int64
	for range 3 {
		time.Sleep(200 * time.Millisecond)
		if heap0, rss0, err = relayMemory(pprofURL, pid); err != nil {
			return res, err
		}
	}

	// Subscribe: form POSTs from 8 clients.
	start := time.Now()
	var next atomic.Int64
	var subErr atomic.Value
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				form := neturl.Values{"hub.mode": {"subscribe"}, "hub.topic": {topic}, "hub.callback": {callbacks[i]},
					"hub.secret": {string(secrets[i])}, "hub.lease_seconds": {"86400"}}
				req, _ := http.NewRequest(http.MethodPost, r.url+"/websub/hub", strings.NewReader(form.Encode()))
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				req.Header.Set("Authorization", "Bearer "+token)
				resp, err := client.Do(req)
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusAccepted {
						err = fmt.Errorf("subscribe: status %d", resp.StatusCode)
					}
				}
				if err != nil {
					subErr.CompareAndSwap(nil, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err, _ := subErr.Load().(error); err != nil {
		return res, err
	}
	if !waitFor(ctx, c.Wait, func() bool { return sink.nVerified.Load() == int64(n) }) {
		return res, fmt.Errorf("%d of %d subscriptions verified in %s", sink.nVerified.Load(), n, c.Wait)
	}
	// Active once the hub has its challenge back and stored it: probes
	// until every subscription has one (a subscription gets the records
	// after its activation only), then quiet.
	for p := 1; sink.nProbed.Load() < int64(n); p++ {
		if p == probes {
			return res, fmt.Errorf("%d of %d subscriptions received a probe event after %d probes", sink.nProbed.Load(), n, probes)
		}
		if _, err := post(evs.probeBytes[p]); err != nil {
			return res, err
		}
		waitFor(ctx, min(c.Wait, 2*time.Second+time.Duration(n)*time.Millisecond), func() bool { return sink.nProbed.Load() == int64(n) })
	}
	res.VerifySeconds = time.Since(start).Seconds()
	quiet := func() {
		for d := sink.deliveries.Load(); ; {
			time.Sleep(300 * time.Millisecond)
			if d2 := sink.deliveries.Load(); d2 == d {
				return
			} else {
				d = d2
			}
		}
	}
	quiet()
	heap1, rss1, err := relayMemory(pprofURL, pid)
	if err != nil {
		return res, err
	}
	if c.CPUProfileDir != "" {
		if err := saveURL(pprofURL+"/debug/pprof/heap", filepath.Join(c.CPUProfileDir, fmt.Sprintf("heap-N%d-r%d.prof", n, round))); err != nil {
			fmt.Fprintln(os.Stderr, "heap profile:", err)
		}
	}
	res.HeapBytesPerSub = float64(heap1-heap0) / float64(n)
	res.RSSBytesPerSub = float64(rss1-rss0) / float64(n)

	// Latency: one event at a time, each after the previous one's
	// fan-out.
	posted := make([]int64, len(evs.ids))
	for e := range c.Events {
		at, err := post(evs.requests[e])
		if err != nil {
			return res, err
		}
		posted[e] = at.UnixNano()
		waitFor(ctx, c.Wait, func() bool { return sink.arrived[e].Load() == int64(n) })
		time.Sleep(10 * time.Millisecond)
	}
	var lat []time.Duration
	for i := range n {
		for e := range c.Events {
			if a := sink.arrivals[i*sink.nEvents+e].Load(); a != 0 {
				lat = append(lat, time.Duration(a-posted[e]))
			} else {
				res.Missing++
			}
		}
	}
	slices.Sort(lat)
	res.P50Millis = float64(percentile(lat, 0.50)) / 1e6
	res.P99Millis = float64(percentile(lat, 0.99)) / 1e6
	if len(lat) > 0 {
		res.MaxMillis = float64(lat[len(lat)-1]) / 1e6
	}
	quiet()

	// Throughput: the burst from 4 clients, until every entry arrived.
	sink.capMu.Lock()
	sink.capturing = true
	sink.capMu.Unlock()
	d0, e0 := sink.deliveries.Load(), sink.entries.Load()
	var profile chan error
	if c.CPUProfileDir != "" {
		profile = make(chan error, 1)
		secs := 5
		go func() {
			profile <- saveProfile(pprofURL, secs, filepath.Join(c.CPUProfileDir, fmt.Sprintf("cpu-N%d-r%d.prof", n, round)))
		}()
	}
	cpu0, haveCPU := cpuTime(pid)
	busy0, total0, haveStat := machineTicks()
	start = time.Now()
	var errs atomic.Int64
	next.Store(int64(c.Events))
	for range 4 {
		wg.Go(func() {
			bc := &benchConn{}
			defer bc.close()
			for {
				e := int(next.Add(1)) - 1
				if e >= len(evs.requests) {
					return
				}
				status, err := bc.post(target.Host, evs.requests[e], nil)
				posted[e] = time.Now().UnixNano()
				if err != nil {
					bc.close()
				}
				if err != nil || status != http.StatusCreated {
					errs.Add(1)
				}
			}
		})
	}
	wg.Wait()
	burstDone := func() bool {
		for e := c.Events; e < len(evs.ids); e++ {
			if sink.arrived[e].Load() != int64(n) {
				return false
			}
		}
		return true
	}
	complete := waitFor(ctx, c.Wait, burstDone)
	cpu1, _ := cpuTime(pid)
	busy1, total1, _ := machineTicks()
	elapsed := time.Duration(sink.last.Load() - start.UnixNano())
	deliveries, entries := sink.deliveries.Load()-d0, sink.entries.Load()-e0
	res.Errors = errs.Load()
	if !complete {
		res.Errors++
		for e := c.Events; e < len(evs.ids); e++ {
			res.Missing += int64(n) - sink.arrived[e].Load()
		}
	}
	if elapsed > 0 {
		res.EntriesPerSecond = float64(entries) / elapsed.Seconds()
		res.DeliveriesPerSecond = float64(deliveries) / elapsed.Seconds()
	}
	if haveCPU && deliveries > 0 {
		res.ServerCPUMicros = float64(cpu1-cpu0) / float64(time.Microsecond) / float64(deliveries)
		res.ServerCPUMicrosPerEntry = float64(cpu1-cpu0) / float64(time.Microsecond) / float64(entries)
	}
	if haveStat && total1 > total0 {
		res.MachineBusy = float64(busy1-busy0) / float64(total1-total0)
	}
	quiet()
	sink.capMu.Lock()
	sink.capturing = false
	sink.capMu.Unlock()
	if profile != nil {
		if err := <-profile; err != nil {
			fmt.Fprintln(os.Stderr, "cpu profile:", err)
		}
	}

	// The bound: the same deliveries, bare, right after.
	jobs := make([]boundJob, 0, n)
	total := 0
	for i := range n {
		if len(sink.captured[i]) > 0 {
			jobs = append(jobs, boundJob{callback: callbacks[i], host: hostOf[i], secret: secrets[i], bodies: sink.captured[i]})
			total += len(sink.captured[i])
		}
	}
	sink.phase.Store(phaseBound)
	bclient := &http.Client{Transport: &http.Transport{MaxIdleConns: 1000, MaxIdleConnsPerHost: c.HostLimit}}
	start = time.Now()
	delivered, failed := runBound(ctx, bclient, sink.bodies, jobs, c.Concurrency, c.HostLimit)
	belapsed := time.Since(start)
	bclient.CloseIdleConnections()
	res.Errors += failed
	if delivered > 0 {
		res.BoundDeliveriesPerSecond = float64(delivered) / belapsed.Seconds()
		res.RatioToBound = res.DeliveriesPerSecond / res.BoundDeliveriesPerSecond
	}
	res.BadSignatures = sink.badSig.Load()
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	return res, nil
}

// saveProfile saves a CPU profile of secs seconds from the relay's pprof
// server into path.
func saveProfile(pprofURL string, secs int, path string) error {
	return saveURL(pprofURL+"/debug/pprof/profile?seconds="+strconv.Itoa(secs), path)
}

// saveURL saves the body of a GET of url into path.
func saveURL(url, path string) error {
	res, err := http.Get(url)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		return fmt.Errorf("status %d", res.StatusCode)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, res.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
