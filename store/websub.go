package store

import (
	"context"
	"time"
)

// Project visibility (spec/websub.md "Topics"): a public project's reads
// need no token; private is the default.
const (
	VisibilityPrivate = "private"
	VisibilityPublic  = "public"
)

// Visibility is the part of the registry that says who may read a project.
type Visibility interface {
	// ProjectVisibility returns VisibilityPrivate or VisibilityPublic.
	// Errors: ErrNotFound (unknown project), ErrUnavailable.
	ProjectVisibility(ctx context.Context, projectID string) (string, error)
	// SetProjectVisibility sets it. Errors: ErrNotFound, ErrUnavailable;
	// any other value than the two constants is refused (not stored).
	SetProjectVisibility(ctx context.Context, projectID, visibility string) error
}

// Subscription states (spec/websub.md "Distribution").
const (
	SubscriptionActive  = "active"
	SubscriptionFailing = "failing" // failed for longer than the give-up time; kept until its lease ends
)

// CourierWebSub is the courier name of the WebSub subscriptions' delivery
// state (store.Couriers): one target per subscription, target = its ID.
const CourierWebSub = "websub"

// Subscription is one verified WebSub subscription of the embedded hub: a
// (topic, callback) pair of one project (W3C WebSub #subscription-lease).
// Its delivery cursor and backoff state are the courier's target state
// (courier "websub", target ID).
type Subscription struct {
	ID           string // random, stable across renewals; the courier's target id
	ProjectID    string
	Topic        string // the canonical topic URL (spec/websub.md "Topics")
	RepositoryID string
	ThreadID     string // "" for every thread
	Format       string // "atom" or "json": the topic's representation
	Callback     string
	// Secret is the hub.secret HMAC key (W3C WebSub #signing-content),
	// empty for a public topic subscribed without one. It is stored as
	// given since the hub must sign with it; it is never logged or listed.
	Secret []byte
	// TokenID is the bearer token that created or last renewed the
	// subscription ("" on a public topic without one); deliveries stop when
	// it is revoked.
	TokenID      string
	LeaseSeconds int64
	ExpiresAt    time.Time // database clock
	State        string    // SubscriptionActive or SubscriptionFailing
	CreatedAt    time.Time
	VerifiedAt   time.Time
}

// Verification is a pending verification of intent (W3C WebSub
// #hub-verifies-intent): a subscribe or unsubscribe request the hub has
// answered 202 to and not yet verified with the callback. Durable, so a
// restart neither loses nor repeats an accepted request's outcome.
type Verification struct {
	ID           string
	ProjectID    string
	Mode         string // "subscribe" or "unsubscribe"
	Topic        string
	RepositoryID string
	ThreadID     string
	Format       string
	Callback     string
	Secret       []byte
	TokenID      string
	LeaseSeconds int64 // granted (clamped) lease; 0 for unsubscribe
	Attempts     int
	CreatedAt    time.Time
}

// WebSub keeps the embedded hub's subscriptions and pending verifications
// (spec/websub.md). Subscriptions are unique per (project, topic,
// callback).
type WebSub interface {
	// AddVerification stores a pending verification. Errors: ErrNotFound
	// (unknown project), ErrUnavailable.
	AddVerification(ctx context.Context, v Verification) error
	// PendingVerifications returns at most limit pending verifications,
	// oldest first. Errors: ErrUnavailable.
	PendingVerifications(ctx context.Context, limit int) ([]Verification, error)
	// DeleteVerification removes a pending verification (done or given
	// up). Errors: ErrUnavailable.
	DeleteVerification(ctx context.Context, id string) error
	// RetryVerification counts a failed attempt of a pending
	// verification. Errors: ErrUnavailable.
	RetryVerification(ctx context.Context, id string) error

	// ActivateSubscription stores the outcome of a verified subscribe in
	// one transaction: it creates the (project, topic, callback)
	// subscription, or renews it — new secret, token, lease and expiry,
	// state active, ID kept — and deletes the verification v.ID. A new
	// subscription's delivery cursor starts at the project's head, so it
	// receives the records appended after it was verified (spec/websub.md
	// "Subscribing"); a renewal keeps its cursor. ExpiresAt is the
	// database clock plus LeaseSeconds. Errors: ErrNotFound (unknown
	// project), ErrUnavailable.
	ActivateSubscription(ctx context.Context, v Verification, newID string) (Subscription, error)
	// DeleteSubscription removes the (project, topic, callback)
	// subscription and its courier state, if any, and deletes the
	// verification verificationID ("" for none). Errors: ErrUnavailable.
	DeleteSubscription(ctx context.Context, projectID, topic, callback, verificationID string) error
	// RemoveSubscription removes a subscription and its courier state by id
	// (a callback that answered 410, a revoked token). Errors:
	// ErrUnavailable.
	RemoveSubscription(ctx context.Context, projectID, id string) error
	// SetSubscriptionState sets State. Errors: ErrNotFound, ErrUnavailable.
	SetSubscriptionState(ctx context.Context, projectID, id, state string) error
	// Subscription returns one subscription. Errors: ErrNotFound,
	// ErrUnavailable.
	Subscription(ctx context.Context, projectID, id string) (Subscription, error)
	// Subscriptions returns the project's subscriptions whose lease has
	// not ended by the database clock, sorted by id. Errors:
	// ErrUnavailable.
	Subscriptions(ctx context.Context, projectID string) ([]Subscription, error)
	// SubscribedProjects returns the ids of the projects with at least one
	// subscription whose lease has not ended, sorted. Errors:
	// ErrUnavailable.
	SubscribedProjects(ctx context.Context) ([]string, error)
}

// FeedToken is a per-reader, revocable capability to read one
// repository's Atom feed (GET /v1/feeds/{feed_token}.atom). Only the
// SHA-256 of the capability is stored.
type FeedToken struct {
	ID           string // the feed_id: names the capability, is not it
	ProjectID    string
	RepositoryID string
	Hash         []byte
	CreatedBy    string // the bearer token id that created it
	Revoked      bool
	CreatedAt    time.Time
}

// FeedTokens keeps feed capabilities.
type FeedTokens interface {
	// CreateFeedToken stores t. Errors: ErrExists, ErrNotFound (unknown
	// project), ErrUnavailable.
	CreateFeedToken(ctx context.Context, t FeedToken) (FeedToken, error)
	// FeedToken returns one by id. Errors: ErrNotFound, ErrUnavailable.
	FeedToken(ctx context.Context, id string) (FeedToken, error)
	// RevokeFeedToken revokes one of the project's feed tokens. Errors:
	// ErrNotFound (none with that id in the project), ErrUnavailable.
	RevokeFeedToken(ctx context.Context, projectID, id string) error
}

// WebSubScans are the relay-wide WebSub reads and deletes of the timers
// (the metrics scrape, the hub's revoked-token check, the publish courier's
// listing, housekeeping): each is one statement, whatever the number of
// projects, subscriptions or tokens (issue 26 item 4). Migrations sqlite
// 0016 and postgres 0014 add the indexes they use.
type WebSubScans interface {
	// CountSubscriptionStates counts the subscriptions whose lease has not
	// ended by the database clock, by State. Errors: ErrUnavailable.
	CountSubscriptionStates(ctx context.Context) (map[string]int, error)
	// RevokedSubscriptions returns at most limit subscriptions whose lease
	// has not ended and whose TokenID names a token that is revoked or no
	// longer exists, sorted by project id then id. Errors: ErrUnavailable.
	RevokedSubscriptions(ctx context.Context, limit int) ([]Subscription, error)
	// TokenSubscriptions returns projectID's subscriptions whose lease has
	// not ended and whose TokenID is tokenID, sorted by id. Errors:
	// ErrUnavailable.
	TokenSubscriptions(ctx context.Context, projectID, tokenID string) ([]Subscription, error)
	// PublicProjectIDs pages the ids of the public projects in ascending
	// order strictly after afterID, at most limit. Errors: ErrUnavailable.
	PublicProjectIDs(ctx context.Context, afterID string, limit int) ([]string, error)
	// DeleteExpiredSubscriptions deletes at most limit subscriptions whose
	// lease ended before before, oldest expiry first, with their courier
	// state (cursor), and returns how many it deleted. Errors:
	// ErrUnavailable.
	DeleteExpiredSubscriptions(ctx context.Context, before time.Time, limit int) (int, error)
	// DeleteLapsedVerifications deletes at most limit pending
	// verifications created before before, oldest first, and returns how
	// many it deleted. Errors: ErrUnavailable.
	DeleteLapsedVerifications(ctx context.Context, before time.Time, limit int) (int, error)
}
