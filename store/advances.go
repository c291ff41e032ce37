package store

import (
	"slices"
	"strings"
	"sync"
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
// moved and a publisher never waits for it.
type AdvanceSubscription struct {
	b       *AdvanceBroker
	ready   chan struct{} // one pending signal
	mu      sync.Mutex
	pending map[string]int64
	closed  bool
}

// Ready is signalled (without blocking the publisher) when advances are
// pending; call Take then. It is closed by Close.
func (s *AdvanceSubscription) Ready() <-chan struct{} { return s.ready }

// Take returns the pending advances, one per project (its highest
// received_seq), sorted by project id, and clears them.
func (s *AdvanceSubscription) Take() []Advance {
	s.mu.Lock()
	p := s.pending
	s.pending = nil
	s.mu.Unlock()
	out := make([]Advance, 0, len(p))
	for id, seq := range p {
		out = append(out, Advance{ProjectID: id, ReceivedSeq: seq})
	}
	slices.SortFunc(out, func(a, b Advance) int { return strings.Compare(a.ProjectID, b.ProjectID) })
	return out
}

// Close ends the subscription and closes Ready. It may be called twice.
func (s *AdvanceSubscription) Close() { s.b.unsubscribe(s) }

func (s *AdvanceSubscription) publish(a Advance) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	if s.pending == nil {
		s.pending = make(map[string]int64)
	}
	if a.ReceivedSeq > s.pending[a.ProjectID] {
		s.pending[a.ProjectID] = a.ReceivedSeq
	}
	s.mu.Unlock()
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

// AdvanceBroker fans advances out to subscriptions; the dialects embed one.
// The zero value is ready to use. OnFirst and OnLast, when set before use,
// run (under the broker's lock) when the first subscription opens and when
// the last one closes: PostgreSQL starts and stops its LISTEN connection
// there.
type AdvanceBroker struct {
	OnFirst, OnLast func()

	mu   sync.Mutex
	subs map[*AdvanceSubscription]struct{}
}

// SubscribeAdvances implements Advances.
func (b *AdvanceBroker) SubscribeAdvances() *AdvanceSubscription {
	s := &AdvanceSubscription{b: b, ready: make(chan struct{}, 1)}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.subs == nil {
		b.subs = make(map[*AdvanceSubscription]struct{})
	}
	b.subs[s] = struct{}{}
	if len(b.subs) == 1 && b.OnFirst != nil {
		b.OnFirst()
	}
	return s
}

func (b *AdvanceBroker) unsubscribe(s *AdvanceSubscription) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.subs[s]; !ok {
		return
	}
	delete(b.subs, s)
	s.mu.Lock()
	s.closed = true
	s.pending = nil
	s.mu.Unlock()
	close(s.ready)
	if len(b.subs) == 0 && b.OnLast != nil {
		b.OnLast()
	}
}

// Publish tells every subscription that projectID reached receivedSeq. It
// never blocks on a subscriber.
func (b *AdvanceBroker) Publish(projectID string, receivedSeq int64) {
	a := Advance{ProjectID: projectID, ReceivedSeq: receivedSeq}
	b.mu.Lock()
	defer b.mu.Unlock()
	for s := range b.subs {
		s.publish(a)
	}
}

// Subscribers returns the number of open subscriptions.
func (b *AdvanceBroker) Subscribers() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.subs)
}
