package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	neturl "net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
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

// acrelay-bench: a load tool, not a test, and not part of the acrelay
// binary operators run. It starts its own relay process (the acrelay
// binary of --relay-bin; unless --url is given), posts N distinct signed events from C
// concurrent clients over loopback, and reports events/s, latency
// percentiles, server CPU per event (from /proc), and the ratio to the
// single-core parse+canonicalize+hash+verify ceiling measured in the same
// run. --compare-one-tx repeats the load against a relay that commits each
// event in its own synchronous=FULL transaction. --compare-http-bound
// repeats it against the http-bound subcommand, a server that does only the
// ceiling's work per request and stores nothing: the most this machine's
// HTTP stack, runtime and kernel leave for any relay (bench_bound.go).
// --compare-durable-bound repeats it against the same server making each
// event durable in a plain log with group commit before its 201: the most
// this machine leaves for a relay that keeps the durability promise.
// --relay-bin-b measures a second relay binary in the same run, round by
// round after the first (A/B), and reports B / A.

type benchConfig struct {
	URL, Token   string
	Events       int
	Clients      int
	CompareOneTx bool
	CompareBound bool
	// CompareDurable measures the durable bound (http-bound
	// --durable-dir).
	CompareDurable bool
	DatabaseURL    string
	JSON           bool
	// Rounds repeats the measurement (interleaving group commit and one
	// transaction per event with --compare-one-tx) and reports medians:
	// on a shared or virtual machine single runs vary by ±15%.
	Rounds int
	// RelayBin is the acrelay binary the relay runs use (resolved by
	// resolveRelayBin when empty); RelayBinB, when set, a second one
	// measured in every round after it.
	RelayBin, RelayBinB string
}

type benchResult struct {
	Label   string `json:"label"`
	Events  int    `json:"events"`
	Clients int    `json:"clients"`
	// Rounds is how many measurements a median result summarizes (0 for a
	// single measurement).
	Rounds          int     `json:"rounds,omitempty"`
	EventsPerSecond float64 `json:"events_per_second"`
	P50Millis       float64 `json:"p50_ms"`
	P99Millis       float64 `json:"p99_ms"`
	ServerCPUMicros float64 `json:"server_cpu_us_per_event"`
	// LoadCPUMicros is this process's CPU (the load generator) per event
	// during the load; MachineBusy is the share of all cores not idle and
	// not waiting for I/O during the load, from /proc/stat (0–1).
	LoadCPUMicros  float64 `json:"load_generator_cpu_us_per_event"`
	MachineBusy    float64 `json:"machine_busy"`
	CeilingPerSec  float64 `json:"single_core_ceiling_per_second"`
	RatioToCeiling float64 `json:"ratio_to_ceiling"`
	Errors         int64   `json:"errors"`
	// Throttled counts 429 answers (the relay's per-token write rate),
	// each retried after its Retry-After and not an error;
	// ThrottledWaitMs is the waiting they asked for, summed over clients.
	Throttled       int64   `json:"throttled,omitempty"`
	ThrottledWaitMs float64 `json:"throttled_wait_ms,omitempty"`
}

// maxThrottledTries bounds the attempts of one event the relay keeps
// answering 429: past it, the event counts as an error.
const maxThrottledTries = 1000

func newBenchCmd() *cobra.Command {
	var c benchConfig
	cmd := &cobra.Command{
		Use:          "acrelay-bench",
		Short:        "Load-test append throughput and latency against a relay (starts its own by default)",
		SilenceUsage: true,
		Args:         cobra.NoArgs,
		Example: `  acrelay-bench --events 20000 --clients 16 --compare-one-tx
  acrelay-bench --url http://127.0.0.1:8080 --token $ACRELAY_TOKEN --events 5000 --clients 16
  acrelay-bench --database-url postgres://postgres@127.0.0.1:5432/postgres --clients 1
  acrelay-bench --relay-bin /tmp/acrelay-old --relay-bin-b ./acrelay --rounds 7 --compare-durable-bound`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if c.Token == "" {
				c.Token = os.Getenv("ACRELAY_TOKEN") // read here, so --help never prints it
			}
			// On SIGINT or SIGTERM the runs stop and the servers they
			// started are stopped and their directories removed.
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runBench(ctx, c, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&c.URL, "url", "", "relay URL (default: start a relay on a temporary SQLite store)")
	f.StringVar(&c.Token, "token", "", "project token with append and admin scopes (with --url; default $ACRELAY_TOKEN)")
	f.IntVar(&c.Events, "events", 10000, "number of distinct events to post")
	f.IntVar(&c.Clients, "clients", 16, "concurrent clients")
	f.BoolVar(&c.CompareOneTx, "compare-one-tx", false, "also measure a relay with one transaction per event (SQLite)")
	f.BoolVar(&c.CompareBound, "compare-http-bound", false, "also measure the no-storage upper bound: an HTTP server on the relay's settings that only parses, canonicalizes, hashes and verifies each event")
	f.BoolVar(&c.CompareDurable, "compare-durable-bound", false, "also measure the durable upper bound: the same server writing each event to a plain log with group commit and fdatasync before its 201")
	f.StringVar(&c.DatabaseURL, "database-url", "", "start the relay on this PostgreSQL database instead of SQLite")
	f.BoolVar(&c.JSON, "json", false, "print results as JSON lines")
	f.IntVar(&c.Rounds, "rounds", 1, "repeat the measurement this many times, interleaved, and report medians")
	f.StringVar(&c.RelayBin, "relay-bin", "", "acrelay binary the relay runs (default: acrelay next to this binary, else built from ./cmd/acrelay with go build)")
	f.StringVar(&c.RelayBinB, "relay-bin-b", "", "a second acrelay binary, measured in every round after --relay-bin; reports B / A")
	return cmd
}

func runBench(ctx context.Context, c benchConfig, out io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if c.Events < 1 || c.Clients < 1 || c.Rounds < 1 {
		return fmt.Errorf("--events, --clients and --rounds must be positive")
	}
	if c.URL != "" && (c.CompareOneTx || c.CompareBound || c.CompareDurable || c.RelayBinB != "") {
		return fmt.Errorf("--compare-one-tx, --compare-http-bound, --compare-durable-bound and --relay-bin-b start their own servers: not with --url")
	}
	if c.URL == "" {
		bin, cleanup, err := resolveRelayBin(ctx, c.RelayBin)
		if err != nil {
			return err
		}
		defer cleanup()
		c.RelayBin = bin
	}
	runs := []benchRun{{bin: c.RelayBin}}
	if c.RelayBinB != "" {
		runs[0].ab = "A"
		runs = append(runs, benchRun{bin: c.RelayBinB, ab: "B"})
	}
	if c.CompareOneTx {
		runs = append(runs, benchRun{maxBatch: 1, bin: c.RelayBin, ab: runs[0].ab})
	}
	if c.CompareBound {
		runs = append(runs, benchRun{maxBatch: boundRun})
	}
	if c.CompareDurable {
		runs = append(runs, benchRun{maxBatch: durableBoundRun})
	}
	results := make([][]benchResult, len(runs))
	for range c.Rounds {
		for i, run := range runs {
			res, err := benchOnce(ctx, c, run)
			if err != nil {
				return err
			}
			results[i] = append(results[i], res)
			printBench(out, c.JSON, res)
		}
	}
	med := make([]benchResult, len(runs))
	for i, rs := range results {
		med[i] = medianBench(rs)
		if c.Rounds > 1 {
			printBench(out, c.JSON, med[i])
		}
	}
	label := func(i int) string {
		return strings.TrimSuffix(med[i].Label, fmt.Sprintf(", median of %d rounds", c.Rounds))
	}
	compare := func(name string, num, den benchResult, x string) {
		if den.EventsPerSecond <= 0 {
			return
		}
		ratio := num.EventsPerSecond / den.EventsPerSecond
		if c.JSON { // --json output stays JSON lines
			b, _ := json.Marshal(map[string]any{"comparison": name, "ratio": math.Round(ratio*1000) / 1000})
			fmt.Fprintln(out, string(b))
		} else {
			fmt.Fprintf(out, "%s = %.2f%s\n", name, ratio, x)
		}
	}
	relays := 1 // runs[0], and runs[1] with --relay-bin-b
	if c.RelayBinB != "" {
		relays = 2
	}
	for r := range relays {
		name := "relay"
		if relays == 2 {
			name = "relay " + runs[r].ab
		}
		for i := relays; i < len(runs); i++ {
			if runs[i].maxBatch == 1 {
				compare("group commit / one-tx-per-event", med[0], med[i], "x")
				continue
			}
			compare(name+" / "+label(i), med[r], med[i], "")
		}
	}
	if relays == 2 {
		compare("B / A", med[1], med[0], "")
	}
	return nil
}

// benchRun is one server a round measures: a relay (maxBatch 0: the
// default group commit; 1: one transaction per event) of binary bin, or
// one of the bounds (boundRun, durableBoundRun), which this binary serves.
// ab is "A" or "B" in an A/B run, else empty.
type benchRun struct {
	maxBatch int
	bin      string
	ab       string
	// extra is appended to the server's command line (the websub
	// subcommand's hub settings).
	extra []string
	// watch, when set, is called once the run's project exists, before
	// the load, with the relay (nil with --url) and the project; the
	// function it returns is called when the load has ended. respond,
	// when set, is given each response's body and arrival time, from the
	// clients' goroutines (the tlog subcommand, tlog.go).
	watch   func(r *benchRelay, projectID string) (stop func())
	respond func(body []byte, at time.Time)
}

// resolveRelayBin returns the acrelay binary to measure: path when given;
// else acrelay in this binary's directory; else one built from
// ./cmd/acrelay with go build into a temporary directory, which cleanup
// removes.
func resolveRelayBin(ctx context.Context, path string) (bin string, cleanup func(), err error) {
	nothing := func() {}
	if path != "" {
		if _, err := exec.LookPath(path); err != nil {
			return "", nil, fmt.Errorf("--relay-bin: %w", err)
		}
		return path, nothing, nil
	}
	if exe, err := os.Executable(); err == nil {
		next := filepath.Join(filepath.Dir(exe), "acrelay")
		if fi, err := os.Stat(next); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return next, nothing, nil
		}
	}
	dir, err := os.MkdirTemp("", "acrelay-bench-bin-")
	if err != nil {
		return "", nil, err
	}
	bin = filepath.Join(dir, "acrelay")
	cmd := exec.CommandContext(ctx, "go", "build", "-tags", "goolm", "-o", bin, "github.com/acrelay/acrelay/cmd/acrelay")
	if out, err := cmd.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("no --relay-bin, no acrelay beside this binary, and go build ./cmd/acrelay failed (run from the module, or pass --relay-bin): %v\n%s", err, out)
	}
	return bin, func() { os.RemoveAll(dir) }, nil
}

// medianBench is the median of each figure over rounds of one
// configuration, labelled as such; Errors is the total.
func medianBench(rs []benchResult) benchResult {
	m := rs[0]
	if len(rs) == 1 {
		return m
	}
	median := func(f func(benchResult) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		slices.Sort(v)
		if len(v)%2 == 1 {
			return v[len(v)/2]
		}
		return (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	m.Label = fmt.Sprintf("%s, median of %d rounds", rs[0].Label, len(rs))
	m.Rounds = len(rs)
	m.EventsPerSecond = median(func(r benchResult) float64 { return r.EventsPerSecond })
	m.P50Millis = median(func(r benchResult) float64 { return r.P50Millis })
	m.P99Millis = median(func(r benchResult) float64 { return r.P99Millis })
	m.ServerCPUMicros = median(func(r benchResult) float64 { return r.ServerCPUMicros })
	m.LoadCPUMicros = median(func(r benchResult) float64 { return r.LoadCPUMicros })
	m.MachineBusy = median(func(r benchResult) float64 { return r.MachineBusy })
	m.CeilingPerSec = median(func(r benchResult) float64 { return r.CeilingPerSec })
	m.RatioToCeiling = median(func(r benchResult) float64 { return r.RatioToCeiling })
	m.Errors, m.Throttled, m.ThrottledWaitMs = 0, 0, 0
	for _, r := range rs {
		m.Errors += r.Errors
		m.Throttled += r.Throttled
		m.ThrottledWaitMs += r.ThrottledWaitMs
	}
	return m
}

func printBench(out io.Writer, asJSON bool, r benchResult) {
	if asJSON {
		b, _ := json.Marshal(r)
		fmt.Fprintln(out, string(b))
		return
	}
	fmt.Fprintf(out, "%s: %d events, %d clients: %.0f events/s, p50 %.2f ms, p99 %.2f ms, server CPU %.1f µs/event, "+
		"single-core verify ceiling %.0f/s, ratio %.2f, errors %d%s (load generator %.1f µs/event, machine %.0f%% busy)\n",
		r.Label, r.Events, r.Clients, r.EventsPerSecond, r.P50Millis, r.P99Millis, r.ServerCPUMicros, r.CeilingPerSec, r.RatioToCeiling, r.Errors,
		throttledText(r), r.LoadCPUMicros, 100*r.MachineBusy)
}

// throttledText is ", throttled N (429, retried after Retry-After)" when
// the relay throttled any post, else "".
func throttledText(r benchResult) string {
	if r.Throttled == 0 {
		return ""
	}
	return fmt.Sprintf(", throttled %d (429, retried after Retry-After)", r.Throttled)
}

// boundRun and durableBoundRun are the maxBatch values of runs against
// http-bound, without and with --durable-dir.
const (
	boundRun        = -1
	durableBoundRun = -2
)

// benchNoLimits turns the relay's rates and hub caps off (as environment
// variables, which a relay built before them ignores): the benches measure
// one token's appends and thousands of subscriptions from one address.
// Flags a run adds (as acrelay-bench hostile does) override them.
var benchNoLimits = []string{"ACRELAY_RATE_CLIENT=0", "ACRELAY_RATE_TOKEN_WRITES=0",
	"ACRELAY_WEBSUB_MAX_SUBSCRIPTIONS_PER_TOPIC=0", "ACRELAY_WEBSUB_MAX_SUBSCRIPTIONS_PER_HOST=0",
	"ACRELAY_WEBSUB_MAX_SUBSCRIPTIONS_PER_PROJECT=0", "ACRELAY_WEBSUB_MAX_PENDING_PER_HOST=0"}

// benchRelay is a relay process started by the bench.
type benchRelay struct {
	cmd     *exec.Cmd
	url     string
	opToken string
	dir     string
	exited  chan struct{} // closed once the process has exited
}

// benchServerArgs is the command line (after the binary) of the server a
// run measures: a relay (maxBatch 0: the default group commit; > 0: that
// batch limit, 1 for one transaction per event) on SQLite in dir or on
// databaseURL, or one of the bounds, which store nothing in a database
// (the durable one writes its log in dir).
func benchServerArgs(maxBatch int, addr, dir, databaseURL string) []string {
	switch maxBatch {
	case boundRun:
		return []string{"http-bound", "--addr", addr}
	case durableBoundRun:
		return []string{"http-bound", "--addr", addr, "--durable-dir", dir}
	}
	args := []string{"serve", "--addr", addr, "--data-dir", dir, "--log-level", "warn"}
	if maxBatch > 0 {
		args = append(args, "--sqlite-max-batch", strconv.Itoa(maxBatch))
	}
	if databaseURL != "" {
		args = append(args, "--database-url", databaseURL)
	}
	return args
}

// startBenchRelay starts run's server: a relay of run.bin, or a bound
// served by this binary.
func startBenchRelay(ctx context.Context, run benchRun, databaseURL string) (_ *benchRelay, err error) {
	exe := run.bin
	if run.maxBatch == boundRun || run.maxBatch == durableBoundRun {
		if exe, err = os.Executable(); err != nil {
			return nil, err
		}
	}
	dir, err := os.MkdirTemp("", "acrelay-bench-")
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	var tok [24]byte
	_, _ = rand.Read(tok[:])
	op := hex.EncodeToString(tok[:])
	cmd := exec.Command(exe, append(benchServerArgs(run.maxBatch, addr, dir, databaseURL), run.extra...)...)
	cmd.Env = append(append(os.Environ(), "ACRELAY_OPERATOR_TOKEN="+op), benchNoLimits...)
	cmd.Stdout, cmd.Stderr = io.Discard, os.Stderr
	stopWithParent(cmd)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	r := &benchRelay{cmd: cmd, url: "http://" + addr, opToken: op, dir: dir, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(r.exited) }()
	deadline := time.NewTimer(15 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if res, err := http.Get(r.url + "/healthz"); err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				return r, nil
			}
		}
		select {
		case <-r.exited:
			return nil, fmt.Errorf("bench server %q exited before it became healthy (its error is above)", cmd.Args[1])
		case <-ctx.Done():
			r.stop()
			return nil, ctx.Err()
		case <-deadline.C:
			r.stop()
			return nil, fmt.Errorf("bench server %q did not become healthy in 15s", cmd.Args[1])
		case <-tick.C:
		}
	}
}

// stop interrupts the server (SIGINT: it drains and closes its store),
// kills it after 10 s, and removes its directory once it has exited.
func (r *benchRelay) stop() {
	_ = r.cmd.Process.Signal(os.Interrupt)
	select {
	case <-r.exited:
	case <-time.After(10 * time.Second):
		_ = r.cmd.Process.Kill()
		<-r.exited
	}
	os.RemoveAll(r.dir)
}

// machineTicks returns the busy and total CPU ticks of all cores from
// /proc/stat; busy excludes idle and iowait.
func machineTicks() (busy, total int64, ok bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 6 || f[0] != "cpu" {
		return 0, 0, false
	}
	for i, v := range f[1:] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, 0, false
		}
		total += n
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return busy, total, true
}

// cpuTime returns the process's user+system CPU time from /proc.
func cpuTime(pid int) (time.Duration, bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, false
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	const clkTck = 100 // Linux USER_HZ
	return time.Duration(ut+st) * time.Second / clkTck, true
}

// benchConn is one load-generating client connection.
type benchConn struct {
	c  net.Conn
	br *bufio.Reader
}

// post sends one prepared request and reads its response, dialing first
// when bc has no connection; with body non-nil, the response's body is
// read into it.
// post sends one prepared request and reads the answer's status.
func (bc *benchConn) post(host string, req []byte, body *bytes.Buffer) (int, error) {
	status, _, err := bc.postWait(host, req, body)
	return status, err
}

// postWait is post that also returns, for a 429, the wait its Retry-After
// asks for (RFC 9110 §10.2.3, delay seconds; 1 s when absent or
// unreadable).
func (bc *benchConn) postWait(host string, req []byte, body *bytes.Buffer) (int, time.Duration, error) {
	if bc.c == nil {
		c, err := net.Dial("tcp", host)
		if err != nil {
			return 0, 0, err
		}
		*bc = benchConn{c: c, br: bufio.NewReaderSize(c, 16<<10)}
	}
	if _, err := bc.c.Write(req); err != nil {
		return 0, 0, err
	}
	res, err := http.ReadResponse(bc.br, nil)
	if err != nil {
		return 0, 0, err
	}
	var wait time.Duration
	if res.StatusCode == http.StatusTooManyRequests {
		wait = time.Second
		if n, err := strconv.Atoi(res.Header.Get("Retry-After")); err == nil && n >= 0 {
			wait = time.Duration(n) * time.Second
		}
	}
	if body != nil {
		body.Reset()
		_, err = body.ReadFrom(res.Body)
	} else {
		_, err = io.Copy(io.Discard, res.Body)
	}
	res.Body.Close()
	if err == nil && res.Close {
		bc.close() // the relay closes the connection: the next post dials again
	}
	return res.StatusCode, wait, err
}

func (bc *benchConn) close() {
	if bc.c != nil {
		bc.c.Close()
		bc.c = nil
	}
}

func benchAdmin(client *http.Client, url, token, path string, in any) (map[string]any, error) {
	b, _ := json.Marshal(in)
	req, _ := http.NewRequest("POST", url+path, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	res, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(res.Body).Decode(&m); err != nil || res.StatusCode/100 != 2 {
		return nil, fmt.Errorf("%s: status %d %v", path, res.StatusCode, m["error"])
	}
	return m, nil
}

func benchOnce(ctx context.Context, c benchConfig, run benchRun) (benchResult, error) {
	maxBatch := run.maxBatch
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: c.Clients * 2, MaxConnsPerHost: c.Clients * 2}}
	url, token := c.URL, c.Token
	pid := 0
	label := "sqlite group commit"
	if c.DatabaseURL != "" {
		label = "postgres"
	}
	switch maxBatch {
	case 1:
		label = "sqlite one-tx-per-event"
	case boundRun:
		label = "http bound (no store)"
	case durableBoundRun:
		label = "durable bound (log + fdatasync)"
	}
	if run.ab != "" {
		label += " (" + run.ab + ")"
	}
	var projectID string
	var relay *benchRelay
	if url == "" {
		r, err := startBenchRelay(ctx, run, c.DatabaseURL)
		if err != nil {
			return benchResult{}, err
		}
		defer r.stop()
		relay = r
		url, pid = r.url, r.cmd.Process.Pid
		m, err := benchAdmin(client, url, r.opToken, "/v1/admin/projects", map[string]any{})
		if err != nil {
			return benchResult{}, err
		}
		projectID = m["project_id"].(string)
		m, err = benchAdmin(client, url, r.opToken, "/v1/admin/projects/"+projectID+"/tokens", map[string]any{"scopes": []string{"read", "append", "admin"}})
		if err != nil {
			return benchResult{}, err
		}
		token = m["token"].(string)
	} else {
		label = "external relay"
		req, _ := http.NewRequest("GET", url+"/v1/whoami", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := client.Do(req)
		if err != nil {
			return benchResult{}, err
		}
		var who struct {
			ProjectID string `json:"project_id"`
		}
		_ = json.NewDecoder(res.Body).Decode(&who)
		res.Body.Close()
		projectID = who.ProjectID
	}

	// One identity and key, and as many sessions as clients: event i is
	// session i mod C's (i / C + 1)th. Clients take events in order from
	// one counter, so a session's events are spread over the clients and
	// may arrive slightly out of order, as from an agent with parallel
	// workers. (Kept so that figures stay comparable across sessions.)
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	m, err := benchAdmin(client, url, token, "/v1/admin/projects/"+projectID+"/identities", map[string]any{"display_name": "bench"})
	if err != nil {
		return benchResult{}, err
	}
	identity := m["identity_id"].(string)
	m, err = benchAdmin(client, url, token, "/v1/admin/identities/"+identity+"/keys", map[string]any{"public_key_b64url": correspondence.EncodePublicKey(pub)})
	if err != nil {
		return benchResult{}, err
	}
	keyID := m["signing_key_id"].(string)

	bodies := make([][]byte, c.Events)
	device := newBenchUUID()
	sessions := make([]string, c.Clients)
	for i := range sessions {
		sessions[i] = newBenchUUID()
	}
	now := correspondence.FormatTimestamp(time.Now())
	for i := range bodies {
		ev := &correspondence.Event{
			ProjectID: projectID, RepositoryID: "repo:bench", ThreadID: "bench-" + strconv.Itoa(i%c.Clients),
			Sender: correspondence.Sender{IdentityID: identity, SigningKeyID: keyID, DeviceID: device, SessionID: sessions[i%c.Clients]},
			Kind:   correspondence.KindProgress, Parents: []string{}, SessionSeq: int64(i/c.Clients + 1), IssuedAt: now,
			Scope: correspondence.Scope{Paths: []string{"packages/sdk", "docs"}},
			Body: canonicaljson.ObjectValue(canonicaljson.Member{Name: "summary",
				Value: canonicaljson.StringValue("bench event " + strconv.Itoa(i) + ": " + strings.Repeat("progress report text ", 40))}),
		}
		if i%1024 == 0 && ctx.Err() != nil {
			return benchResult{}, fmt.Errorf("bench interrupted: %w", ctx.Err())
		}
		if err := ev.Sign(priv); err != nil {
			return benchResult{}, err
		}
		if bodies[i], err = ev.CanonicalJSON(); err != nil {
			return benchResult{}, err
		}
	}

	// Single-core ceiling: parse + validate + canonicalize + hash + verify.
	runtime.GC()
	start := time.Now()
	for _, b := range bodies {
		ev, err := correspondence.ParseEvent(b)
		if err != nil {
			return benchResult{}, err
		}
		if _, err := ev.CanonicalJSON(); err != nil {
			return benchResult{}, err
		}
		if err := ev.Verify(pub); err != nil {
			return benchResult{}, err
		}
	}
	ceiling := float64(len(bodies)) / time.Since(start).Seconds()

	// Each client is one keep-alive connection that writes prepared
	// request bytes and parses each response with net/http's reader: the
	// load generator shares the machine's cores with the relay, so it
	// spends as little of them as it can (as wrk does).
	target, err := neturl.Parse(url)
	if err != nil {
		return benchResult{}, err
	}
	head := "POST " + target.Path + "/v1/correspondence/events HTTP/1.1\r\nHost: " + target.Host +
		"\r\nAuthorization: Bearer " + token + "\r\nContent-Type: application/json\r\nContent-Length: "
	requests := make([][]byte, len(bodies))
	for i, b := range bodies {
		requests[i] = append([]byte(head+strconv.Itoa(len(b))+"\r\n\r\n"), b...)
	}
	lat := make([]time.Duration, len(bodies))
	stopWatch := func() {}
	if run.watch != nil {
		stopWatch = run.watch(relay, projectID)
	}
	var next atomic.Int64
	var errs, limited, throttledWait atomic.Int64
	cpu0, haveCPU := cpuTime(pid)
	self0, _ := cpuTime(os.Getpid())
	busy0, total0, haveStat := machineTicks()
	start = time.Now()
	var wg sync.WaitGroup
	for w := 0; w < c.Clients; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bc := &benchConn{}
			defer bc.close()
			var body *bytes.Buffer
			if run.respond != nil {
				body = new(bytes.Buffer)
			}
			for ctx.Err() == nil { // interrupted: stop posting
				i := int(next.Add(1)) - 1
				if i >= len(bodies) {
					return
				}
				t0 := time.Now()
				status, wait, err := bc.postWait(target.Host, requests[i], body)
				// A relay the bench did not start applies its per-token
				// write rate: a 429 is throttling, not a failure. Wait as
				// Retry-After says and send the same event again; its
				// latency is that of the attempt that was answered.
				for tries := 1; err == nil && status == http.StatusTooManyRequests && tries < maxThrottledTries && ctx.Err() == nil; tries++ {
					limited.Add(1)
					throttledWait.Add(int64(wait))
					select {
					case <-ctx.Done():
					case <-time.After(wait):
					}
					t0 = time.Now()
					status, wait, err = bc.postWait(target.Host, requests[i], body)
				}
				lat[i] = time.Since(t0)
				if body != nil && err == nil && status == 201 {
					run.respond(body.Bytes(), t0.Add(lat[i]))
				}
				if err != nil {
					bc.close() // the next post dials again
				}
				if err != nil || status/100 != 2 {
					errs.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	stopWatch()
	if err := ctx.Err(); err != nil {
		return benchResult{}, fmt.Errorf("bench interrupted: %w", err)
	}
	if n := limited.Load(); n > 0 {
		// A relay the bench did not start applies its own request rates.
		fmt.Fprintf(os.Stderr, "acrelay-bench: the relay throttled %d posts (429 rate_limited; each retried after its Retry-After, %s waited in all): it limits writes per token (--rate-token-writes), so events/s is that rate, not ingest; start it with --rate-token-writes 0 to measure ingest\n",
			n, time.Duration(throttledWait.Load()).Round(time.Millisecond))
	}
	cpu1, _ := cpuTime(pid)
	self1, _ := cpuTime(os.Getpid())
	busy1, total1, _ := machineTicks()
	slices.Sort(lat)
	res := benchResult{
		Label: label, Events: len(bodies), Clients: c.Clients,
		EventsPerSecond: float64(len(bodies)) / elapsed.Seconds(),
		P50Millis:       float64(lat[len(lat)/2]) / 1e6,
		P99Millis:       float64(lat[len(lat)*99/100]) / 1e6,
		CeilingPerSec:   ceiling,
		Errors:          errs.Load(),
		Throttled:       limited.Load(),
		ThrottledWaitMs: float64(throttledWait.Load()) / 1e6,
	}
	if haveCPU {
		res.ServerCPUMicros = float64(cpu1-cpu0) / float64(time.Microsecond) / float64(len(bodies))
	}
	res.LoadCPUMicros = float64(self1-self0) / float64(time.Microsecond) / float64(len(bodies))
	if haveStat && total1 > total0 {
		res.MachineBusy = float64(busy1-busy0) / float64(total1-total0)
	}
	res.RatioToCeiling = res.EventsPerSecond / ceiling
	return res, nil
}

func newBenchUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
