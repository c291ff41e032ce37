package store

import (
	"slices"
	"strings"
)

// Advance is the invalidation "project ProjectID reached received_seq
// ReceivedSeq" (DESIGN.md: advances are invalidations, never payloads).
// A subscriber reads the records themselves from the store by cursor.
type Advance struct {
	ProjectID   string
	ReceivedSeq int64
}

// Advances is the one subscription API through which every store publishes
// its projects' advances: in process after each commit (SQLite), and across
// processes through LISTEN/NOTIFY (PostgreSQL), with every project's head
// re-published after the listener reconnects, so a subscriber that treats
// an advance as "read after your cursor" never misses a record.
type Advances interface {
	// SubscribeAdvances returns a new subscription. The caller must Close
	// it. It never blocks a publisher (see AdvanceSubscription).
	SubscribeAdvances() *AdvanceSubscription
}

// AdvanceSubscription receives advances coalesced per project: between two
// Take calls it keeps, per project, only the highest received_seq
// published, so a slow subscriber costs at most one entry per project that
// moved and a publisher never waits for it. Ready is signalled (without
// blocking the publisher) when advances are pending; call Take then. Close
// ends the subscription and closes Ready; it may be called twice.
type AdvanceSubscription struct {
	*subscription[string, int64]
}

// Take returns the pending advances, one per project (its highest
// received_seq), sorted by project id, and clears them.
func (s *AdvanceSubscription) Take() []Advance {
	p := s.take()
	out := make([]Advance, 0, len(p))
	for id, seq := range p {
		out = append(out, Advance{ProjectID: id, ReceivedSeq: seq})
	}
	slices.SortFunc(out, func(a, b Advance) int { return strings.Compare(a.ProjectID, b.ProjectID) })
	return out
}

// AdvanceBroker fans advances out to subscriptions; the dialects embed one.
// The zero value is ready to use. OnFirst and OnLast, when set before use,
// run (under the broker's lock) when the first subscription opens and when
// the last one closes: PostgreSQL starts and stops its LISTEN connection
// there. Subscribers returns the number of open subscriptions.
type AdvanceBroker struct {
	broker[string, int64]
}

// SubscribeAdvances implements Advances.
func (b *AdvanceBroker) SubscribeAdvances() *AdvanceSubscription {
	return &AdvanceSubscription{b.subscribe()}
}

// Publish tells every subscription that projectID reached receivedSeq. It
// never blocks on a subscriber.
func (b *AdvanceBroker) Publish(projectID string, receivedSeq int64) {
	b.publish(projectID, receivedSeq, func(old, seq int64) int64 { return max(old, seq) })
}
