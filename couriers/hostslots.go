package couriers

import (
	"context"
	"sync"
	"time"
)

// hostSlots is the per-host limit of deliveries in flight
// (Options.HostLimit: n slots per Target.Host), with a smaller share for
// slow targets, so one host's hanging callbacks cannot starve its healthy
// ones (spec/websub.md "Distribution": one slow or dead callback never
// delays others).
//
// A target is slow when its last delivery took Options.SlowDelivery or
// longer (a callback that hangs until the delivery times out); a delivery
// that finishes sooner makes it healthy again. A healthy target's delivery
// takes one of the host's n slots; a slow target's must first take one of
// the host's max(1, n/4) slow passes, then a slot. So at most n deliveries
// are in flight to a host, as before, and once its hanging targets have
// each been seen slow they hold at most n/4 of the slots: the others stay
// for its healthy targets. The first delivery of a target that hangs still
// holds its slot until it times out: slowness is learned, not guessed.
type hostSlots struct {
	limit     func(host string) int
	slowAfter time.Duration

	mu    sync.Mutex
	hosts map[string]*hostSem
	slow  map[targetKey]bool // targets whose last delivery was slow
}

// maxSlowTargets bounds the slow set; past it the set starts over (every
// target healthy again), so targets that vanished cannot grow it.
const maxSlowTargets = 1 << 16

type hostSem struct{ slots, slowPasses chan struct{} }

func newHostSlots(limit func(host string) int, slowAfter time.Duration) *hostSlots {
	return &hostSlots{limit: limit, slowAfter: slowAfter, hosts: map[string]*hostSem{}, slow: map[targetKey]bool{}}
}

// hostSlot is one delivery's hold on its host; the zero value (no host
// limit) holds nothing.
type hostSlot struct {
	hs       *hostSlots
	key      targetKey
	sem      *hostSem
	slowPass bool
	start    time.Time
}

// acquire waits for key's delivery to host to be allowed: a slot, and
// before it a slow pass for a slow target. Errors: ctx's.
func (h *hostSlots) acquire(ctx context.Context, host string, key targetKey) (*hostSlot, error) {
	if host == "" {
		return &hostSlot{}, nil
	}
	n := h.limit(host)
	if n < 1 {
		return &hostSlot{}, nil
	}
	h.mu.Lock()
	sem := h.hosts[host]
	if sem == nil || cap(sem.slots) != n {
		sem = &hostSem{slots: make(chan struct{}, n), slowPasses: make(chan struct{}, max(1, n/4))}
		h.hosts[host] = sem
	}
	slow := h.slow[key]
	h.mu.Unlock()
	if slow {
		select {
		case sem.slowPasses <- struct{}{}:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	select {
	case sem.slots <- struct{}{}:
		return &hostSlot{hs: h, key: key, sem: sem, slowPass: slow}, nil
	case <-ctx.Done():
		if slow {
			<-sem.slowPasses
		}
		return nil, ctx.Err()
	}
}

// begin marks the start of the delivery, after any other limit's wait.
func (s *hostSlot) begin() { s.start = time.Now() }

// release gives the slot (and pass) back and records whether the target
// was slow.
func (s *hostSlot) release() {
	if s.sem == nil {
		return
	}
	<-s.sem.slots
	if s.slowPass {
		<-s.sem.slowPasses
	}
	if s.start.IsZero() {
		return // no delivery was made: nothing learned
	}
	slow := time.Since(s.start) >= s.hs.slowAfter
	h := s.hs
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case !slow:
		delete(h.slow, s.key)
	case len(h.slow) >= maxSlowTargets:
		h.slow = map[targetKey]bool{s.key: true}
	default:
		h.slow[s.key] = true
	}
}

// isSlow reports whether key's last delivery was slow.
func (h *hostSlots) isSlow(key targetKey) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.slow[key]
}
