package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/acrelay/acrelay/couriers"
	websubcourier "github.com/acrelay/acrelay/couriers/websub"
	"github.com/acrelay/acrelay/hub"
	"github.com/acrelay/acrelay/lease"
	"github.com/acrelay/acrelay/registry"
	"github.com/acrelay/acrelay/relay"
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
	MetricsAddr   string

	// The embedded WebSub hub (spec/websub.md "Subscribing").
	WebSubLeaseMin     time.Duration
	WebSubLeaseDefault time.Duration
	WebSubLeaseMax     time.Duration
	WebSubRetryInitial time.Duration
	WebSubRetryMax     time.Duration
	WebSubGiveUp       time.Duration
	WebSubAllowHosts   string   // comma-separated
	WebSubPublishHubs  []string // external hubs told of public topics' new content
	// WebSubAllowHTTPCallbacks lets the hub take http callbacks although
	// the relay is published over https (--public-url https://…).
	WebSubAllowHTTPCallbacks bool

	Limits     limitsConfig // cmd/acrelay/limits.go
	Matrix     matrixConfig
	Federation federationConfig // cmd/acrelay/peer_cmd.go
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
	fs.DurationVar(&cfg.WebSubLeaseMin, "websub-lease-min", hub.DefaultLeaseMin, "shortest WebSub lease the hub grants; shorter requests are raised to it (ACRELAY_WEBSUB_LEASE_MIN)")
	bindEnv(cmd, "websub-lease-min", "ACRELAY_WEBSUB_LEASE_MIN")
	fs.DurationVar(&cfg.WebSubLeaseDefault, "websub-lease-default", hub.DefaultLeaseDefault, "WebSub lease granted when a subscriber asks for none (ACRELAY_WEBSUB_LEASE_DEFAULT)")
	bindEnv(cmd, "websub-lease-default", "ACRELAY_WEBSUB_LEASE_DEFAULT")
	fs.DurationVar(&cfg.WebSubLeaseMax, "websub-lease-max", hub.DefaultLeaseMax, "longest WebSub lease the hub grants; longer requests are cut to it (ACRELAY_WEBSUB_LEASE_MAX)")
	bindEnv(cmd, "websub-lease-max", "ACRELAY_WEBSUB_LEASE_MAX")
	fs.DurationVar(&cfg.WebSubRetryInitial, "websub-retry-initial", time.Minute, "first wait after a failed WebSub delivery; doubles per failure, with jitter (ACRELAY_WEBSUB_RETRY_INITIAL)")
	bindEnv(cmd, "websub-retry-initial", "ACRELAY_WEBSUB_RETRY_INITIAL")
	fs.DurationVar(&cfg.WebSubRetryMax, "websub-retry-max", time.Hour, "longest wait between WebSub delivery retries (ACRELAY_WEBSUB_RETRY_MAX)")
	bindEnv(cmd, "websub-retry-max", "ACRELAY_WEBSUB_RETRY_MAX")
	fs.DurationVar(&cfg.WebSubGiveUp, "websub-give-up", 24*time.Hour, "a subscription failing this long is marked failing (kept, retried at --websub-retry-max, until its lease ends) (ACRELAY_WEBSUB_GIVE_UP)")
	bindEnv(cmd, "websub-give-up", "ACRELAY_WEBSUB_GIVE_UP")
	fs.StringSliceVar(&cfg.WebSubPublishHubs, "websub-publish-hub", nil, "external WebSub hub to ping (hub.mode=publish) when a public topic has new records; repeatable (ACRELAY_WEBSUB_PUBLISH_HUBS, comma-separated)")
	bindEnv(cmd, "websub-publish-hub", "ACRELAY_WEBSUB_PUBLISH_HUBS") // flag > environment > file, like every flag
	fs.StringVar(&cfg.WebSubAllowHosts, "websub-allow-hosts", envOr("ACRELAY_WEBSUB_ALLOW_HOSTS", ""), "comma-separated callback hosts exempt from the hub's SSRF address checks, for tests (e.g. 127.0.0.1); off by default (ACRELAY_WEBSUB_ALLOW_HOSTS)")
	fs.BoolVar(&cfg.WebSubAllowHTTPCallbacks, "websub-allow-http-callbacks", false, "let the hub take http callbacks although --public-url is https (refused by default: deliveries, private records included, would cross the network unencrypted) (ACRELAY_WEBSUB_ALLOW_HTTP_CALLBACKS)")
	bindEnv(cmd, "websub-allow-http-callbacks", "ACRELAY_WEBSUB_ALLOW_HTTP_CALLBACKS")
	fs.StringVar(&cfg.PprofAddr, "pprof-addr", envOr("ACRELAY_PPROF_ADDR", ""), "serve net/http/pprof on this (loopback) address for profiling; off by default (ACRELAY_PPROF_ADDR)")
	fs.StringVar(&cfg.OperatorToken, "operator-token", "", "server-wide operator token (prefer ACRELAY_OPERATOR_TOKEN, ACRELAY_OPERATOR_TOKEN_FILE or operator-token-file in --config; default: made and printed on first start)")
	bindSecretEnv(cmd, "operator-token", "ACRELAY_OPERATOR_TOKEN")
	addConfigFlag(cmd)
	fs.StringVar(&cfg.MetricsAddr, "metrics-addr", envOr("ACRELAY_METRICS_ADDR", ""), "also serve /metrics, without a token, on this (private) address; on the main listener /metrics needs the operator token (ACRELAY_METRICS_ADDR)")
	addLimitFlags(fs, &cfg.Limits)
	addMatrixFlags(fs, &cfg.Matrix)
	addFederationFlags(cmd, fs, &cfg.Federation)
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
	if cfg.CourierLease < minCourierLease {
		return fmt.Errorf("--courier-lease (ACRELAY_COURIER_LEASE) %s: want at least %s", cfg.CourierLease, minCourierLease)
	}
	if err := cfg.storeConfig.check(); err != nil {
		return err
	}
	if err := cfg.checkWebSub(); err != nil {
		return err
	}
	if err := cfg.Limits.check(); err != nil {
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

	boot, err := registry.FirstStart(ctx, st, cfg.OperatorToken != "")
	if err != nil {
		return fmt.Errorf("first start: %w", err)
	}
	opHash, err := registry.OperatorHash(ctx, st, cfg.OperatorToken)
	if err != nil {
		return fmt.Errorf("operator token: %w", err)
	}

	ln, err := listen("--addr", "ACRELAY_ADDR", cfg.Addr)
	if err != nil {
		return err
	}
	defer ln.Close()
	var pln, mln net.Listener
	if cfg.PprofAddr != "" {
		if pln, err = listen("--pprof-addr", "ACRELAY_PPROF_ADDR", cfg.PprofAddr); err != nil {
			return err
		}
		defer pln.Close()
	}
	if cfg.MetricsAddr != "" {
		if mln, err = listen("--metrics-addr", "ACRELAY_METRICS_ADDR", cfg.MetricsAddr); err != nil {
			return err
		}
		defer mln.Close()
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
	id, err := holderIdentity(cfg.storeConfig)
	if err != nil {
		return err
	}
	defer id.Close()
	logger.Info("lease holder", "holder", id.ID, "reclaim", id.Reclaim)
	if cfg.ExportDir != "" {
		if err := os.MkdirAll(cfg.ExportDir, 0o700); err != nil {
			return fmt.Errorf("export dir: %w", err)
		}
		runners = append(runners, couriers.NewRunner(st, couriers.Export{Dir: cfg.ExportDir, Feed: st},
			couriers.Options{Identity: id, LeaseTTL: cfg.CourierLease, Logger: logger, OnResult: metrics.CourierResult}))
	}
	mx, err := openMatrix(ctx, cfg.Matrix, st, public,
		couriers.Options{Identity: id, LeaseTTL: cfg.CourierLease, Logger: logger, OnResult: metrics.CourierResult})
	if err != nil {
		return err
	}
	if mx != nil {
		runners = append(runners, mx.runner)
		if mx.ln != nil {
			defer mx.ln.Close()
		}
	}
	// The hub asks the relay to authorize private topics; the relay routes
	// /websub/hub to the hub and tells it of token revocations. Every
	// outbound hub request (verification, denial, delivery) goes through
	// one SSRF guard.
	guard, err := hub.NewGuard(hub.GuardOptions{AllowHosts: cfg.webSubAllowHosts(), OwnAddrs: []string{cfg.Addr, ln.Addr().String(), public}})
	if err != nil {
		return fmt.Errorf("--websub-allow-hosts (ACRELAY_WEBSUB_ALLOW_HOSTS): %w", err)
	}
	var srv *relay.Server
	var websubRunner *couriers.Runner
	// One process scans for subscriptions of revoked tokens (a relay-wide
	// lease); every process verifies intent and sends the denials it queued.
	revokedScan := lease.NewSingle(st, lease.Options{Name: "websub-revoked-scan", Holder: id, TTL: cfg.CourierLease, Logger: logger})
	websub := hub.New(st, hub.Options{
		PublicURL: public, LeaseMin: cfg.WebSubLeaseMin, LeaseDefault: cfg.WebSubLeaseDefault, LeaseMax: cfg.WebSubLeaseMax,
		Guard: guard, Logger: logger, RevokedCheckHeld: revokedScan.Held,
		// spec/websub.md: in production callbacks must be https; a relay
		// published over https is taken to be one, unless the operator
		// allows http callbacks.
		Production: strings.HasPrefix(public, "https://") && !cfg.WebSubAllowHTTPCallbacks,
		Authorize:  func(r *http.Request, projectID string) (string, bool, error) { return srv.AuthorizeTopic(r, projectID) },
		Refresh:    func(projectID string) { websubRunner.Refresh(projectID) },
		Limits:     cfg.Limits.hubLimits(), OnRefused: metrics.LimitRefused,
	})
	websubRunner = couriers.NewRunner(st, &websubcourier.Courier{Store: st, Client: guard.HTTPClient(), PublicURL: public, Denier: websub, Logger: logger},
		couriers.Options{Identity: id, LeaseTTL: cfg.CourierLease, Logger: logger, OnResult: metrics.CourierResult,
			Backoff: couriers.Backoff{Initial: cfg.WebSubRetryInitial, Max: cfg.WebSubRetryMax, GiveUp: cfg.WebSubGiveUp}})
	runners = append(runners, websubRunner)
	if len(cfg.WebSubPublishHubs) > 0 {
		// A batch whose pings keep failing is dropped after --websub-give-up,
		// so a hub that never recovers holds back nothing for longer.
		runners = append(runners, couriers.NewRunner(st, &websubcourier.Publisher{Hubs: cfg.WebSubPublishHubs, Store: st, Client: guard.HTTPClient(), PublicURL: public, Logger: logger},
			couriers.Options{Identity: id, LeaseTTL: cfg.CourierLease, Logger: logger, OnResult: metrics.CourierResult,
				Backoff: couriers.Backoff{Initial: cfg.WebSubRetryInitial, Max: cfg.WebSubRetryMax, GiveUp: cfg.WebSubGiveUp}}))
	}
	metrics.WatchCouriers(courierStatuses(runners))
	metricsH := metricsHandler(reg, logger)
	fed := newFederation(st, cfg.Federation, public, id, cfg.CourierLease, logger, guard.HTTPClient())
	reg.MustRegister(fed) // refused foreign records by reason
	srv = relay.New(st, relay.Config{PublicURL: public, OperatorTokenHash: opHash, Logger: logger,
		Hub: websub, TokenRevoked: websub.DenyRevoked, Matrix: mx.binderOrNil(),
		Metrics: metrics, MetricsHandler: metricsH, Couriers: courierStatuses(runners), Peers: fed, Limits: cfg.Limits.rates(),
		CheckRemote: func(ctx context.Context, raw string) error {
			_, err := guard.CheckCallbackResolved(ctx, raw)
			return err
		}})
	bg, stopBG := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, r := range runners {
		wg.Go(func() { _ = r.Run(bg) })
	}
	wg.Go(func() { _ = websub.Run(bg) })
	wg.Go(func() { _ = revokedScan.Run(bg) })
	wg.Go(func() { _ = fed.Run(bg) })
	wg.Go(func() { housekeep(bg, st, id, cfg.CourierLease, logger) })
	if mx != nil {
		wg.Go(func() { mx.run(bg) })
	}
	defer func() { stopBG(); wg.Wait() }()

	if pln != nil {
		go servePprof(pln, logger)
	}
	if mln != nil {
		wg.Go(func() { serveMetrics(bg, mln, metricsH, logger) })
	}
	hs := relay.HTTPServer(cfg.Addr, srv.Handler())
	hs.RegisterOnShutdown(srv.CloseStreams)
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	attrs := []any{"addr", ln.Addr().String(), "public_url", public, "store", cfg.describe(), "gomaxprocs", runtime.GOMAXPROCS(0)}
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

// checkWebSub validates the hub's lease settings: each at least a second
// (leases are whole seconds), min ≤ default ≤ max.
func (cfg serveConfig) checkWebSub() error {
	for _, d := range []struct {
		flag, env string
		v         time.Duration
	}{
		{"--websub-lease-min", "ACRELAY_WEBSUB_LEASE_MIN", cfg.WebSubLeaseMin},
		{"--websub-lease-default", "ACRELAY_WEBSUB_LEASE_DEFAULT", cfg.WebSubLeaseDefault},
		{"--websub-lease-max", "ACRELAY_WEBSUB_LEASE_MAX", cfg.WebSubLeaseMax},
	} {
		if d.v < time.Second {
			return fmt.Errorf("%s (%s) %s: want at least 1s", d.flag, d.env, d.v)
		}
	}
	for _, d := range []struct {
		flag, env string
		v         time.Duration
	}{
		{"--websub-retry-initial", "ACRELAY_WEBSUB_RETRY_INITIAL", cfg.WebSubRetryInitial},
		{"--websub-retry-max", "ACRELAY_WEBSUB_RETRY_MAX", cfg.WebSubRetryMax},
		{"--websub-give-up", "ACRELAY_WEBSUB_GIVE_UP", cfg.WebSubGiveUp},
	} {
		if d.v < time.Millisecond {
			return fmt.Errorf("%s (%s) %s: want at least 1ms", d.flag, d.env, d.v)
		}
	}
	if cfg.WebSubRetryInitial > cfg.WebSubRetryMax {
		return fmt.Errorf("--websub-retry-initial %s, --websub-retry-max %s: want initial ≤ max", cfg.WebSubRetryInitial, cfg.WebSubRetryMax)
	}
	if cfg.WebSubLeaseMin > cfg.WebSubLeaseDefault || cfg.WebSubLeaseDefault > cfg.WebSubLeaseMax {
		return fmt.Errorf("--websub-lease-min %s, --websub-lease-default %s, --websub-lease-max %s: want min ≤ default ≤ max",
			cfg.WebSubLeaseMin, cfg.WebSubLeaseDefault, cfg.WebSubLeaseMax)
	}
	return nil
}

// webSubAllowHosts splits --websub-allow-hosts.
func (cfg serveConfig) webSubAllowHosts() []string { return splitList(cfg.WebSubAllowHosts) }

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
