package store

import "sync"

// broker fans values out to subscriptions without ever blocking a
// publisher: between two takes a subscription keeps one pending value per
// key (what merge made of the values published under it) and one ready
// signal. AdvanceBroker and PeerWakeBroker are its two uses. The zero
// value is ready to use. OnFirst and OnLast, when set before use, run
// (under the broker's lock) when the first subscription opens and when the
// last one closes: PostgreSQL starts and stops its LISTEN connection there.
type broker[K comparable, V any] struct {
	OnFirst, OnLast func()

	mu   sync.Mutex
	subs map[*subscription[K, V]]struct{}
}

// subscription is one subscriber's pending values; see broker.
type subscription[K comparable, V any] struct {
	b       *broker[K, V]
	ready   chan struct{} // one pending signal
	mu      sync.Mutex
	pending map[K]V
	closed  bool
}

func (b *broker[K, V]) subscribe() *subscription[K, V] {
	s := &subscription[K, V]{b: b, ready: make(chan struct{}, 1)}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.subs == nil {
		b.subs = make(map[*subscription[K, V]]struct{})
	}
	b.subs[s] = struct{}{}
	if len(b.subs) == 1 && b.OnFirst != nil {
		b.OnFirst()
	}
	return s
}

// publish hands (k, v) to every subscription, merged with what is pending
// under k there (merge(old, v); v alone when nothing is).
func (b *broker[K, V]) publish(k K, v V, merge func(old, v V) V) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for s := range b.subs {
		s.publish(k, v, merge)
	}
}

// Subscribers returns the number of open subscriptions.
func (b *broker[K, V]) Subscribers() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.subs)
}

func (b *broker[K, V]) unsubscribe(s *subscription[K, V]) {
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

func (s *subscription[K, V]) publish(k K, v V, merge func(old, v V) V) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	if s.pending == nil {
		s.pending = make(map[K]V)
	}
	if old, ok := s.pending[k]; ok {
		v = merge(old, v)
	}
	s.pending[k] = v
	s.mu.Unlock()
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

// Ready is signalled (without blocking the publisher) when values are
// pending; call Take then. It is closed by Close.
func (s *subscription[K, V]) Ready() <-chan struct{} { return s.ready }

// Close ends the subscription and closes Ready. It may be called twice.
func (s *subscription[K, V]) Close() { s.b.unsubscribe(s) }

// take returns the pending values and clears them.
func (s *subscription[K, V]) take() map[K]V {
	s.mu.Lock()
	p := s.pending
	s.pending = nil
	s.mu.Unlock()
	return p
}
