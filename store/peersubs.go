package store

import (
	"context"
	"time"
)

// PeerSubscription is a peer link's WebSub subscriber state
// (spec/federation.md, W3C WebSub #subscriber-sends-subscription-request):
// the latest request the link sent the remote's hub and what became of
// it, kept in the store so any process behind the link's callback URL
// answers the hub's verification of intent and authenticates a push.
//
// Secret is the HMAC key of X-Hub-Signature (the hub.secret sent, its
// bytes): a secret at rest, kept because every push must be verified with
// it; it is never listed or logged. Nil: deliveries are not signed.
type PeerSubscription struct {
	ProjectID   string
	PeerID      string
	Topic       string    // the topic URL as subscribed
	RequestID   string    // random id of the latest request (hub.mode Mode)
	Mode        string    // "subscribe" or "unsubscribe"
	Secret      []byte    // nil: none
	RequestedAt time.Time // when the latest request was sent (millisecond precision)
	Failed      bool      // the latest request was refused by the hub or never reached it
	// State is a client.WebSub* state (pending, active, unsubscribing,
	// unsubscribed, denied).
	State string
	// Verified: a subscribe was verified and no unsubscribe since, so
	// deliveries are processed.
	Verified   bool
	Lease      time.Duration // hub.lease_seconds of the last verification (whole seconds)
	VerifiedAt time.Time     // zero when never verified
	Reason     string        // hub.reason of a denial (untrusted text, at most 200 bytes)
}

// PeerSubscriptions keeps each peer link's WebSub subscriber state, one
// row per link, deleted with the link (RemovePeer).
type PeerSubscriptions interface {
	// PeerSubscription reads the state of link peerID of projectID.
	// Errors: ErrNotFound (none stored, or no such link), ErrUnavailable.
	PeerSubscription(ctx context.Context, projectID, peerID string) (PeerSubscription, error)
	// SavePeerSubscription stores s as its link's state, replacing any.
	// Errors: ErrNotFound (no such link), ErrUnavailable.
	SavePeerSubscription(ctx context.Context, s PeerSubscription) error
	// ReplacePeerSubscription stores s only while the stored state's
	// RequestID is requestID (a newer request was not sent meanwhile);
	// ok is false when it is not (or none is stored). Errors:
	// ErrUnavailable.
	ReplacePeerSubscription(ctx context.Context, s PeerSubscription, requestID string) (ok bool, err error)
	// PeerWakes: a process that serves a link's callback tells the one
	// that runs it of a gap.
	PeerWakes
}
