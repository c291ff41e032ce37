package store

import (
	"cmp"
	"context"
	"slices"
)

// PeerWake asks the process that runs peer link PeerID of ProjectID
// (package federation) for a backfill round now. The zero PeerWake asks it
// of every link: a listener that reconnected may have missed wakes.
//
// A process that serves a link's WebSub callback without running the link
// (it holds no lease for it) sends one when a push it took does not follow
// what it saw of that link (a gap), so the gap is filled at once by the
// process whose backfill moves the link's cursor, not at its next poll.
type PeerWake struct {
	ProjectID string
	PeerID    string
}

// PeerWakes carries PeerWake hints between the processes of one store. A
// wake is never stored: it reaches the subscriptions open when it is
// sent, at most once each (coalesced), or not at all; a subscriber that
// may have missed some is sent the zero PeerWake. On PostgreSQL a wake is
// a NOTIFY on channel acrelay_peer_wakes heard by every process's LISTEN
// connection (the one that carries advances); on SQLite (one process per
// database) it reaches this store's own subscriptions.
type PeerWakes interface {
	// WakePeer sends the wake {projectID, peerID}. Errors: ErrUnavailable
	// (the NOTIFY could not be sent).
	WakePeer(ctx context.Context, projectID, peerID string) error
	// SubscribePeerWakes returns a new subscription. The caller must
	// Close it.
	SubscribePeerWakes() *PeerWakeSubscription
}

// PeerWakeSubscription receives wakes, each pending wake kept once
// between two Take calls; a publisher never waits for it. Ready is
// signalled (without blocking the publisher) when wakes are pending; call
// Take then. Close ends the subscription and closes Ready; it may be
// called twice.
type PeerWakeSubscription struct {
	*subscription[PeerWake, struct{}]
}

// Take returns the pending wakes, sorted by project and peer id, and
// clears them.
func (s *PeerWakeSubscription) Take() []PeerWake {
	p := s.take()
	out := make([]PeerWake, 0, len(p))
	for w := range p {
		out = append(out, w)
	}
	slices.SortFunc(out, func(a, b PeerWake) int {
		return cmp.Or(cmp.Compare(a.ProjectID, b.ProjectID), cmp.Compare(a.PeerID, b.PeerID))
	})
	return out
}

// PeerWakeBroker fans wakes out to subscriptions; the dialects embed one.
// The zero value is ready to use. OnFirst and OnLast, when set before use,
// run (under the broker's lock) when the first subscription opens and when
// the last one closes.
type PeerWakeBroker struct {
	broker[PeerWake, struct{}]
}

// SubscribePeerWakes implements PeerWakes.
func (b *PeerWakeBroker) SubscribePeerWakes() *PeerWakeSubscription {
	return &PeerWakeSubscription{b.subscribe()}
}

// Publish hands w to every subscription. It never blocks on a subscriber.
func (b *PeerWakeBroker) Publish(w PeerWake) {
	b.publish(w, struct{}{}, func(struct{}, struct{}) struct{} { return struct{}{} })
}
