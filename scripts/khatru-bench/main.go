// khatru-bench: the comparison side of scripts/bench_khatru.sh. It is
// not part of acrelay (its own module, so acrelay's go.mod gains no nostr
// dependencies) and not part of the test command.
//
//	khatru-bench relay --backend badger|sqlite3 [--synchronous FULL|NORMAL] --dir D --addr A
//	khatru-bench run   --backend badger|sqlite3 [--synchronous FULL|NORMAL] --events N --clients C
//	khatru-bench table < results.jsonl
//
// relay serves a khatru v0.19.1 relay on one eventstore backend: badger
// (its defaults: SyncWrites false, no fsync before OK) or sqlite3 (mattn
// go-sqlite3, WAL, synchronous FULL — the WAL is fsynced at every commit,
// and eventstore commits each event alone before khatru answers OK, the
// same durability as acrelay's fdatasync before 201 — or NORMAL, no fsync
// on commit).
//
// run starts this binary's relay subcommand on a temporary directory,
// signs N kind-1 events of about 1.5 KB with C keys ahead of time (signing
// is not measured), opens C go-nostr websocket connections, and has each
// client publish events taken in order from one counter, waiting for each
// OK before the next (as acrelay-bench's clients wait for each 201). It
// prints one JSON line with the field names of acrelay-bench --json:
// events/s, p50/p99 latency (ms), the relay process's user+system CPU per
// event read from /proc/PID/stat before and after the load (µs), this
// process's CPU per event, and the machine's busy share from /proc/stat.
//
// table reads JSON lines (acrelay-bench --json's and run's, in the order
// the rounds ran) and prints a Markdown table of medians and the ratios of
// each round.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/dgraph-io/badger/v4"
	eventbadger "github.com/fiatjaf/eventstore/badger"
	"github.com/fiatjaf/eventstore/sqlite3"
	"github.com/fiatjaf/khatru"
	"github.com/nbd-wtf/go-nostr"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: khatru-bench relay|run|table [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "relay":
		err = relayMain(os.Args[2:])
	case "run":
		err = runMain(os.Args[2:])
	case "table":
		err = tableMain(os.Stdin, os.Stdout)
	default:
		err = fmt.Errorf("unknown subcommand %q (relay, run, table)", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "khatru-bench:", err)
		os.Exit(1)
	}
}

// relayMain serves khatru on addr until SIGINT or SIGTERM, then closes the
// store.
func relayMain(args []string) error {
	fs := flag.NewFlagSet("relay", flag.ExitOnError)
	backend := fs.String("backend", "badger", "eventstore backend: badger or sqlite3")
	syncMode := fs.String("synchronous", "FULL", "sqlite3: PRAGMA synchronous (FULL or NORMAL), journal_mode is WAL")
	dir := fs.String("dir", "", "data directory")
	addr := fs.String("addr", "127.0.0.1:0", "listen address")
	_ = fs.Parse(args)
	if *dir == "" {
		return errors.New("relay: --dir is required")
	}
	relay := khatru.NewRelay()
	relay.Log.SetOutput(io.Discard)
	var closeStore func()
	switch *backend {
	case "badger":
		db := &eventbadger.BadgerBackend{Path: filepath.Join(*dir, "badger"),
			BadgerOptionsModifier: func(o badger.Options) badger.Options { return o.WithLoggingLevel(badger.WARNING) }}
		if err := db.Init(); err != nil {
			return err
		}
		relay.StoreEvent = append(relay.StoreEvent, db.SaveEvent)
		relay.QueryEvents = append(relay.QueryEvents, db.QueryEvents)
		relay.CountEvents = append(relay.CountEvents, db.CountEvents)
		relay.DeleteEvent = append(relay.DeleteEvent, db.DeleteEvent)
		relay.ReplaceEvent = append(relay.ReplaceEvent, db.ReplaceEvent)
		closeStore = db.Close
	case "sqlite3":
		mode := strings.ToUpper(*syncMode)
		if mode != "FULL" && mode != "NORMAL" {
			return fmt.Errorf("relay: --synchronous %q: FULL or NORMAL", *syncMode)
		}
		// mattn/go-sqlite3 applies these to every connection of the pool.
		db := &sqlite3.SQLite3Backend{DatabaseURL: "file:" + filepath.Join(*dir, "khatru.db") +
			"?_journal_mode=WAL&_synchronous=" + mode + "&_busy_timeout=10000"}
		if err := db.Init(); err != nil {
			return err
		}
		var journal string
		var synchronous int
		if err := db.DB.QueryRow("PRAGMA journal_mode").Scan(&journal); err != nil {
			return err
		}
		if err := db.DB.QueryRow("PRAGMA synchronous").Scan(&synchronous); err != nil {
			return err
		}
		want := map[string]int{"NORMAL": 1, "FULL": 2}[mode]
		if journal != "wal" || synchronous != want {
			return fmt.Errorf("relay: sqlite3 runs journal_mode=%s synchronous=%d, want wal and %d", journal, synchronous, want)
		}
		relay.StoreEvent = append(relay.StoreEvent, db.SaveEvent)
		relay.QueryEvents = append(relay.QueryEvents, db.QueryEvents)
		relay.CountEvents = append(relay.CountEvents, db.CountEvents)
		relay.DeleteEvent = append(relay.DeleteEvent, db.DeleteEvent)
		relay.ReplaceEvent = append(relay.ReplaceEvent, db.ReplaceEvent)
		closeStore = db.Close
	default:
		return fmt.Errorf("relay: --backend %q: badger or sqlite3", *backend)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: relay}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	err = srv.Serve(ln)
	closeStore()
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// result has acrelay-bench --json's field names, plus the backend and the
// mean serialized event size.
type result struct {
	Label           string  `json:"label"`
	Events          int     `json:"events"`
	Clients         int     `json:"clients"`
	EventsPerSecond float64 `json:"events_per_second"`
	P50Millis       float64 `json:"p50_ms"`
	P99Millis       float64 `json:"p99_ms"`
	ServerCPUMicros float64 `json:"server_cpu_us_per_event"`
	LoadCPUMicros   float64 `json:"load_generator_cpu_us_per_event"`
	MachineBusy     float64 `json:"machine_busy"`
	Errors          int64   `json:"errors"`
	EventBytes      float64 `json:"event_bytes"`
	LoadAverage     string  `json:"load_average,omitempty"`
}

func runMain(args []string) error {
	fs := flag.NewFlagSet("run", flag.ExitOnError)
	backend := fs.String("backend", "badger", "eventstore backend: badger or sqlite3")
	syncMode := fs.String("synchronous", "FULL", "sqlite3: FULL or NORMAL")
	events := fs.Int("events", 20000, "distinct events to publish")
	clients := fs.Int("clients", 8, "concurrent websocket clients")
	_ = fs.Parse(args)
	if *events < 1 || *clients < 1 {
		return errors.New("run: --events and --clients must be positive")
	}
	label := "khatru badger (no fsync)"
	if *backend == "sqlite3" {
		label = "khatru sqlite3 WAL synchronous=" + strings.ToUpper(*syncMode)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	// Sign ahead of time: event i belongs to key i mod C.
	keys := make([]string, *clients)
	for i := range keys {
		keys[i] = nostr.GeneratePrivateKey()
	}
	filler := strings.Repeat("progress report text ", 61)
	evs := make([]nostr.Event, *events)
	var size int
	now := nostr.Now()
	for i := range evs {
		evs[i] = nostr.Event{CreatedAt: now, Kind: 1,
			Tags:    nostr.Tags{{"t", "bench"}, {"client", strconv.Itoa(i % *clients)}},
			Content: "bench event " + strconv.Itoa(i) + ": " + filler}
		if err := evs[i].Sign(keys[i%*clients]); err != nil {
			return err
		}
		size += len(evs[i].String())
	}

	dir, err := os.MkdirTemp("", "khatru-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	addr := ln.Addr().String()
	ln.Close()
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(exe, "relay", "--backend", *backend, "--synchronous", *syncMode, "--dir", dir, "--addr", addr)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	defer func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}()
	url := "ws://" + addr
	if err := waitHealthy(ctx, "http://"+addr, exited); err != nil {
		return err
	}
	conns := make([]*nostr.Relay, *clients)
	for i := range conns {
		if conns[i], err = nostr.RelayConnect(ctx, url); err != nil {
			return err
		}
		defer conns[i].Close()
	}

	lat := make([]time.Duration, len(evs))
	var next atomic.Int64
	var errs atomic.Int64
	var firstErr atomic.Value
	pid := cmd.Process.Pid
	cpu0, haveCPU := cpuTime(pid)
	self0, _ := cpuTime(os.Getpid())
	busy0, total0, haveStat := machineTicks()
	start := time.Now()
	var wg sync.WaitGroup
	for w := range conns {
		wg.Add(1)
		go func(r *nostr.Relay) {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= len(evs) {
					return
				}
				t0 := time.Now()
				pctx, cancel := context.WithTimeout(ctx, 60*time.Second)
				err := r.Publish(pctx, evs[i])
				cancel()
				lat[i] = time.Since(t0)
				if err != nil {
					errs.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
				}
			}
		}(conns[w])
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("run interrupted: %w", err)
	}
	cpu1, _ := cpuTime(pid)
	self1, _ := cpuTime(os.Getpid())
	busy1, total1, _ := machineTicks()
	if e := firstErr.Load(); e != nil {
		fmt.Fprintf(os.Stderr, "khatru-bench: %d publishes failed, the first: %s\n", errs.Load(), e)
	}
	slices.Sort(lat)
	n := float64(len(evs))
	res := result{Label: label, Events: len(evs), Clients: *clients,
		EventsPerSecond: n / elapsed.Seconds(),
		P50Millis:       float64(lat[len(lat)/2]) / 1e6,
		P99Millis:       float64(lat[len(lat)*99/100]) / 1e6,
		LoadCPUMicros:   float64(self1-self0) / float64(time.Microsecond) / n,
		Errors:          errs.Load(),
		EventBytes:      float64(size) / n,
	}
	if haveCPU {
		res.ServerCPUMicros = float64(cpu1-cpu0) / float64(time.Microsecond) / n
	}
	if haveStat && total1 > total0 {
		res.MachineBusy = float64(busy1-busy0) / float64(total1-total0)
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		res.LoadAverage = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	b, _ := json.Marshal(res)
	fmt.Println(string(b))
	if res.Errors > 0 {
		return fmt.Errorf("%d of %d publishes failed", res.Errors, len(evs))
	}
	return nil
}

// waitHealthy polls the relay's NIP-11 document until it answers 200.
func waitHealthy(ctx context.Context, base string, exited <-chan struct{}) error {
	deadline := time.After(30 * time.Second)
	for {
		req, _ := http.NewRequestWithContext(ctx, "GET", base+"/", nil)
		req.Header.Set("Accept", "application/nostr+json")
		if res, err := http.DefaultClient.Do(req); err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				return nil
			}
		}
		select {
		case <-exited:
			return errors.New("relay exited before it answered (its error is above)")
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline:
			return errors.New("relay did not answer in 30s")
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// cpuTime is the process's user+system CPU time from /proc/PID/stat
// (fields 14 and 15, in USER_HZ ticks), as acrelay-bench reads it.
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

// machineTicks is the busy (not idle, not iowait) and total CPU ticks of
// all cores from /proc/stat.
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
		if i != 3 && i != 4 {
			busy += n
		}
	}
	return busy, total, true
}

// tableMain prints medians per configuration (label and clients, in the
// order first seen) and, per round, acrelay's rate over each khatru
// configuration's at the same client count. The k-th line of a
// configuration is its round k.
func tableMain(in io.Reader, out io.Writer) error {
	type key struct {
		label   string
		clients int
	}
	var order []key
	rounds := map[key][]result{}
	loads := []string{}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "# load ") {
			loads = append(loads, strings.TrimPrefix(line, "# load "))
			continue
		}
		if !strings.HasPrefix(line, "{") || strings.Contains(line, `"comparison"`) {
			continue
		}
		var r result
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			return fmt.Errorf("table: %q: %w", line, err)
		}
		if strings.HasPrefix(r.Label, "sqlite group commit") {
			r.Label = "acrelay SQLite (fdatasync before 201)"
		}
		k := key{r.Label, r.Clients}
		if _, ok := rounds[k]; !ok {
			order = append(order, k)
		}
		rounds[k] = append(rounds[k], r)
	}
	if err := sc.Err(); err != nil {
		return err
	}
	median := func(rs []result, f func(result) float64) float64 {
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
	perRound := func(rs []result, f func(result) float64, format string) string {
		s := make([]string, len(rs))
		for i, r := range rs {
			s[i] = fmt.Sprintf(format, f(r))
		}
		return strings.Join(s, "; ")
	}
	eps := func(r result) float64 { return r.EventsPerSecond }
	cpu := func(r result) float64 { return r.ServerCPUMicros }
	fmt.Fprintln(out, "| configuration | clients | events/s, median (per round) | server CPU per event, median (per round) | load generator CPU per event | p50 / p99 ms (median) | errors |")
	fmt.Fprintln(out, "|---|---|---|---|---|---|---|")
	for _, k := range order {
		rs := rounds[k]
		var e int64
		for _, r := range rs {
			e += r.Errors
		}
		fmt.Fprintf(out, "| %s | %d | %s (%s) | %.0f µs (%s) | %.0f µs | %.2f / %.2f | %d |\n", k.label, k.clients,
			commas(median(rs, eps)), perRound(rs, eps, "%.0f"), median(rs, cpu), perRound(rs, cpu, "%.0f"),
			median(rs, func(r result) float64 { return r.LoadCPUMicros }),
			median(rs, func(r result) float64 { return r.P50Millis }), median(rs, func(r result) float64 { return r.P99Millis }), e)
	}
	fmt.Fprintln(out)
	fmt.Fprintln(out, "| ratio (events/s, same round) | clients | median | per round |")
	fmt.Fprintln(out, "|---|---|---|---|")
	for _, num := range order {
		if !strings.HasPrefix(num.label, "acrelay") {
			continue
		}
		for _, den := range order {
			if den.clients != num.clients || den == num || strings.HasPrefix(den.label, "acrelay") {
				continue
			}
			a, b := rounds[num], rounds[den]
			n := min(len(a), len(b))
			if n == 0 {
				continue
			}
			rs := make([]float64, n)
			s := make([]string, n)
			for i := range n {
				rs[i] = a[i].EventsPerSecond / b[i].EventsPerSecond
				s[i] = fmt.Sprintf("%.2f", rs[i])
			}
			sorted := slices.Clone(rs)
			slices.Sort(sorted)
			med := sorted[n/2]
			if n%2 == 0 {
				med = (sorted[n/2-1] + sorted[n/2]) / 2
			}
			fmt.Fprintf(out, "| acrelay ÷ %s | %d | %.2f | %s |\n", den.label, num.clients, med, strings.Join(s, "; "))
		}
	}
	if len(loads) > 0 {
		one := make([]float64, 0, len(loads))
		for _, l := range loads {
			if v, err := strconv.ParseFloat(strings.Fields(l)[0], 64); err == nil {
				one = append(one, v)
			}
		}
		slices.Sort(one)
		if len(one) > 0 {
			fmt.Fprintf(out, "\nload average (1 min) before each run: %.2f–%.2f, median %.2f over %d readings\n",
				one[0], one[len(one)-1], one[len(one)/2], len(one))
		}
	}
	return nil
}

// commas formats a rate as an integer with thousands separators.
func commas(v float64) string {
	s := strconv.FormatInt(int64(math.Round(v)), 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
