package main

import (
	"testing"
	"time"

	"github.com/acrelay/acrelay/hub"
)

func TestLimitsCheck(t *testing.T) {
	ok := limitsConfig{ClientRate: 20, ClientBurst: 100, TokenWriteRate: 100, TokenWriteBurst: 200, RateLimitKeys: 100000,
		TrustedProxies: []string{"10.0.0.0/8", "::1"}, SubscriptionsPerTopic: 1000, SubscriptionsPerHost: 1000,
		SubscriptionsPerProject: 10000, PendingPerHost: 32, RefusalHold: time.Second, RefusalHoldMax: 1024, ConnsPerAddress: 256}
	if err := ok.check(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	for _, tc := range []struct {
		name string
		mod  func(*limitsConfig)
		want string
	}{
		{"negative rate", func(c *limitsConfig) { c.ClientRate = -1 }, "--rate-client -1: want 0 (no limit) or more"},
		{"zero burst", func(c *limitsConfig) { c.TokenWriteBurst = 0 }, "--rate-token-writes-burst 0: want at least 1 with --rate-token-writes 100"},
		{"negative cap", func(c *limitsConfig) { c.PendingPerHost = -3 }, "--websub-max-pending-per-host -3: want 0 (no limit) or more"},
		{"keys", func(c *limitsConfig) { c.RateLimitKeys = 1 }, "--rate-limit-keys 1: want at least 2"},
		{"negative connections", func(c *limitsConfig) { c.ConnsPerAddress = -1 }, "--max-connections-per-address -1: want 0 (no limit) or more"},
		{"hold slots", func(c *limitsConfig) { c.RefusalHoldMax = 0 }, "--rate-refusal-hold 1s / --rate-refusal-hold-max 0: want a duration of 0 or more and at least 1 slot"},
		{"negative hold", func(c *limitsConfig) { c.RefusalHold = -time.Second }, "--rate-refusal-hold -1s / --rate-refusal-hold-max 1024: want a duration of 0 or more and at least 1 slot"},
		{"proxy", func(c *limitsConfig) { c.TrustedProxies = []string{"lb.example"} },
			`--trusted-proxies (ACRELAY_TRUSTED_PROXIES): "lb.example" is neither an address nor a CIDR prefix`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.mod(&c)
			if err := c.check(); err == nil || err.Error() != tc.want {
				t.Fatalf("err = %v, want %s", err, tc.want)
			}
		})
	}
	c := ok
	c.ClientRate, c.ClientBurst, c.SubscriptionsPerHost = 0, 0, 0 // off
	if err := c.check(); err != nil {
		t.Fatalf("limits off: %v", err)
	}
	if got, want := c.hubLimits(), (hub.Limits{SubscriptionsPerTopic: 1000, SubscriptionsPerHost: -1, SubscriptionsPerProject: 10000, PendingPerHost: 32}); got != want {
		t.Fatalf("hubLimits %+v, want %+v", got, want)
	}
	if r := c.rates(); r.ClientRate != 0 || r.TokenWriteRate != 100 || len(r.TrustedProxies) != 2 {
		t.Fatalf("rates %+v", r)
	}
}
