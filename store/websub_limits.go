package store

import (
	"context"
	"strings"
)

// WebSubCounts is what the hub's caps are checked against (spec/websub.md
// "Subscribing"; docs/operating.md "Limits"). Each subscription figure
// counts the live subscriptions (lease not ended by the database clock)
// plus the pending subscribe verifications, which may become subscriptions:
// a cap checked against it holds whatever verification later finds.
type WebSubCounts struct {
	// Subscribed: (project, topic, callback) is a live subscription, so a
	// subscribe renews it and adds none.
	Subscribed bool
	// Topic counts the project's topic's subscriptions.
	Topic int
	// Project counts the project's subscriptions, every topic.
	Project int
	// Host counts the subscriptions whose callback is on the callback's
	// host (CallbackHost), in every project.
	Host int
	// HostPending counts the pending verifications (subscribe and
	// unsubscribe) of callbacks on that host, in every project.
	HostPending int
}

// WebSubLimits counts what the hub caps. Both dialects implement it
// (migrations sqlite 0014, postgres 0012 add the indexed callback_host
// column it counts by).
type WebSubLimits interface {
	// CountWebSub returns the counts for a request to subscribe callback
	// to projectID's topic. Errors: ErrUnavailable.
	CountWebSub(ctx context.Context, projectID, topic, callback string) (WebSubCounts, error)
}

// CallbackHost is the host a callback is counted under: the authority
// between the first "://" and the first "/" or "?" after it (port
// included), ASCII lower case; "" without "://". The stores'
// callback_host column computes the same in SQL, so it is spelled as
// string steps, not url.Parse.
func CallbackHost(callback string) string {
	_, rest, ok := strings.Cut(callback, "://")
	if !ok {
		return ""
	}
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		rest = rest[:i]
	}
	if i := strings.IndexByte(rest, '?'); i >= 0 {
		rest = rest[:i]
	}
	b := []byte(rest)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
