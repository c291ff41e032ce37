package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/acrelay/acrelay/couriers"
	"github.com/acrelay/acrelay/lease"
	"github.com/acrelay/acrelay/registry"
	"github.com/acrelay/acrelay/relay"
	"github.com/acrelay/acrelay/store"
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
	// CourierCacheBytes is the budget of the couriers' one shared cache
	// of record batches and rendered WebSub bodies (couriers.Cache).
	CourierCacheBytes int64
	PprofAddr         string
	MetricsAddr       string
	// LogSequencer runs the verifiable log's sequencer (serve_tlog.go);
	// off only for comparison (acrelay-bench tlog).
	LogSequencer bool

	// The embedded WebSub hub (spec/websub.md "Subscribing").
	WebSubLeaseMin     time.Duration
	WebSubLeaseDefault time.Duration
	WebSubLeaseMax     time.Duration
	WebSubRetryInitial time.Duration
	WebSubRetryMax     time.Duration
	WebSubGiveUp       time.Duration
	WebSubConcurrency  int      // deliveries in flight over every subscription
	WebSubHostLimit    int      // deliveries in flight to one callback host
	WebSubAllowHosts   string   // comma-separated
	WebSubPublishHubs  []string // external hubs told of public topics' new content
	// WebSubAllowHTTPCallbacks lets the hub take http callbacks although
	// the relay is published over https (--public-url https://…).
	WebSubAllowHTTPCallbacks bool

	Limits     limitsConfig // cmd/acrelay/limits.go
	Matrix     matrixConfig
	Federation federationConfig // cmd/acrelay/serve_federation.go
	LogWitness logWitnessConfig // cmd/acrelay/serve_logwitness.go
}

func newServeCmd() *cobra.Command {
	var cfg serveConfig
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the relay (embedded SQLite by default, PostgreSQL with --database-url)",
		Long: `serve runs the relay until SIGINT or SIGTERM, then drains in-flight requests.

The operator token (server-wide: creates and lists projects) is best given
as ACRELAY_OPERATOR_TOKEN, or as the contents of the file named by
ACRELAY_OPERATOR_TOKEN_FILE (or operator-token-file in --config), so that it
never shows in the process list; --operator-token exists but does. Without
any, the first start on an empty store generates one, prints it once and
keeps only its hash, which later starts use.`,
		Example: `  acrelay serve
  acrelay serve --addr 127.0.0.1:9090 --data-dir /var/lib/acrelay --public-url https://relay.example
  ACRELAY_DATABASE_URL=postgres://acrelay@db/acrelay acrelay serve`,
		RunE: func(cmd *cobra.Command, args []string) error {
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
	fs.Int64Var(&cfg.CourierCacheBytes, "courier-cache-bytes", couriers.DefaultCacheBytes, "bytes of record batches and rendered WebSub bodies the couriers keep, shared by all of them; 0 keeps none (ACRELAY_COURIER_CACHE_BYTES)")
	bindEnv(cmd, "courier-cache-bytes", "ACRELAY_COURIER_CACHE_BYTES")
	addWebSubFlags(cmd, fs, &cfg) // serve_websub.go
	fs.StringVar(&cfg.PprofAddr, "pprof-addr", envOr("ACRELAY_PPROF_ADDR", ""), "serve net/http/pprof on this (loopback) address for profiling; off by default (ACRELAY_PPROF_ADDR)")
	fs.StringVar(&cfg.OperatorToken, "operator-token", "", "server-wide operator token (prefer ACRELAY_OPERATOR_TOKEN, ACRELAY_OPERATOR_TOKEN_FILE or operator-token-file in --config; default: made and printed on first start)")
	bindSecretEnv(cmd, "operator-token", "ACRELAY_OPERATOR_TOKEN")
	addConfigFlag(cmd)
	fs.StringVar(&cfg.MetricsAddr, "metrics-addr", envOr("ACRELAY_METRICS_ADDR", ""), "also serve /metrics, without a token, on this (private) address; on the main listener /metrics needs the operator token (ACRELAY_METRICS_ADDR)")
	fs.BoolVar(&cfg.LogSequencer, "log-sequencer", true, "integrate records into the projects' verifiable-log trees and sign their checkpoints (one process at a time holds the job); false only to measure ingest without it, the checkpoints then fall behind (ACRELAY_LOG_SEQUENCER)")
	bindEnv(cmd, "log-sequencer", "ACRELAY_LOG_SEQUENCER")
	addLimitFlags(fs, &cfg.Limits)
	addMatrixFlags(fs, &cfg.Matrix)
	addFederationFlags(cmd, fs, &cfg.Federation)
	addLogWitnessFlags(cmd, fs, &cfg.LogWitness)
	return cmd
}

func init() { rootCmd.AddCommand(newServeCmd()) }

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
	if err := cfg.check(); err != nil {
		return err
	}
	logWitnesses, err := cfg.LogWitness.witnesses()
	if err != nil {
		return err
	}
	witnessLogs, err := cfg.LogWitness.witnessLogs()
	if err != nil {
		return err
	}
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	// One registry for the process: the store's transactions, the
	// couriers' deliveries, the HTTP surface, the Go runtime.
	reg := prometheus.NewRegistry()
	metrics := relay.NewMetrics(reg)
	cfg.storeConfig.Observer = metrics
	st, err := openStore(ctx, cfg.storeConfig, logger)
	if err != nil {
		return err
	}
	defer st.Close()
	lns, err := bindListeners(cfg) // serve_listeners.go
	if err != nil {
		return err
	}
	defer lns.Close()
	public := publicURL(cfg.PublicURL, lns.main)
	id, err := holderIdentity(cfg.storeConfig)
	if err != nil {
		return err
	}
	defer id.Close()
	logger.Info("lease holder", "holder", id.ID, "reclaim", id.Reclaim)
	// Couriers tail the log by durable cursors; the store's advances only
	// wake them (and the wake streams). One byte budget bounds what every
	// courier caches (couriers.Cache).
	base := couriers.Options{Identity: id, LeaseTTL: cfg.CourierLease, Logger: logger, OnResult: metrics.CourierResult,
		Cache: couriers.NewCache(cfg.CourierCacheBytes)}
	export, err := exportRunner(cfg, st, base) // serve_export.go
	if err != nil {
		return err
	}
	mx, err := openMatrix(ctx, cfg.Matrix, st, public, base) // serve_matrix.go
	if err != nil {
		return err
	}
	if mx != nil {
		mx.out = out
		mx.registerMetrics(reg)
		if mx.ln != nil {
			defer mx.ln.Close()
		}
	}
	opHash, err := firstStart(ctx, st, cfg.OperatorToken, public, out, logger)
	if err != nil {
		return err
	}
	logKey, err := openLogKey(ctx, st, public) // serve_tlog.go
	if err != nil {
		return err
	}
	logger.Info("log key", "verifier_key", logKey.VerifierKey)
	topics := relay.NewTopicAuth(st, opHash)
	ws, err := openWebSub(cfg, st, public, lns.main.Addr().String(), base, metrics, topics.AuthorizeTopic) // serve_websub.go
	if err != nil {
		return err
	}
	// Peer links (serve_federation.go) reach remotes through the one SSRF guard.
	fed := newFederation(st, cfg.Federation, public, id, cfg.CourierLease, logger, ws.guard.HTTPClient())
	reg.MustRegister(fed) // refused foreign records by reason
	statuses := courierStatuses(runnerList(export, mx.Runner(), ws.runner, ws.publisher))
	metrics.WatchCouriers(statuses)
	metricsH := metricsHandler(reg, logger)
	srv := relay.New(st, relay.Config{PublicURL: public, OperatorTokenHash: opHash, Logger: logger,
		Hub: ws.hub, TokenRevoked: ws.hub.DenyRevoked, Matrix: mx.binderOrNil(),
		Metrics: metrics, MetricsHandler: metricsH, Couriers: statuses, Peers: fed, Limits: cfg.Limits.rates(),
		LogVerifierKey: logKey.VerifierKey, LogSigner: logKey.Signer, // the log's reads (relay/log.go)
		LogWitnessNames: witnessNames(logWitnesses), WitnessLogs: witnessLogs,
		CheckRemote: ws.checkRemote})
	hs := relay.HTTPServer(cfg.Addr, srv.Handler())
	hs.RegisterOnShutdown(srv.CloseStreams)
	ln := cfg.Limits.limitConnections(lns.main, metrics)

	p := newParts(ctx) // serve_parts.go: until ctx ends or one part fails
	if export != nil {
		p.run("export courier", export.Run)
	}
	p.run("websub courier", ws.runner.Run)
	if ws.publisher != nil {
		p.run("websub publisher", ws.publisher.Run)
	}
	p.run("websub hub", ws.hub.Run)
	p.run("websub revoked-token scan", ws.revokedScan.Run)
	p.run("federation", fed.Run)
	if mx != nil {
		p.run("matrix", mx.run)
	}
	p.run("housekeeping", func(ctx context.Context) error {
		housekeep(ctx, st, id, cfg.CourierLease, logger)
		return nil
	})
	if cfg.LogSequencer {
		p.run("log sequencer", func(ctx context.Context) error {
			runSequencer(ctx, st, logKey, public, id, cfg.CourierLease, newTLogMetrics(reg).observe, logger)
			return nil
		})
	}
	p.run("log witnesses", func(ctx context.Context) error {
		runLogWitnesses(ctx, st, cfg.LogWitness, logWitnesses, logKey, id, cfg.CourierLease, reg, logger)
		return nil
	})
	if lns.pprof != nil {
		p.run("pprof", func(ctx context.Context) error { return servePprof(ctx, lns.pprof, logger) })
	}
	if lns.metrics != nil {
		p.run("metrics", func(ctx context.Context) error { return serveMetrics(ctx, lns.metrics, metricsH, logger) })
	}
	p.run("serve", func(ctx context.Context) error { return serveHTTP(ctx, hs, ln, 30*time.Second, logger) })
	logger.Info("relay listening", "addr", lns.main.Addr().String(), "public_url", public, "store", cfg.describe(), "gomaxprocs", runtime.GOMAXPROCS(0))

	<-p.ctx.Done()
	logger.Info("shutting down: draining in-flight requests")
	if err := p.wait(); err != nil {
		return err
	}
	if err := st.Close(); err != nil {
		return fmt.Errorf("close store: %w", err)
	}
	logger.Info("stopped")
	return nil
}

// check validates what serve reads before it opens anything: the
// courier lease and cache, the store, the hub and the limits.
func (cfg serveConfig) check() error {
	if cfg.CourierLease < minCourierLease {
		return fmt.Errorf("--courier-lease (ACRELAY_COURIER_LEASE) %s: want at least %s", cfg.CourierLease, minCourierLease)
	}
	if cfg.CourierCacheBytes < 0 {
		return fmt.Errorf("--courier-cache-bytes (ACRELAY_COURIER_CACHE_BYTES) %d: want at least 0", cfg.CourierCacheBytes)
	}
	if err := cfg.storeConfig.check(); err != nil {
		return err
	}
	if err := cfg.checkWebSub(); err != nil {
		return err
	}
	return cfg.Limits.check()
}

// publicURL is --public-url without a trailing slash, or by default
// http:// and the main listener's bound address.
func publicURL(flag string, main net.Listener) string {
	if public := strings.TrimRight(flag, "/"); public != "" {
		return public
	}
	return "http://" + main.Addr().String()
}

// firstStart makes the first start's tokens and prints them (once, only
// once every listener is bound: a start that cannot listen must not spend
// the tokens that are shown once), then logs one line for the start-up
// migrations, after the banner (a first start applies them all, and one
// line each would bury the tokens). It returns the operator token's hash
// (registry.OperatorHash).
func firstStart(ctx context.Context, st store.Store, operatorToken, public string, out io.Writer, logger *slog.Logger) ([]byte, error) {
	boot, err := registry.FirstStart(ctx, st, operatorToken != "")
	if err != nil {
		return nil, fmt.Errorf("first start: %w", err)
	}
	opHash, err := registry.OperatorHash(ctx, st, operatorToken)
	if err != nil {
		return nil, fmt.Errorf("operator token: %w", err)
	}
	if boot != nil {
		printBootstrap(out, boot, public)
	}
	if mr, ok := st.(store.MigrationReporter); ok {
		if m := mr.Migrations(); m.Applied > 0 {
			logger.Info("migrations applied", "dialect", m.Dialect, "count", m.Applied, "from_version", m.From, "to_version", m.To, "duration", m.Duration.Round(time.Millisecond))
		}
	}
	return opHash, nil
}

// runnerList is the couriers' runners that are on, in order.
func runnerList(runners ...*couriers.Runner) []*couriers.Runner {
	var out []*couriers.Runner
	for _, r := range runners {
		if r != nil {
			out = append(out, r)
		}
	}
	return out
}

func printBootstrap(out io.Writer, b *registry.Bootstrap, public string) {
	fmt.Fprintf(out, "acrelay: first start — created a default project. These tokens are shown ONCE; store them now.\n")
	fmt.Fprintf(out, "  project_id:     %s\n", b.ProjectID)
	fmt.Fprintf(out, "  project token:  %s   (scopes: read, append, admin)\n", b.ProjectToken)
	if b.OperatorToken != "" {
		fmt.Fprintf(out, "  operator token: %s   (server-wide: creates projects)\n", b.OperatorToken)
	}
	fmt.Fprintf(out, "  try: ACRELAY_URL=%s ACRELAY_TOKEN=<project token> acrelay demo\n", public)
}

// holderIdentity is this process's lease holder identity, kept in the
// data directory so that a restart reclaims its predecessor's leases at
// once (package lease). On PostgreSQL the data directory is used only
// when it exists (a volume kept across restarts); otherwise, and when
// another live process uses the same directory, the identity is fresh.
func holderIdentity(c storeConfig) (*lease.Identity, error) {
	dir := c.DataDir
	if c.DatabaseURL != "" {
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			dir = ""
		}
	}
	id, err := lease.OpenIdentity(dir)
	if err != nil {
		return nil, fmt.Errorf("--data-dir (ACRELAY_DATA_DIR): %w", err)
	}
	return id, nil
}

// splitList splits a comma-separated environment value, dropping empty
// items.
func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}
