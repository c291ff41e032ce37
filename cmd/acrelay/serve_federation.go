package main

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/acrelay/acrelay/federation"
	"github.com/acrelay/acrelay/ingest"
	"github.com/acrelay/acrelay/lease"
	"github.com/acrelay/acrelay/store"
)

// Federation's wiring in serve (spec/federation.md): the peer links'
// flags and their manager. `acrelay peer` is in peer_cmd.go.

// federationConfig is the serve settings of the peer links.
type federationConfig struct {
	Poll     time.Duration
	IdlePoll time.Duration
	Keys     time.Duration
	SubLease time.Duration
	Witness  time.Duration
}

func addFederationFlags(cmd *cobra.Command, fs *pflag.FlagSet, c *federationConfig) {
	fs.DurationVar(&c.Poll, "federation-poll", federation.DefaultPollInterval, "peer links poll the remote's events this often while their WebSub subscription is not active (ACRELAY_FEDERATION_POLL)")
	bindEnv(cmd, "federation-poll", "ACRELAY_FEDERATION_POLL")
	fs.DurationVar(&c.IdlePoll, "federation-idle-poll", federation.DefaultIdlePollInterval, "peer links poll this often while subscribed, for deliveries that were lost (ACRELAY_FEDERATION_IDLE_POLL)")
	bindEnv(cmd, "federation-idle-poll", "ACRELAY_FEDERATION_IDLE_POLL")
	fs.DurationVar(&c.Keys, "federation-keys-interval", federation.DefaultKeysInterval, "peer links re-read the remote's key registry (conditionally, by ETag) this often (ACRELAY_FEDERATION_KEYS_INTERVAL)")
	bindEnv(cmd, "federation-keys-interval", "ACRELAY_FEDERATION_KEYS_INTERVAL")
	fs.DurationVar(&c.SubLease, "federation-subscription-lease", federation.DefaultSubscriptionLease, "WebSub lease peer links ask the remote's hub for; renewed at three quarters (ACRELAY_FEDERATION_SUBSCRIPTION_LEASE)")
	bindEnv(cmd, "federation-subscription-lease", "ACRELAY_FEDERATION_SUBSCRIPTION_LEASE")
	fs.DurationVar(&c.Witness, "federation-witness-interval", federation.DefaultWitnessInterval, "peer links read, check and cosign the remote's log checkpoint this often, besides after each backfill round (ACRELAY_FEDERATION_WITNESS_INTERVAL)")
	bindEnv(cmd, "federation-witness-interval", "ACRELAY_FEDERATION_WITNESS_INTERVAL")
}

// newFederation builds the peer links' manager. hc is the SSRF-guarded
// client every request to a remote relay goes through (the hub's guard:
// a remote on a loopback, private or metadata address is refused unless
// --websub-allow-hosts names it).
func newFederation(st store.Store, c federationConfig, public string, id *lease.Identity, ttl time.Duration, logger *slog.Logger, hc *http.Client) *federation.Manager {
	return federation.New(st, ingest.New(st, ingest.Options{}), federation.Options{
		PublicURL: public, Identity: id, LeaseTTL: ttl, PollInterval: c.Poll, IdlePollInterval: c.IdlePoll,
		KeysInterval: c.Keys, SubscriptionLease: c.SubLease, WitnessInterval: c.Witness, Logger: logger, HTTP: hc,
	})
}
