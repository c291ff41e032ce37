package main

import (
	"fmt"
	"net"
	"time"

	"github.com/spf13/pflag"

	"github.com/acrelay/acrelay/hub"
	"github.com/acrelay/acrelay/internal/connlimit"
	"github.com/acrelay/acrelay/internal/ratelimit"
	"github.com/acrelay/acrelay/relay"
)

// limitsConfig is serve's limits (docs/operating.md "Limits"): request
// rates and the hub's caps. Each flag's environment variable is ACRELAY_
// and its name in upper snake case (ACRELAY_RATE_CLIENT, …).
type limitsConfig struct {
	ClientRate      float64
	ClientBurst     int
	TokenWriteRate  float64
	TokenWriteBurst int
	RateLimitKeys   int
	TrustedProxies  []string
	RefusalHold     time.Duration
	RefusalHoldMax  int
	ConnsPerAddress int

	SubscriptionsPerTopic   int
	SubscriptionsPerHost    int
	SubscriptionsPerProject int
	PendingPerHost          int
}

// Default rates: a feed reader or subscriber needs a request now and then,
// an agent a few writes a second; an append token's steady rate is well
// under the relay's whole append rate (≈ 5,000/s on two cores), so one
// runaway agent cannot take it.
const (
	defaultClientRate      = 20
	defaultClientBurst     = 100
	defaultTokenWriteRate  = 100
	defaultTokenWriteBurst = 200
	// defaultConnsPerAddress: an agent or reader needs a few connections;
	// a host of many agents without a proxy a few dozen.
	defaultConnsPerAddress = 256
)

func addLimitFlags(fs *pflag.FlagSet, c *limitsConfig) {
	fs.Float64Var(&c.ClientRate, "rate-client", defaultClientRate, "requests per second of one client address (IPv6: its /64) on the routes that need no token: the WebSub hub, feed capabilities, public reads, refused tokens; 0 = no limit (ACRELAY_RATE_CLIENT)")
	fs.IntVar(&c.ClientBurst, "rate-client-burst", defaultClientBurst, "burst of --rate-client (ACRELAY_RATE_CLIENT_BURST)")
	fs.Float64Var(&c.TokenWriteRate, "rate-token-writes", defaultTokenWriteRate, "authenticated writes (POST, PUT, PATCH, DELETE) per second of one token; 0 = no limit (ACRELAY_RATE_TOKEN_WRITES)")
	fs.IntVar(&c.TokenWriteBurst, "rate-token-writes-burst", defaultTokenWriteBurst, "burst of --rate-token-writes (ACRELAY_RATE_TOKEN_WRITES_BURST)")
	fs.IntVar(&c.RateLimitKeys, "rate-limit-keys", ratelimit.DefaultMaxKeys, "most client addresses (and, separately, tokens) whose buckets are kept in memory; idle ones are dropped first (ACRELAY_RATE_LIMIT_KEYS)")
	fs.DurationVar(&c.RefusalHold, "rate-refusal-hold", time.Second, "longest a --rate-client refusal is held before its 429 (until the client's bucket has a token again), so that a client waiting for its answers is slowed to its rate; 0 = answer at once (ACRELAY_RATE_REFUSAL_HOLD)")
	fs.IntVar(&c.RefusalHoldMax, "rate-refusal-hold-max", relay.DefaultRefusalHoldMax, "most refusals held at once; over it they are answered at once (ACRELAY_RATE_REFUSAL_HOLD_MAX)")
	fs.IntVar(&c.ConnsPerAddress, "max-connections-per-address", defaultConnsPerAddress, "most TCP connections one client address (IPv6: its /64) holds open at once; more are closed at accept, before a request is read (trusted proxies are not bounded); 0 = no limit (ACRELAY_MAX_CONNECTIONS_PER_ADDRESS)")
	fs.StringSliceVar(&c.TrustedProxies, "trusted-proxies", nil, "addresses or CIDR prefixes of reverse proxies whose X-Forwarded-For names the client (for the per-client rate); none by default (ACRELAY_TRUSTED_PROXIES, comma-separated)")
	fs.IntVar(&c.SubscriptionsPerTopic, "websub-max-subscriptions-per-topic", hub.DefaultMaxSubscriptionsPerTopic, "most WebSub subscriptions (pending ones included) of one topic; 0 = no cap (ACRELAY_WEBSUB_MAX_SUBSCRIPTIONS_PER_TOPIC)")
	fs.IntVar(&c.SubscriptionsPerHost, "websub-max-subscriptions-per-host", hub.DefaultMaxSubscriptionsPerHost, "most WebSub subscriptions whose callback is on one host[:port], over every project; 0 = no cap (ACRELAY_WEBSUB_MAX_SUBSCRIPTIONS_PER_HOST)")
	fs.IntVar(&c.SubscriptionsPerProject, "websub-max-subscriptions-per-project", hub.DefaultMaxSubscriptionsPerProject, "most WebSub subscriptions of one project; 0 = no cap (ACRELAY_WEBSUB_MAX_SUBSCRIPTIONS_PER_PROJECT)")
	fs.IntVar(&c.PendingPerHost, "websub-max-pending-per-host", hub.DefaultMaxPendingPerHost, "most verifications of intent waiting for one callback host[:port]; 0 = no cap (ACRELAY_WEBSUB_MAX_PENDING_PER_HOST)")
}

// check validates the limits once; no value is silently changed.
func (c limitsConfig) check() error {
	for _, f := range []struct {
		flag string
		v    float64
	}{
		{"--rate-client", c.ClientRate}, {"--rate-client-burst", float64(c.ClientBurst)},
		{"--rate-token-writes", c.TokenWriteRate}, {"--rate-token-writes-burst", float64(c.TokenWriteBurst)},
		{"--websub-max-subscriptions-per-topic", float64(c.SubscriptionsPerTopic)},
		{"--websub-max-subscriptions-per-host", float64(c.SubscriptionsPerHost)},
		{"--websub-max-subscriptions-per-project", float64(c.SubscriptionsPerProject)},
		{"--websub-max-pending-per-host", float64(c.PendingPerHost)},
		{"--max-connections-per-address", float64(c.ConnsPerAddress)},
	} {
		if f.v < 0 {
			return fmt.Errorf("%s %v: want 0 (no limit) or more", f.flag, f.v)
		}
	}
	if c.ClientRate > 0 && c.ClientBurst < 1 {
		return fmt.Errorf("--rate-client-burst %d: want at least 1 with --rate-client %v", c.ClientBurst, c.ClientRate)
	}
	if c.TokenWriteRate > 0 && c.TokenWriteBurst < 1 {
		return fmt.Errorf("--rate-token-writes-burst %d: want at least 1 with --rate-token-writes %v", c.TokenWriteBurst, c.TokenWriteRate)
	}
	if c.RefusalHold < 0 || c.RefusalHoldMax < 1 {
		return fmt.Errorf("--rate-refusal-hold %v / --rate-refusal-hold-max %d: want a duration of 0 or more and at least 1 slot", c.RefusalHold, c.RefusalHoldMax)
	}
	if c.RateLimitKeys < 2 {
		return fmt.Errorf("--rate-limit-keys %d: want at least 2", c.RateLimitKeys)
	}
	_, err := relay.ParseTrustedProxies(c.TrustedProxies)
	if err != nil {
		return fmt.Errorf("--trusted-proxies (ACRELAY_TRUSTED_PROXIES): %w", err)
	}
	return nil
}

// rates is the relay's share (check has passed).
func (c limitsConfig) rates() relay.RateLimits {
	trusted, _ := relay.ParseTrustedProxies(c.TrustedProxies)
	return relay.RateLimits{ClientRate: c.ClientRate, ClientBurst: c.ClientBurst,
		TokenWriteRate: c.TokenWriteRate, TokenWriteBurst: c.TokenWriteBurst,
		MaxKeys: c.RateLimitKeys, TrustedProxies: trusted, RefusalHold: c.RefusalHold, RefusalHoldMax: c.RefusalHoldMax}
}

// hubLimits is the hub's share: a flag's 0 (no cap) is the hub's negative.
func (c limitsConfig) hubLimits() hub.Limits {
	noCap := func(v int) int {
		if v == 0 {
			return -1
		}
		return v
	}
	return hub.Limits{SubscriptionsPerTopic: noCap(c.SubscriptionsPerTopic), SubscriptionsPerHost: noCap(c.SubscriptionsPerHost),
		SubscriptionsPerProject: noCap(c.SubscriptionsPerProject), PendingPerHost: noCap(c.PendingPerHost)}
}

// limitConnections wraps the relay's listener in the per-address
// connection bound (check has passed); ln itself when it is off. Each
// connection closed over it counts in
// acrelay_limit_refusals_total{limit="connections_per_address"}.
func (c limitsConfig) limitConnections(ln net.Listener, metrics *relay.Metrics) net.Listener {
	if c.ConnsPerAddress <= 0 {
		return ln
	}
	trusted, _ := relay.ParseTrustedProxies(c.TrustedProxies)
	var refused func()
	if metrics != nil {
		refused = func() { metrics.LimitRefused(limitConnsPerAddress) }
	}
	return connlimit.New(ln, c.ConnsPerAddress, trusted, refused)
}

// limitConnsPerAddress is the limit label of a connection closed over
// --max-connections-per-address.
const limitConnsPerAddress = "connections_per_address"
