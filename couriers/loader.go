package couriers

import (
	"context"
	"sync"
	"time"

	"github.com/acrelay/acrelay/store"
)

// loader reads projects' heads, targets and the targets' durable state
// on goroutines of its own (loadParallel), so a slow store read never
// stalls the scheduling loop, nor the loads of other projects unless
// loadParallel of them are slow: the loop asks (request never blocks)
// and applies what comes back on loaded. Requests for a project already
// waiting are merged, and one project is loaded by one goroutine at a
// time (a request during its load waits for it), so loads of a project
// are applied in the order they were read. A project's next load starts
// no sooner than twice its last load's duration after it ended, so a
// project of 100,000 targets whose subscriptions are being verified one
// by one (each a Refresh) is reloaded at most a third of the time, not
// back to back.
type loader struct {
	r *Runner

	mu      sync.Mutex
	pending map[*project]bool
	order   []*project // FIFO of pending
	loading map[*project]bool
	timer   *time.Timer // kicks when the soonest project.loadAfter comes
	kick    chan struct{}

	loaded chan loadResult
}

// loadResult is one project's load.
type loadResult struct {
	p       *project
	head    int64
	targets []Target
	states  map[string]store.TargetState
	err     error
}

func newLoader(r *Runner) *loader {
	l := &loader{r: r, pending: map[*project]bool{}, loading: map[*project]bool{},
		kick: make(chan struct{}, 1), loaded: make(chan loadResult)}
	l.timer = time.AfterFunc(time.Hour, l.wake)
	l.timer.Stop()
	return l
}

func (l *loader) wake() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// request asks for p to be loaded; it never blocks.
func (l *loader) request(p *project) {
	l.mu.Lock()
	if !l.pending[p] {
		l.pending[p] = true
		l.order = append(l.order, p)
	}
	l.mu.Unlock()
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// loadParallel is how many projects are loaded at once.
const loadParallel = 4

// next takes the oldest pending request of a project not being loaded
// nor paced, and wakes another goroutine if more wait.
func (l *loader) next() *project {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	var soonest time.Time
	for i, p := range l.order {
		if l.loading[p] {
			continue
		}
		if at := p.loadAfter; at.After(now) {
			if soonest.IsZero() || at.Before(soonest) {
				soonest = at
			}
			continue
		}
		l.order = append(l.order[:i:i], l.order[i+1:]...)
		delete(l.pending, p)
		l.loading[p] = true
		if len(l.order) > 0 {
			select {
			case l.kick <- struct{}{}:
			default:
			}
		}
		return p
	}
	if !soonest.IsZero() {
		l.timer.Reset(soonest.Sub(now))
	}
	return nil
}

// done ends p's load, which took took; a request made meanwhile is taken
// once 2 × took has passed.
func (l *loader) done(p *project, took time.Duration) {
	l.mu.Lock()
	delete(l.loading, p)
	p.loadAfter = time.Now().Add(2 * took)
	again := l.pending[p]
	l.mu.Unlock()
	if again {
		select {
		case l.kick <- struct{}{}:
		default:
		}
	}
}

// run loads what is requested until ctx ends, on loadParallel goroutines.
func (l *loader) run(ctx context.Context) {
	var wg sync.WaitGroup
	for range loadParallel {
		wg.Go(func() { l.loop(ctx) })
	}
	wg.Wait()
}

func (l *loader) loop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.kick:
		}
		for p := l.next(); p != nil; p = l.next() {
			if !l.loadOne(ctx, p) {
				return
			}
		}
	}
}

// loadOne loads p and hands the result to the loop; false when ctx ended.
func (l *loader) loadOne(ctx context.Context, p *project) bool {
	start := time.Now()
	took := time.Duration(0)
	defer func() { l.done(p, took) }()
	if p.ctx.Err() != nil {
		return true // its lease is gone
	}
	res := l.load(p)
	took = time.Since(start)
	if res.err != nil && p.ctx.Err() != nil {
		return true
	}
	select {
	case l.loaded <- res:
		return true
	case <-ctx.Done():
		return false
	}
}

// load reads p's head, its targets and their durable state.
func (l *loader) load(p *project) loadResult {
	r := l.r
	res := loadResult{p: p}
	head, _, err := r.st.Head(p.ctx, p.id)
	if err != nil {
		r.log.Warn("read head", "project_id", p.id, "err", err)
		res.err = err
		return res
	}
	ts, err := r.courier.Targets(p.ctx, p.id)
	if err != nil {
		r.log.Warn("list targets", "project_id", p.id, "err", err)
		res.err = err
		return res
	}
	states, err := r.st.TargetStates(p.ctx, r.courier.Name(), p.id)
	if err != nil {
		r.log.Warn("read target states", "project_id", p.id, "err", err)
		res.err = err
		return res
	}
	res.head, res.targets = head, ts
	res.states = make(map[string]store.TargetState, len(states))
	for _, s := range states {
		res.states[s.Target] = s
	}
	return res
}
