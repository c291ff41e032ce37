package couriers

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/acrelay/acrelay/store"
)

// schedFixture is a scheduler over projects of loaded targets, every
// target caught up (idle) at head 1.
type schedFixture struct {
	s        scheduler
	projects []*project
}

func newSchedFixture(projects, perProject int, now time.Time) *schedFixture {
	f := &schedFixture{}
	for i := range projects {
		p := newProject(context.Background(), store.Lease{ProjectID: "p" + strconv.Itoa(i), Fence: 1})
		p.head, p.loaded = 1, true
		for j := range perProject {
			t := &target{p: p, t: Target{ID: "t" + strconv.Itoa(j)}, cursor: 1, idx: -1}
			p.targets[t.t.ID] = t
			f.s.enqueue(t, now, now)
		}
		f.projects = append(f.projects, p)
	}
	f.s.dispatch(now, always, func(*target) tstate { panic("nothing is behind") })
	return f
}

func always() bool { return true }

func TestSchedulerWakesOnlyIdleTargetsInDueOrder(t *testing.T) {
	now := time.Unix(1000, 0)
	f := newSchedFixture(2, 4, now)
	p, other := f.projects[0], f.projects[1]
	if len(p.idle) != 4 || len(other.idle) != 4 || len(f.s.due) != 0 {
		t.Fatalf("idle %d and %d, queued %d; want 4, 4, 0", len(p.idle), len(other.idle), len(f.s.due))
	}
	// t1 backs off until now+2s, t3 until now+1s.
	p.targets["t1"].notBefore = now.Add(2 * time.Second)
	p.targets["t3"].notBefore = now.Add(time.Second)

	var started []string
	start := func(t *target) tstate {
		started = append(started, t.p.id+"/"+t.t.ID)
		return stRunning
	}
	f.s.advance(p, 2, now)
	if len(other.idle) != 4 {
		t.Fatalf("the other project's idle targets: %d, want 4 (an advance wakes only its project's)", len(other.idle))
	}
	next := f.s.dispatch(now, always, start)
	slices.Sort(started)
	if want := []string{"p0/t0", "p0/t2"}; !slices.Equal(started, want) {
		t.Fatalf("started %v, want %v", started, want)
	}
	if !next.Equal(now.Add(time.Second)) {
		t.Fatalf("next due %v, want %v", next, now.Add(time.Second))
	}
	// An advance while a target runs does not start it twice.
	f.s.advance(p, 3, now)
	started = nil
	next = f.s.dispatch(now.Add(1500*time.Millisecond), always, start)
	if want := []string{"p0/t3"}; !slices.Equal(started, want) {
		t.Fatalf("started %v at +1.5s, want %v", started, want)
	}
	if !next.Equal(now.Add(2 * time.Second)) {
		t.Fatalf("next due %v, want %v", next, now.Add(2*time.Second))
	}
	// Removed while queued: never started.
	f.s.remove(p.targets["t1"])
	started = nil
	if next = f.s.dispatch(now.Add(time.Hour), always, start); len(started) != 0 || !next.IsZero() {
		t.Fatalf("after removing t1: started %v, next %v; want none, zero", started, next)
	}
	// A parked target waits for unpark, then starts.
	t2 := p.targets["t2"]
	t2.state, t2.cursor = stNew, 2
	f.s.enqueue(t2, now, now)
	f.s.dispatch(now, always, func(*target) tstate { return stParked })
	if t2.state != stParked || len(p.parked) != 1 {
		t.Fatalf("t2 state %d, parked %d; want parked", t2.state, len(p.parked))
	}
	f.s.unpark(p, now)
	started = nil
	f.s.dispatch(now, always, start)
	if want := []string{"p0/t2"}; !slices.Equal(started, want) {
		t.Fatalf("started %v after unpark, want %v", started, want)
	}
}

// BenchmarkAdvance is the scheduler's cost of one advance of a project
// of 100 targets (each woken, started, completed and back to idle) among
// n targets in all, of which a tenth are backing off in the due-heap. It
// stays flat in n: no step walks every target, and targets due now never
// touch the heap.
//
//	go test ./couriers -run '^$' -bench BenchmarkAdvance -benchtime 20000x -count 3
func BenchmarkAdvance(b *testing.B) {
	const perProject = 100
	for _, n := range []int{1_000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("targets=%d", n), func(b *testing.B) {
			now := time.Now()
			f := newSchedFixture(n/perProject, perProject, now)
			for i, p := range f.projects {
				if i%10 == 0 { // a tenth of the targets back off, queued far ahead
					for _, t := range p.targets {
						f.s.unidle(t)
						t.notBefore, t.cursor, t.state = now.Add(time.Hour), 0, stNew
						f.s.enqueue(t, now, now)
					}
				}
			}
			var running []*target
			start := func(t *target) tstate { running = append(running, t); return stRunning }
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				// The same 9 projects in turn (never a backing-off one): what
				// an advance touches is the same at every n, so a cost that
				// grew with n would be a walk of the targets it does not wake.
				p := f.projects[1+i%9]
				f.s.advance(p, p.head+1, now)
				f.s.dispatch(now, always, start)
				for _, t := range running { // each result: delivered up to the head
					t.state, t.cursor = stNew, p.head
					f.s.enqueue(t, now, now)
				}
				running = running[:0]
				f.s.dispatch(now, always, start)
			}
			b.StopTimer()
			if got := len(f.s.due); got != n/10 {
				b.Fatalf("%d queued after the run, want the %d backing off", got, n/10)
			}
		})
	}
}
