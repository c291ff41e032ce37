package hub

import (
	"context"
	"strconv"

	"github.com/acrelay/acrelay/internal/apierror"
	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/wire"
)

// Default caps (docs/operating.md "Limits"). A subscriber host, topic or
// project that reaches one gets 409 and a stable code; renewing a live
// subscription is never refused.
const (
	DefaultMaxSubscriptionsPerTopic   = 1000
	DefaultMaxSubscriptionsPerHost    = 1000
	DefaultMaxSubscriptionsPerProject = 10000
	DefaultMaxPendingPerHost          = 32
)

// Limits caps what subscribe requests can make the hub store and call.
// Zero takes the default; a negative value means no cap.
type Limits struct {
	// SubscriptionsPerTopic caps one topic's subscriptions (a project's
	// topic: repository, thread and format).
	SubscriptionsPerTopic int
	// SubscriptionsPerHost caps the subscriptions whose callback is on one
	// host (store.CallbackHost, port included), over every project.
	SubscriptionsPerHost int
	// SubscriptionsPerProject caps one project's subscriptions.
	SubscriptionsPerProject int
	// PendingPerHost caps the verifications of intent waiting for one
	// callback host (subscribe and unsubscribe), so a host cannot queue
	// unbounded outbound requests.
	PendingPerHost int
}

// Limit names for Options.OnRefused and the relay's metrics label.
const (
	LimitTopicSubscriptions   = "websub_topic_subscriptions"
	LimitHostSubscriptions    = "websub_host_subscriptions"
	LimitProjectSubscriptions = "websub_project_subscriptions"
	LimitHostVerifications    = "websub_host_verifications"
)

// LimitNames lists every limit name the hub reports, for metrics that
// show zeros before the first refusal.
var LimitNames = []string{LimitTopicSubscriptions, LimitHostSubscriptions, LimitProjectSubscriptions, LimitHostVerifications}

func (l Limits) withDefaults() Limits {
	def := func(v, d int) int {
		if v == 0 {
			return d
		}
		return v
	}
	return Limits{
		SubscriptionsPerTopic:   def(l.SubscriptionsPerTopic, DefaultMaxSubscriptionsPerTopic),
		SubscriptionsPerHost:    def(l.SubscriptionsPerHost, DefaultMaxSubscriptionsPerHost),
		SubscriptionsPerProject: def(l.SubscriptionsPerProject, DefaultMaxSubscriptionsPerProject),
		PendingPerHost:          def(l.PendingPerHost, DefaultMaxPendingPerHost),
	}
}

// pendingRetryAfter is the Retry-After of a refusal for too many pending
// verifications: about one verification request's timeout, after which
// the host's queue has moved.
func (h *Hub) pendingRetryAfter() string {
	return strconv.Itoa(max(1, int(h.opt.RequestTimeout.Seconds())))
}

var (
	errTopicSubscriptions   = apierror.New(wire.CodeHubTopicSubscriptionsLimit)
	errHostSubscriptions    = apierror.New(wire.CodeHubHostSubscriptionsLimit)
	errProjectSubscriptions = apierror.New(wire.CodeHubProjectSubscriptionsLimit)
	errHostVerifications    = apierror.New(wire.CodeHubHostVerificationsLimit)
)

// checkLimits refuses v when storing it would take a topic, host or
// project past a cap (the pending subscribes count as subscriptions, so
// the caps hold whatever verification finds). A subscribe that renews a
// live subscription adds none and passes the subscription caps. ServeHTTP
// calls it first without a lock (a refused subscribe costs no DNS), then
// addVerification with h.limitMu held up to the AddVerification, so two
// requests of this process never both take the last place.
func (h *Hub) checkLimits(ctx context.Context, v store.Verification) error {
	if l := h.limits; l.SubscriptionsPerTopic < 0 && l.SubscriptionsPerHost < 0 && l.SubscriptionsPerProject < 0 && l.PendingPerHost < 0 {
		return nil // every cap is off: nothing to count (the count reads a project's every subscription)
	}
	c, err := h.st.CountWebSub(ctx, v.ProjectID, v.Topic, v.Callback)
	if err != nil {
		return err
	}
	l := h.limits
	over := func(n, limit int) bool { return limit >= 0 && n >= limit }
	var refusal *apierror.Error
	var name string
	switch {
	case over(c.HostPending, l.PendingPerHost):
		refusal, name = errHostVerifications, LimitHostVerifications
	case v.Mode != ModeSubscribe || c.Subscribed:
	case over(c.Topic, l.SubscriptionsPerTopic):
		refusal, name = errTopicSubscriptions, LimitTopicSubscriptions
	case over(c.Host, l.SubscriptionsPerHost):
		refusal, name = errHostSubscriptions, LimitHostSubscriptions
	case over(c.Project, l.SubscriptionsPerProject):
		refusal, name = errProjectSubscriptions, LimitProjectSubscriptions
	}
	if refusal == nil {
		return nil
	}
	if h.opt.OnRefused != nil {
		h.opt.OnRefused(name)
	}
	h.log.DebugContext(ctx, "subscription request over a limit", "limit", name, "project_id", v.ProjectID,
		"callback_host", hostOf(v.Callback))
	return refusal
}
