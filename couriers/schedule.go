package couriers

import (
	"container/heap"
	"context"
	"time"

	"github.com/acrelay/acrelay/store"
)

// The scheduler: which target's worker starts next. Every target the
// Runner knows is in exactly one place —
//
//   - idle: caught up with its project's head as last known (the
//     project's idle list); an advance of the project moves its idle
//     targets to the ready queue, and nothing else looks at them;
//   - ready: due now, in the FIFO ready queue;
//   - waiting: due later (the end of a backoff), in the due-heap
//     (container/heap) ordered by due time, then by when it was queued;
//   - running: a worker drains it; its result queues it again (ready
//     after a delivery, in the due-heap until the end of its backoff
//     after a failure);
//   - parked: due while its project's lease was not known safe; queued
//     again at the keeper's next report;
//   - waiting for its host: due, but as many workers as its host may
//     have are alive (admit.go); started when one of them ends, before
//     the ready queue;
//   - waiting for an old worker: a worker started under an earlier fence
//     of the project still runs for it; queued again when that one's
//     result arrives.
//
// So an advance costs O(k) for the k idle targets it wakes, a failure
// O(log n) for the n targets backing off, and finding the next due
// target O(1): no step walks every target (BenchmarkAdvance).

// tstate is where a target is (above).
type tstate uint8

const (
	stNew      tstate = iota // in no set: about to be queued
	stIdle                   // in its project's idle list
	stReady                  // in the ready queue
	stQueued                 // in the due-heap
	stRunning                // a worker runs for it
	stParked                 // in its project's parked list
	stHostWait               // in its host's wait list (admit.go)
	stWaitOld                // an earlier fence's worker still runs for it
	stGone                   // removed: ignored wherever it is still named
)

// project is the state of a project whose lease the Runner holds.
type project struct {
	id      string
	lease   store.Lease
	head    int64
	ctx     context.Context // ends when the lease is lost
	cancel  context.CancelFunc
	targets map[string]*target
	idle    []*target // caught up: woken by the next advance
	parked  []*target // due while the lease was not known safe
	loaded  bool      // targets read at least once
	gen     uint64    // the last load's generation (load marks the targets it lists)

	loadAfter time.Time // the loader's: not loaded again before (under loader.mu)
}

func newProject(ctx context.Context, l store.Lease) *project {
	pctx, cancel := context.WithCancel(ctx)
	return &project{id: l.ProjectID, lease: l, ctx: pctx, cancel: cancel,
		targets: map[string]*target{}}
}

// target is one target of a held project and its delivery state.
type target struct {
	p            *project
	t            Target
	cursor       int64
	failures     int
	failingSince time.Time
	notBefore    time.Time // local clock: not started before
	lastErr      string
	reported     bool  // FailingReporter told for this run of failures
	retryUpTo    int64 // the failed batch's last received_seq: a retry resends exactly that batch
	gen          uint64

	state tstate
	due   time.Time // when in the due-heap
	seq   uint64    // queue order among equal due times
	idx   int       // index in the due-heap, or in the project's idle list
}

// dueHeap is a container/heap of queued targets, soonest due first.
type dueHeap []*target

func (h dueHeap) Len() int { return len(h) }
func (h dueHeap) Less(i, j int) bool {
	if !h[i].due.Equal(h[j].due) {
		return h[i].due.Before(h[j].due)
	}
	return h[i].seq < h[j].seq
}
func (h dueHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i, j
}
func (h *dueHeap) Push(x any) {
	t := x.(*target)
	t.idx = len(*h)
	*h = append(*h, t)
}
func (h *dueHeap) Pop() any {
	old := *h
	n := len(old)
	t := old[n-1]
	old[n-1] = nil
	t.idx = -1
	*h = old[:n-1]
	return t
}

// scheduler holds the ready queue and the due-heap. It is used by one
// goroutine (the Runner's loop, under Runner.mu).
type scheduler struct {
	first     []*target // released from a host's wait: taken before ready
	ready     []*target // FIFO from readyHead; removed targets stay as stGone
	readyHead int
	due       dueHeap
	seq       uint64
}

// enqueue queues t to be due at at, or at the end of its backoff if that
// is later: ready when that is not after now, else in the due-heap. A
// queued target keeps the sooner of its due times; a running (or
// waiting) one is queued by its result instead.
func (s *scheduler) enqueue(t *target, at, now time.Time) {
	if t.notBefore.After(at) {
		at = t.notBefore
	}
	switch t.state {
	case stReady, stRunning, stWaitOld, stHostWait, stGone:
		return
	case stQueued:
		if !at.After(now) {
			heap.Remove(&s.due, t.idx)
			break
		}
		if at.Before(t.due) {
			t.due = at
			heap.Fix(&s.due, t.idx)
		}
		return
	case stIdle:
		s.unidle(t)
	}
	if !at.After(now) {
		t.state = stReady
		s.ready = append(s.ready, t)
		return
	}
	s.seq++
	t.state, t.due, t.seq = stQueued, at, s.seq
	heap.Push(&s.due, t)
}

// unidle takes t out of its project's idle list.
func (s *scheduler) unidle(t *target) {
	idle := t.p.idle
	last := idle[len(idle)-1]
	idle[t.idx], last.idx = last, t.idx
	idle[len(idle)-1] = nil
	t.p.idle = idle[:len(idle)-1]
	t.idx = -1
}

// remove forgets t wherever it is; a worker running for it reports to
// nobody.
func (s *scheduler) remove(t *target) {
	switch t.state {
	case stQueued:
		heap.Remove(&s.due, t.idx)
	case stIdle:
		s.unidle(t)
	}
	t.state = stGone // in a ready queue, a parked or a host's wait list: skipped there
	if t.p.targets[t.t.ID] == t {
		delete(t.p.targets, t.t.ID)
	}
}

// advance raises p's head to head and queues its idle targets: they were
// caught up with the old head, so each has records now.
func (s *scheduler) advance(p *project, head int64, now time.Time) {
	if head <= p.head {
		return
	}
	p.head = head
	for i, t := range p.idle {
		t.state, t.idx = stNew, -1
		p.idle[i] = nil
		s.enqueue(t, now, now)
	}
	p.idle = p.idle[:0]
}

// unpark queues again the targets of p that were due while its lease was
// not known safe.
func (s *scheduler) unpark(p *project, now time.Time) {
	for _, t := range p.parked {
		if t.state == stParked {
			t.state = stNew
			s.enqueue(t, now, now)
		}
	}
	p.parked = nil
}

// dispatch takes the targets due by now — those of the due-heap whose
// time came join the ready queue — while room says a worker may start:
// first those released from a host's wait (release), then the ready
// queue in order. One caught up with its head goes idle; start is called
// for the others and says what became of each (stRunning, stParked,
// stWaitOld or stHostWait). It returns when the next target of the
// due-heap is due (zero when none is); targets left ready for want of
// room are taken by a later dispatch.
func (s *scheduler) dispatch(now time.Time, room func() bool, start func(t *target) tstate) time.Time {
	for len(s.due) > 0 && !s.due[0].due.After(now) {
		t := heap.Pop(&s.due).(*target)
		t.state = stReady
		s.ready = append(s.ready, t)
	}
	for room() {
		var t *target
		switch {
		case len(s.first) > 0:
			t, s.first[0] = s.first[0], nil
			s.first = s.first[1:]
		case s.readyHead < len(s.ready):
			t, s.ready[s.readyHead] = s.ready[s.readyHead], nil
			s.readyHead++
		}
		if t == nil {
			break
		}
		if t.state == stReady {
			s.take(t, start)
		}
	}
	switch {
	case s.readyHead == len(s.ready):
		s.ready, s.readyHead = s.ready[:0], 0
	case s.readyHead > len(s.ready)/2:
		n := copy(s.ready, s.ready[s.readyHead:])
		clear(s.ready[n:])
		s.ready, s.readyHead = s.ready[:n], 0
	}
	if len(s.due) > 0 {
		return s.due[0].due
	}
	return time.Time{}
}

// release queues t, which waited for its host, to be taken first by the
// next dispatch.
func (s *scheduler) release(t *target) {
	if t.state != stHostWait {
		return
	}
	t.state = stReady
	s.first = append(s.first, t)
}

// take starts t or, when it is caught up, makes it idle.
func (s *scheduler) take(t *target, start func(t *target) tstate) {
	p := t.p
	if t.cursor >= p.head {
		t.state, t.idx = stIdle, len(p.idle)
		p.idle = append(p.idle, t)
		return
	}
	switch t.state = start(t); t.state {
	case stParked:
		p.parked = append(p.parked, t)
	case stRunning, stWaitOld, stHostWait:
	default:
		panic("couriers: start returned a state that is not a start's")
	}
}

// dropProject forgets p and its targets (its lease is lost).
func (s *scheduler) dropProject(p *project) {
	p.cancel()
	for _, t := range p.targets {
		s.remove(t)
	}
	p.parked = nil
}
