package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/acrelay/acrelay/couriers"
	websubcourier "github.com/acrelay/acrelay/couriers/websub"
	"github.com/acrelay/acrelay/hub"
	"github.com/acrelay/acrelay/internal/ssrf"
	"github.com/acrelay/acrelay/lease"
	"github.com/acrelay/acrelay/relay"
	"github.com/acrelay/acrelay/store"
)

// The embedded WebSub hub's wiring in serve (spec/websub.md): its flags,
// the SSRF guard every outbound request goes through, the hub, its
// delivery courier and the publisher that pings external hubs.

func addWebSubFlags(cmd *cobra.Command, fs *pflag.FlagSet, cfg *serveConfig) {
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
	fs.IntVar(&cfg.WebSubConcurrency, "websub-concurrency", 32, "WebSub deliveries in flight at once, over every subscription of this process (ACRELAY_WEBSUB_CONCURRENCY)")
	bindEnv(cmd, "websub-concurrency", "ACRELAY_WEBSUB_CONCURRENCY")
	fs.IntVar(&cfg.WebSubHostLimit, "websub-host-limit", 4, "WebSub deliveries in flight to one callback host[:port] (ACRELAY_WEBSUB_HOST_LIMIT)")
	bindEnv(cmd, "websub-host-limit", "ACRELAY_WEBSUB_HOST_LIMIT")
	fs.StringSliceVar(&cfg.WebSubPublishHubs, "websub-publish-hub", nil, "external WebSub hub to ping (hub.mode=publish) when a public topic has new records; repeatable (ACRELAY_WEBSUB_PUBLISH_HUBS, comma-separated)")
	bindEnv(cmd, "websub-publish-hub", "ACRELAY_WEBSUB_PUBLISH_HUBS") // flag > environment > file, like every flag
	fs.StringVar(&cfg.WebSubAllowHosts, "websub-allow-hosts", envOr("ACRELAY_WEBSUB_ALLOW_HOSTS", ""), "comma-separated callback hosts exempt from the hub's SSRF address checks, for tests (e.g. 127.0.0.1); off by default (ACRELAY_WEBSUB_ALLOW_HOSTS)")
	fs.BoolVar(&cfg.WebSubAllowHTTPCallbacks, "websub-allow-http-callbacks", false, "let the hub take http callbacks although --public-url is https (refused by default: deliveries, private records included, would cross the network unencrypted) (ACRELAY_WEBSUB_ALLOW_HTTP_CALLBACKS)")
	bindEnv(cmd, "websub-allow-http-callbacks", "ACRELAY_WEBSUB_ALLOW_HTTP_CALLBACKS")
}

// webSubServices are the parts of the embedded hub `acrelay serve` runs.
type webSubServices struct {
	// guard is the one SSRF guard of every outbound hub request
	// (verification, denial, delivery); federation and the relay's
	// remote checks use it too.
	guard *ssrf.Guard
	hub   *hub.Hub
	// runner delivers to subscribers; publisher pings external hubs (nil
	// without --websub-publish-hub).
	runner, publisher *couriers.Runner
	// revokedScan runs the hub's scan for revoked tokens' subscriptions
	// on one process (a relay-wide lease).
	revokedScan *lease.Single
}

// openWebSub builds the hub, its guard and its couriers. ownAddr is the
// main listener's bound address; authorize is the relay's topic check
// (relay.TopicAuth: built before the hub, and the relay, which routes
// /websub/hub to the hub and tells it of token revocations, after it).
// base gives the runners' holder, lease, logger, OnResult and the shared
// cache (the courier's rendered bodies go in it too); openWebSub sets
// their backoff.
func openWebSub(cfg serveConfig, st store.Store, public, ownAddr string, base couriers.Options, metrics *relay.Metrics,
	authorize func(r *http.Request, projectID string) (string, bool, error)) (*webSubServices, error) {
	id, logger := base.Identity, base.Logger
	// Every outbound hub request (verification, denial, delivery) goes
	// through one SSRF guard.
	guard, err := ssrf.NewGuard(ssrf.GuardOptions{AllowHosts: cfg.webSubAllowHosts(), OwnAddrs: []string{cfg.Addr, ownAddr, public}})
	if err != nil {
		return nil, fmt.Errorf("--websub-allow-hosts (ACRELAY_WEBSUB_ALLOW_HOSTS): %w", err)
	}
	// One process scans for subscriptions of revoked tokens (a relay-wide
	// lease); every process verifies intent and sends the denials it queued.
	revokedScan := lease.NewSingle(st, lease.Options{Name: "websub-revoked-scan", Holder: id, TTL: cfg.CourierLease, Logger: logger})
	base.Backoff = couriers.Backoff{Initial: cfg.WebSubRetryInitial, Max: cfg.WebSubRetryMax, GiveUp: cfg.WebSubGiveUp}
	hostLimit := cfg.WebSubHostLimit
	delivery := base
	delivery.Concurrency, delivery.HostLimit = cfg.WebSubConcurrency, func(string) int { return hostLimit }
	// The hub refreshes the delivery runner when a project's
	// subscriptions change, and the courier denies through the hub a
	// subscription whose capability no longer holds: the runner is built
	// first, the hub on it, and the courier is given the hub before
	// anything runs.
	courier := &websubcourier.Courier{Store: st, Client: guard.HTTPClient(), PublicURL: public, Logger: logger, Cache: base.Cache}
	runner := couriers.NewRunner(st, courier, delivery)
	websub := hub.New(st, hub.Options{
		PublicURL: public, LeaseMin: cfg.WebSubLeaseMin, LeaseDefault: cfg.WebSubLeaseDefault, LeaseMax: cfg.WebSubLeaseMax,
		Guard: guard, Logger: logger, RevokedCheckHeld: revokedScan.Held,
		// spec/websub.md: in production callbacks must be https; a relay
		// published over https is taken to be one, unless the operator
		// allows http callbacks.
		Production: strings.HasPrefix(public, "https://") && !cfg.WebSubAllowHTTPCallbacks,
		Authorize:  authorize,
		Refresh:    runner.Refresh,
		Limits:     cfg.Limits.hubLimits(), OnRefused: metrics.LimitRefused,
	})
	courier.Denier = websub
	ws := &webSubServices{guard: guard, hub: websub, runner: runner, revokedScan: revokedScan}
	if len(cfg.WebSubPublishHubs) > 0 {
		// A batch whose pings keep failing is dropped after --websub-give-up,
		// so a hub that never recovers holds back nothing for longer.
		ws.publisher = couriers.NewRunner(st, &websubcourier.Publisher{Hubs: cfg.WebSubPublishHubs, Store: st, Client: guard.HTTPClient(), PublicURL: public, Logger: logger}, base)
	}
	return ws, nil
}

// checkRemote is the relay's check of a new peer link's remote_url
// (relay.Config.CheckRemote): the guard's, names resolved.
func (ws *webSubServices) checkRemote(ctx context.Context, raw string) error {
	_, err := ws.guard.CheckCallbackResolved(ctx, raw)
	return err
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
	if cfg.WebSubConcurrency < 1 || cfg.WebSubHostLimit < 1 {
		return fmt.Errorf("--websub-concurrency %d, --websub-host-limit %d: want each at least 1", cfg.WebSubConcurrency, cfg.WebSubHostLimit)
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
