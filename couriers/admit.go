package couriers

// admission is the runner's one limiter of workers, global and per host.
// It lives under Runner.mu and takes no lock of its own.
//
// It bounds the workers alive at once, so a fan-out to 100,000 targets
// starts a few hundred goroutines, not 100,000 that would each wait for a
// slot (their stacks and the collector's scans of them grow with the
// targets, not with the deliveries in flight): at most maxWorkers in all
// (4 × Options.Concurrency, at least 64).
//
// It is also the per-host limit (Options.HostLimit: n per Target.Host),
// with a smaller share for slow targets, so one host's hanging callbacks
// cannot starve its healthy ones (spec/websub.md "Distribution": one slow
// or dead callback never delays others). A worker admitted for a host
// holds one of the host's n places from its start to its result — the
// admission is the host slot, there is no second semaphore in the worker
// — and a slow target's worker also one of its slowShare(n) places. A
// target is slow when its last delivery took Options.SlowDelivery or
// longer (a callback that hangs until the delivery times out); a delivery
// that finishes sooner makes it healthy again (the worker reports it with
// its result). So at most n workers deliver to a host, and once its
// hanging targets have each been seen slow they hold at most a quarter of
// the places: the others stay for its healthy targets. The first delivery
// of a target that hangs still holds its place until it times out:
// slowness is learned, not guessed.
//
// A target whose host is full waits in the host's list (FIFO) and is
// queued to start first once the host has room again (refill). Targets
// without a host, or whose host has no limit, count only towards
// maxWorkers.
type admission struct {
	limit      func(host string) int // Options.HostLimit
	maxWorkers int

	running int
	hosts   map[string]*hostAdmit
	touched map[string]bool    // hosts that may have room for waiting targets
	slow    map[targetKey]bool // targets whose last delivery was slow
}

// slowShare is how many of a host's n places slow targets may hold.
func slowShare(n int) int { return max(1, n/4) }

// maxSlowTargets bounds the slow set; past it the set starts over (every
// target healthy again), so targets that vanished cannot grow it.
const maxSlowTargets = 1 << 16

// Worker classes: a slow target's worker also holds one of the host's
// slow places.
const (
	classHealthy = 0
	classSlow    = 1
)

// hostAdmit is one host's admitted workers by class, and the targets
// waiting for a place, oldest first.
type hostAdmit struct {
	alive [2]int
	wait  []waiter
}

type waiter struct {
	t     *target
	class int
}

// room reports whether h may admit a worker of class under limit n.
func (h *hostAdmit) room(class, n int) bool {
	if h.alive[classHealthy]+h.alive[classSlow] >= n {
		return false
	}
	return class == classHealthy || h.alive[classSlow] < slowShare(n)
}

func newAdmission(limit func(string) int, concurrency int) *admission {
	return &admission{limit: limit, maxWorkers: max(4*concurrency, 64), hosts: map[string]*hostAdmit{},
		touched: map[string]bool{}, slow: map[targetKey]bool{}}
}

// room reports whether another worker may start.
func (a *admission) room() bool { return a.running < a.maxWorkers }

// admit counts a worker for t if its host has room and returns the host
// and class to release it with; otherwise it queues t in its host's
// wait list and returns ok false. Call it only when room is true.
func (a *admission) admit(t *target, key targetKey) (host string, class int, ok bool) {
	host = t.t.Host
	n := 0
	if host != "" {
		n = a.limit(host)
	}
	if n < 1 {
		a.running++
		return "", classHealthy, true
	}
	if a.slow[key] {
		class = classSlow
	}
	h := a.hosts[host]
	if h == nil {
		h = &hostAdmit{}
		a.hosts[host] = h
	}
	if !h.room(class, n) {
		h.wait = append(h.wait, waiter{t, class})
		return host, class, false
	}
	h.alive[class]++
	a.running++
	return host, class, true
}

// release ends a worker admitted with host and class for key. delivered
// tells whether it made a delivery, slow whether its last one took
// Options.SlowDelivery or longer (what is learned of key's class).
func (a *admission) release(host string, class int, key targetKey, delivered, slow bool) {
	a.running--
	if h := a.hosts[host]; host != "" && h != nil {
		h.alive[class]--
		a.touched[host] = true
	}
	switch {
	case !delivered: // nothing learned
	case !slow:
		delete(a.slow, key)
	case len(a.slow) >= maxSlowTargets:
		a.slow = map[targetKey]bool{key: true}
	default:
		a.slow[key] = true
	}
}

// refill hands to queue, oldest first, as many targets waiting for each
// host that had a worker end as the host has room for now, and reports
// whether it handed any. Those handed are not yet admitted: some may go
// idle instead, so call dispatch then refill again until it hands none.
func (a *admission) refill(queue func(*target)) bool {
	if !a.room() || len(a.touched) == 0 {
		return false
	}
	handed := false
	for host := range a.touched {
		h := a.hosts[host]
		if h == nil {
			delete(a.touched, host)
			continue
		}
		n := a.limit(host)
		if n < 1 {
			n = len(h.wait) + h.alive[classHealthy] + h.alive[classSlow] // the limit was lifted
		}
		// The places handed count as taken until dispatch admits them.
		room := *h
		again := false
		kept := h.wait[:0]
		for _, w := range h.wait {
			switch {
			case w.t.state != stHostWait: // started or gone meanwhile: dropped
			case room.room(w.class, n):
				room.alive[w.class]++
				queue(w.t)
				handed, again = true, true
			default:
				kept = append(kept, w)
			}
		}
		clear(h.wait[len(kept):])
		h.wait = kept
		if h.alive == [2]int{} && len(h.wait) == 0 {
			delete(a.hosts, host)
		}
		if !again {
			delete(a.touched, host)
		}
	}
	return handed
}
