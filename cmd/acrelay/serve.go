package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/acrelay/acrelay/couriers"
	"github.com/acrelay/acrelay/registry"
	"github.com/acrelay/acrelay/relay"
	"github.com/acrelay/acrelay/store/sqlite"
)

// serveConfig is everything `acrelay serve` reads from flags and the
// environment (flag > ACRELAY_* > default), validated once.
type serveConfig struct {
	storeConfig
	Addr          string
	PublicURL     string
	LogFormat     string
	LogLevel      string
	OperatorToken string
	ExportDir     string
	CourierLease  time.Duration
	PprofAddr     string
	Matrix        matrixConfig
}

func newServeCmd() *cobra.Command {
	var cfg serveConfig
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the relay (embedded SQLite by default, PostgreSQL with --database-url)",
		Example: `  acrelay serve
  acrelay serve --addr 127.0.0.1:9090 --data-dir /var/lib/acrelay --public-url https://relay.example
  ACRELAY_DATABASE_URL=postgres://acrelay@db/acrelay acrelay serve`,
		RunE: func(cmd *cobra.Command, args []string) error {
			tok, err := secretFromEnv("ACRELAY_OPERATOR_TOKEN")
			if err != nil {
				return err
			}
			cfg.OperatorToken = tok
			return runServe(cmd.Context(), cfg, cmd.OutOrStdout())
		},
	}
	fs := cmd.Flags()
	addStoreFlags(cmd, &cfg.storeConfig)
	cfg.Create = true // the first start creates the store
	fs.StringVar(&cfg.Addr, "addr", envOr("ACRELAY_ADDR", "127.0.0.1:8080"), "listen address (ACRELAY_ADDR)")
	fs.StringVar(&cfg.PublicURL, "public-url", envOr("ACRELAY_PUBLIC_URL", ""), "absolute base URL for links and topics (ACRELAY_PUBLIC_URL; default http://<addr>)")
	fs.StringVar(&cfg.LogFormat, "log-format", envOr("ACRELAY_LOG_FORMAT", "text"), "log format: text or json (ACRELAY_LOG_FORMAT)")
	fs.StringVar(&cfg.LogLevel, "log-level", envOr("ACRELAY_LOG_LEVEL", "info"), "log level: debug, info, warn, error (ACRELAY_LOG_LEVEL)")
	fs.StringVar(&cfg.ExportDir, "export-dir", envOr("ACRELAY_EXPORT_DIR", ""), "enable the export courier: append every project's records as JSON lines to DIR/<project_id>.jsonl (ACRELAY_EXPORT_DIR)")
	fs.DurationVar(&cfg.CourierLease, "courier-lease", 15*time.Second, "courier lease length; another process takes over this long after the holder dies (ACRELAY_COURIER_LEASE)")
	bindEnv(cmd, "courier-lease", "ACRELAY_COURIER_LEASE")
	fs.StringVar(&cfg.PprofAddr, "pprof-addr", envOr("ACRELAY_PPROF_ADDR", ""), "serve net/http/pprof on this (loopback) address for profiling; off by default (ACRELAY_PPROF_ADDR)")
	addMatrixFlags(fs, &cfg.Matrix)
	return cmd
}

func init() { rootCmd.AddCommand(newServeCmd()) }

// tuneRuntime sets the Go runtime as serve runs it; bench-http-bound runs
// the same, so that its bound holds for the relay. An operator's GOGC (or
// GOMEMLIMIT) and GOMAXPROCS win.
//
// Every POST allocates ~40 KB of short-lived garbage; with the default
// GOGC=100 and a small live heap the collector runs many times a second.
// 400 trades tens of MB of heap for ~5–10% less CPU per event.
//
// blockingCommits (SQLite): the group committer blocks in fdatasync(2)
// for ~0.3–0.5 ms a commit, and Go's scheduler takes the processor (P)
// back from a thread blocked in a system call only lazily (its monitor
// polls every 20 µs to 10 ms): until then that core's share of the
// handlers' work (verifying signatures) waits. One P more than the cores
// Go would use lets the handlers keep every core busy while the committer
// waits for the disk (+8–9% events/s at 16 clients on 2 cores; see
// docs/performance.md). PostgreSQL commits wait on the network poller,
// which gives the P up at once. (Setting it stops Go from following later
// changes of a container's CPU limit; the limit at start-up still counts.)
func tuneRuntime(blockingCommits bool) {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	if os.Getenv("GOMAXPROCS") == "" && blockingCommits {
		runtime.GOMAXPROCS(runtime.GOMAXPROCS(0) + 1)
	}
}

// minCourierLease is the shortest --courier-lease: a holder renews its
// lease every third of it, so a shorter one is mostly renewals (and under
// a millisecond the stores refuse it, which left the courier retrying in
// a busy loop).
const minCourierLease = time.Second

// secretFromEnv reads NAME or, when that is unset or empty, the file named
// by NAME_FILE. A NAME_FILE that cannot be read or holds only white space
// is an error, not an absent secret; the error names the variable and
// quotes neither the secret nor the path.
func secretFromEnv(name string) (string, error) {
	if v := os.Getenv(name); v != "" {
		return v, nil
	}
	f := os.Getenv(name + "_FILE")
	if f == "" {
		return "", nil
	}
	b, err := os.ReadFile(f)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return "", fmt.Errorf("%s_FILE: cannot read the file it names: %w", name, err)
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "", fmt.Errorf("%s_FILE: the file it names is empty", name)
	}
	return s, nil
}

func newLogger(format, level string, w io.Writer) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level (ACRELAY_LOG_LEVEL): %w", err)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format (ACRELAY_LOG_FORMAT) %q: want text or json", format)
}

func runServe(ctx context.Context, cfg serveConfig, out io.Writer) error {
	logger, err := newLogger(cfg.LogFormat, cfg.LogLevel, os.Stderr)
	if err != nil {
		return err
	}
	if cfg.CourierLease < minCourierLease {
		return fmt.Errorf("--courier-lease (ACRELAY_COURIER_LEASE) %s: want at least %s", cfg.CourierLease, minCourierLease)
	}
	if err := cfg.storeConfig.check(); err != nil {
		return err
	}
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	tuneRuntime(cfg.DatabaseURL == "")
	st, err := openStore(ctx, cfg.storeConfig, logger)
	if err != nil {
		return err
	}
	defer st.Close()

	boot, err := registry.FirstStart(ctx, st, cfg.OperatorToken != "")
	if err != nil {
		return fmt.Errorf("first start: %w", err)
	}
	opHash, err := registry.OperatorHash(ctx, st, cfg.OperatorToken)
	if err != nil {
		return fmt.Errorf("operator token: %w", err)
	}

	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	public := strings.TrimRight(cfg.PublicURL, "/")
	if public == "" {
		public = "http://" + ln.Addr().String()
	}
	if boot != nil {
		printBootstrap(out, boot, public)
	}

	// Couriers tail the log by durable cursors; the store's advances only
	// wake them (and the wake streams).
	var runners []*couriers.Runner
	holder := courierHolder()
	if cfg.ExportDir != "" {
		if err := os.MkdirAll(cfg.ExportDir, 0o700); err != nil {
			return fmt.Errorf("export dir: %w", err)
		}
		runners = append(runners, couriers.NewRunner(st, couriers.Export{Dir: cfg.ExportDir, Feed: st},
			couriers.Options{Holder: holder, LeaseTTL: cfg.CourierLease, Logger: logger}))
	}
	mx, err := openMatrix(ctx, cfg.Matrix, st, public, holder, cfg.CourierLease, logger)
	if err != nil {
		return err
	}
	if mx != nil {
		runners = append(runners, mx.runner)
	}
	srv := relay.New(st, relay.Config{PublicURL: public, OperatorTokenHash: opHash, Logger: logger, Matrix: mx.binderOrNil()})
	bg, stopBG := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, r := range runners {
		wg.Go(func() { _ = r.Run(bg) })
	}
	if mx != nil {
		wg.Go(func() { mx.run(bg) })
	}
	defer func() { stopBG(); wg.Wait() }()

	if cfg.PprofAddr != "" {
		go servePprof(cfg.PprofAddr, logger)
	}
	hs := relay.HTTPServer(cfg.Addr, srv.Handler())
	hs.RegisterOnShutdown(srv.CloseStreams)
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	attrs := []any{"addr", ln.Addr().String(), "public_url", public, "store", cfg.describe(), "gomaxprocs", runtime.GOMAXPROCS(0)}
	if cfg.DatabaseURL == "" {
		attrs = append(attrs, "sqlite_wal_writes", cfg.SQLiteWAL)
		if db, ok := st.(*sqlite.DB); ok {
			switch d, err := db.CommitterSlice(); {
			case d > 0:
				attrs = append(attrs, "sqlite_committer_slice", d.String())
			case err != nil:
				attrs = append(attrs, "sqlite_committer_slice", "default: "+err.Error())
			default:
				attrs = append(attrs, "sqlite_committer_slice", "default")
			}
		}
	}
	logger.Info("relay listening", attrs...)

	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	logger.Info("shutting down: draining in-flight requests")
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		logger.Warn("shutdown", "err", err)
	}
	stopBG()
	wg.Wait()
	if err := st.Close(); err != nil {
		return fmt.Errorf("close store: %w", err)
	}
	logger.Info("stopped")
	return nil
}

func printBootstrap(out io.Writer, b *registry.Bootstrap, public string) {
	fmt.Fprintf(out, "acrelay: first start — created a default project. These tokens are shown ONCE; store them now.\n")
	fmt.Fprintf(out, "  project_id:     %s\n", b.ProjectID)
	fmt.Fprintf(out, "  project token:  %s   (scopes: read, append, admin)\n", b.ProjectToken)
	if b.OperatorToken != "" {
		fmt.Fprintf(out, "  operator token: %s   (server-wide: creates projects)\n", b.OperatorToken)
	}
	fmt.Fprintf(out, "  try: acrelay demo --url %s --token <project token>\n", public)
}

// courierHolder names this process in lease rows: host, pid and a random
// suffix, so a restarted process never mistakes an old lease for its own.
func courierHolder() string {
	host, _ := os.Hostname()
	var b [6]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s:%d:%x", host, os.Getpid(), b)
}
