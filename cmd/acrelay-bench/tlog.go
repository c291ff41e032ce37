package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"
	_ "modernc.org/sqlite" // reads the relay's tree head beside it
)

// acrelay-bench tlog: the verifiable log's figures (issue 24), each
// against a bound measured in the same run: ingest of a relay running the
// sequencer against the same relay with --log-sequencer=false (rounds
// interleaved, medians); the checkpoint lag of every record, from its 201
// to the first moment the project's stored tree head covers it (polled
// from the database, in both runs so they carry the same load); and the
// tree's stored bytes per record after a larger run.

type tlogBenchConfig struct {
	Events, Clients, Rounds int
	// SizeEvents is the run after the rounds that measures the tree's
	// bytes per record (0 skips it).
	SizeEvents  int
	DatabaseURL string
	RelayBin    string
	Poll        time.Duration
	JSON        bool
}

type tlogBenchResult struct {
	Events               int     `json:"events"`
	Clients              int     `json:"clients"`
	Rounds               int     `json:"rounds"`
	Engine               string  `json:"engine"`
	WithoutPerSecond     float64 `json:"without_log_events_per_second"`
	WithPerSecond        float64 `json:"with_log_events_per_second"`
	Ratio                float64 `json:"with_over_without"`
	LagRecords           int     `json:"lag_records"`
	LagP50Millis         float64 `json:"checkpoint_lag_p50_ms"`
	LagP99Millis         float64 `json:"checkpoint_lag_p99_ms"`
	LagMaxMillis         float64 `json:"checkpoint_lag_max_ms"`
	PollMillis           float64 `json:"poll_ms"`
	SizeRecords          int     `json:"size_records,omitempty"`
	TreeBytes            int64   `json:"tree_bytes,omitempty"`
	TreeBytesPerRecord   float64 `json:"tree_bytes_per_record,omitempty"`
	TreePayloadPerRecord float64 `json:"tree_payload_bytes_per_record,omitempty"`
}

func newTLogBenchCmd() *cobra.Command {
	var c tlogBenchConfig
	cmd := &cobra.Command{
		Use:   "tlog",
		Short: "Verifiable log: ingest with the sequencer against without it, checkpoint lag, tree bytes per record",
		Example: `  acrelay-bench tlog --events 10000 --clients 16 --rounds 3 --size-events 100000
  acrelay-bench tlog --database-url postgres://postgres@127.0.0.1:5432/postgres --rounds 3`,
		SilenceUsage: true,
		Args:         cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runTLogBench(ctx, c, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.IntVar(&c.Events, "events", 10000, "events posted in each run of a round")
	f.IntVar(&c.Clients, "clients", 16, "concurrent clients")
	f.IntVar(&c.Rounds, "rounds", 3, "rounds, each a run without and a run with the log; medians reported")
	f.IntVar(&c.SizeEvents, "size-events", 100000, "events of the final run with the log that measures the tree's bytes per record (0 skips it)")
	f.StringVar(&c.DatabaseURL, "database-url", "", "run the relays on this PostgreSQL database instead of SQLite")
	f.StringVar(&c.RelayBin, "relay-bin", "", "acrelay binary the relays run (default: acrelay next to this binary, else built from ./cmd/acrelay)")
	f.DurationVar(&c.Poll, "poll", 5*time.Millisecond, "how often the tree head is read from the database (the lag's resolution)")
	f.BoolVar(&c.JSON, "json", false, "print results as JSON lines")
	return cmd
}

func init() { rootCmd.AddCommand(newTLogBenchCmd()) }

// treeWatch records, per received_seq, when its 201 arrived and when the
// stored tree head first covered it.
type treeWatch struct {
	databaseURL string
	poll        time.Duration
	withLog     bool

	mu      sync.Mutex
	posted  map[int64]time.Time
	covered map[int64]time.Time
	// bytes of the tree's tables: at the start and at the end of the run
	bytes0, bytes1 int64
	payload        int64
	err            error
}

func newTreeWatch(databaseURL string, poll time.Duration, withLog bool) *treeWatch {
	return &treeWatch{databaseURL: databaseURL, poll: poll, withLog: withLog,
		posted: map[int64]time.Time{}, covered: map[int64]time.Time{}}
}

// respond takes the received_seq of a 201's record.
func (w *treeWatch) respond(body []byte, at time.Time) {
	var rec struct {
		Receipt struct {
			ReceivedSeq string `json:"received_seq"`
		} `json:"receipt"`
	}
	if json.Unmarshal(body, &rec) != nil {
		return
	}
	seq, err := strconv.ParseInt(rec.Receipt.ReceivedSeq, 10, 64)
	if err != nil {
		return
	}
	w.mu.Lock()
	w.posted[seq] = at
	w.mu.Unlock()
}

// treeDB reads the relay's tree from its database.
type treeDB struct {
	sqlite *sql.DB
	pg     *pgx.Conn
}

func openTreeDB(ctx context.Context, r *benchRelay, databaseURL string) (*treeDB, error) {
	if databaseURL != "" {
		c, err := pgx.Connect(ctx, databaseURL)
		return &treeDB{pg: c}, err
	}
	db, err := sql.Open("sqlite", "file:"+filepath.Join(r.dir, "acrelay.db")+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	return &treeDB{sqlite: db}, nil
}

func (t *treeDB) close() {
	if t.pg != nil {
		t.pg.Close(context.Background())
	}
	if t.sqlite != nil {
		t.sqlite.Close()
	}
}

func (t *treeDB) size(ctx context.Context, projectID string) (int64, error) {
	const q = `SELECT size FROM tlog_heads WHERE project_id = `
	var n int64
	var err error
	if t.pg != nil {
		err = t.pg.QueryRow(ctx, q+`$1`, projectID).Scan(&n)
	} else {
		err = t.sqlite.QueryRowContext(ctx, q+`?`, projectID).Scan(&n)
	}
	if errors.Is(err, sql.ErrNoRows) || errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	return n, err
}

// tableBytes is the space the tree's tables take: their pages (SQLite's
// dbstat), or their relations with indexes and TOAST (PostgreSQL; the
// whole database's, as the bench's relays share it); and payload, the
// project's tile bytes alone.
func (t *treeDB) tableBytes(ctx context.Context, projectID string) (total, payload int64, err error) {
	if t.pg != nil {
		err = t.pg.QueryRow(ctx, `SELECT pg_total_relation_size('tlog_tiles') + pg_total_relation_size('tlog_heads'),
			(SELECT COALESCE(sum(octet_length(data)), 0) FROM tlog_tiles WHERE project_id = $1)`, projectID).Scan(&total, &payload)
		return total, payload, err
	}
	err = t.sqlite.QueryRowContext(ctx, `SELECT (SELECT COALESCE(sum(pgsize), 0) FROM dbstat
			WHERE name IN ('tlog_tiles', 'tlog_heads', 'sqlite_autoindex_tlog_heads_1')),
		(SELECT COALESCE(sum(length(data)), 0) FROM tlog_tiles WHERE project_id = ?)`, projectID).Scan(&total, &payload)
	return total, payload, err
}

// watch polls the tree head every w.poll from the start of the load;
// its stop waits (with the log, at most 30 s) until the tree covers every
// record posted, then measures the tables.
func (w *treeWatch) watch(ctx context.Context) func(r *benchRelay, projectID string) func() {
	return func(r *benchRelay, projectID string) func() {
		db, err := openTreeDB(ctx, r, w.databaseURL)
		if err != nil {
			w.err = err
			return func() {}
		}
		w.bytes0, _, _ = db.tableBytes(ctx, projectID)
		done := make(chan struct{})
		finished := make(chan struct{})
		go func() {
			defer close(finished)
			var last int64
			var giveUp <-chan time.Time
			tick := time.NewTicker(w.poll)
			defer tick.Stop()
			for {
				n, err := db.size(ctx, projectID)
				now := time.Now()
				if err != nil {
					w.err = err
					return
				}
				w.mu.Lock()
				for s := last + 1; s <= n; s++ {
					w.covered[s] = now
				}
				all := int64(len(w.posted))
				w.mu.Unlock()
				last = max(last, n)
				select {
				case <-done:
					if !w.withLog || last >= all {
						return
					}
					if giveUp == nil {
						giveUp = time.After(30 * time.Second)
					}
				default:
				}
				select {
				case <-tick.C:
				case <-giveUp:
					w.err = fmt.Errorf("the tree covers %d of %d records 30 s after the load", last, all)
					return
				case <-ctx.Done():
					return
				}
			}
		}()
		return func() {
			close(done)
			<-finished
			w.bytes1, w.payload, err = db.tableBytes(ctx, projectID)
			if err != nil && w.err == nil {
				w.err = err
			}
			db.close()
		}
	}
}

// lags returns every posted record's lag (0 when the tree covered it
// before its 201 arrived).
func (w *treeWatch) lags() []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]time.Duration, 0, len(w.posted))
	for s, at := range w.posted {
		c, ok := w.covered[s]
		if !ok {
			continue
		}
		out = append(out, max(0, c.Sub(at)))
	}
	return out
}

func runTLogBench(ctx context.Context, c tlogBenchConfig, out io.Writer) error {
	if c.Events < 1 || c.Clients < 1 || c.Rounds < 1 || c.SizeEvents < 0 || c.Poll <= 0 {
		return fmt.Errorf("--events, --clients, --rounds and --poll must be positive, --size-events at least 0")
	}
	bin, cleanup, err := resolveRelayBin(ctx, c.RelayBin)
	if err != nil {
		return err
	}
	defer cleanup()
	bc := benchConfig{Events: c.Events, Clients: c.Clients, DatabaseURL: c.DatabaseURL, JSON: c.JSON, Rounds: 1}
	res := tlogBenchResult{Events: c.Events, Clients: c.Clients, Rounds: c.Rounds, Engine: "sqlite", PollMillis: float64(c.Poll) / 1e6}
	if c.DatabaseURL != "" {
		res.Engine = "postgres"
	}
	var without, with []benchResult
	var lags []time.Duration
	run := func(withLog bool, events int) (benchResult, *treeWatch, error) {
		w := newTreeWatch(c.DatabaseURL, c.Poll, withLog)
		r := benchRun{bin: bin, ab: "with log", watch: w.watch(ctx), respond: w.respond}
		if !withLog {
			r.ab, r.extra = "without log", []string{"--log-sequencer=false"}
		}
		bc.Events = events
		b, err := benchOnce(ctx, bc, r)
		if err == nil {
			err = w.err
		}
		if err == nil && b.Errors > 0 {
			err = fmt.Errorf("%d posts failed", b.Errors)
		}
		if err == nil {
			printBench(out, c.JSON, b)
		}
		return b, w, err
	}
	for range c.Rounds {
		b, _, err := run(false, c.Events)
		if err != nil {
			return err
		}
		without = append(without, b)
		b, w, err := run(true, c.Events)
		if err != nil {
			return err
		}
		with = append(with, b)
		l := w.lags()
		if len(l) != c.Events {
			return fmt.Errorf("lag known for %d of %d records", len(l), c.Events)
		}
		lags = append(lags, l...)
	}
	res.WithoutPerSecond = medianBench(without).EventsPerSecond
	res.WithPerSecond = medianBench(with).EventsPerSecond
	res.Ratio = res.WithPerSecond / res.WithoutPerSecond
	slices.Sort(lags)
	ms := func(d time.Duration) float64 { return math.Round(float64(d)/1e4) / 100 }
	res.LagRecords = len(lags)
	res.LagP50Millis, res.LagP99Millis, res.LagMaxMillis = ms(lags[len(lags)/2]), ms(lags[len(lags)*99/100]), ms(lags[len(lags)-1])
	if c.SizeEvents > 0 {
		_, w, err := run(true, c.SizeEvents)
		if err != nil {
			return err
		}
		res.SizeRecords = c.SizeEvents
		res.TreeBytes = w.bytes1 - w.bytes0
		res.TreeBytesPerRecord = math.Round(float64(res.TreeBytes)/float64(c.SizeEvents)*10) / 10
		res.TreePayloadPerRecord = math.Round(float64(w.payload)/float64(c.SizeEvents)*10) / 10
	}
	if c.JSON {
		b, _ := json.Marshal(res)
		fmt.Fprintln(out, string(b))
		return nil
	}
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "tlog (%s, %d clients, %d events × %d rounds, medians): without the log %.0f events/s, with it %.0f events/s: with / without = %.2f (goal ≥ 0.9)\n",
		res.Engine, c.Clients, c.Events, c.Rounds, res.WithoutPerSecond, res.WithPerSecond, res.Ratio)
	fmt.Fprintf(&buf, "checkpoint lag (201 → stored tree head covers the record; %d records, head polled every %v): p50 %.1f ms, p99 %.1f ms, max %.1f ms (goal p99 ≤ 1000 ms)\n",
		res.LagRecords, c.Poll, res.LagP50Millis, res.LagP99Millis, res.LagMaxMillis)
	if c.SizeEvents > 0 {
		fmt.Fprintf(&buf, "tree storage after %d records: %d bytes = %.1f bytes/record (tile payload %.1f bytes/record) (goal ≤ 100)\n",
			res.SizeRecords, res.TreeBytes, res.TreeBytesPerRecord, res.TreePayloadPerRecord)
	}
	_, err = out.Write(buf.Bytes())
	return err
}
