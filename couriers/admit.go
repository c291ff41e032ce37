package couriers

// admission bounds the workers alive at once, so a fan-out to 100,000
// targets starts a few hundred goroutines, not 100,000 that would each
// wait for a slot (their stacks and the collector's scans of them grow
// with the targets, not with the deliveries in flight).
//
// A worker is admitted per target when it starts and lives until its
// result: at most maxWorkers in all (4 × Options.Concurrency, at least
// 64), and per Target.Host as many as the host's slots (hostslots.go):
// HostLimit workers of healthy targets and max(1, HostLimit/4) of slow
// ones, counted apart — so the slow ones can never take the places of
// the healthy ones, and every admitted worker can get a slot soon. A
// target whose host is full waits in the host's list (FIFO, per class)
// and is queued to start first once the host has room again (refill). Targets without a host, or whose host has no limit, count only
// towards maxWorkers.
type admission struct {
	limit      func(host string) int // Options.HostLimit
	slots      *hostSlots            // which targets are slow
	maxWorkers int

	running int
	hosts   map[string]*hostAdmit
	touched map[string]bool // hosts that may have room for waiting targets
}

// hostAdmit is one host's admitted workers and waiting targets, by class
// (0 healthy, 1 slow).
type hostAdmit struct {
	alive [2]int
	wait  [2][]*target
}

func newAdmission(limit func(string) int, slots *hostSlots, concurrency int) *admission {
	return &admission{limit: limit, slots: slots, maxWorkers: max(4*concurrency, 64), hosts: map[string]*hostAdmit{},
		touched: map[string]bool{}}
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
		return "", 0, true
	}
	limit := n
	if a.slots.isSlow(key) {
		class, limit = 1, max(1, n/4)
	}
	h := a.hosts[host]
	if h == nil {
		h = &hostAdmit{}
		a.hosts[host] = h
	}
	if h.alive[class] >= limit {
		h.wait[class] = append(h.wait[class], t)
		return host, class, false
	}
	h.alive[class]++
	a.running++
	return host, class, true
}

// release ends a worker admitted with host and class.
func (a *admission) release(host string, class int) {
	a.running--
	if h := a.hosts[host]; host != "" && h != nil {
		h.alive[class]--
		a.touched[host] = true
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
		again := false
		for class, limit := range [2]int{n, max(1, n/4)} {
			for free := limit - h.alive[class]; free > 0 && len(h.wait[class]) > 0; {
				t := h.wait[class][0]
				h.wait[class][0] = nil
				h.wait[class] = h.wait[class][1:]
				if t.state == stHostWait {
					queue(t)
					free--
					handed, again = true, true
				}
			}
		}
		if h.alive == [2]int{} && len(h.wait[0]) == 0 && len(h.wait[1]) == 0 {
			delete(a.hosts, host)
		}
		if !again {
			delete(a.touched, host)
		}
	}
	return handed
}
