package couriers

import (
	"context"
	"slices"
	"strconv"
	"testing"

	"github.com/acrelay/acrelay/store"
)

// TestAdmissionPerHostAndClass: the admission is the host limit: at most
// n workers per host, of which at most slowShare(n) slow; a target whose
// host is full waits (FIFO) and is handed when a worker of the host ends,
// skipping slow waiters while the slow share is taken.
func TestAdmissionPerHostAndClass(t *testing.T) {
	a := newAdmission(func(string) int { return 4 }, 2) // at most 64 workers
	p := newProject(context.Background(), store.Lease{ProjectID: "p", Fence: 1})
	ts := map[string]*target{}
	key := func(id string) targetKey { return targetKey{"p", id} }
	for i := range 8 {
		id := strconv.Itoa(i)
		ts[id] = &target{p: p, t: Target{ID: id, Host: "h"}, idx: -1}
	}
	// Targets 6 and 7 were slow: one slow worker at a time (4/4).
	a.slow[key("6")], a.slow[key("7")] = true, true
	var admitted []string
	for _, id := range []string{"6", "7", "0", "1", "2", "3", "4", "5"} {
		tt := ts[id]
		if _, class, ok := a.admit(tt, key(id)); ok {
			admitted = append(admitted, id)
			tt.state = stRunning
			if want := map[bool]int{false: classHealthy, true: classSlow}[id >= "6"]; class != want {
				t.Fatalf("target %s admitted in class %d, want %d", id, class, want)
			}
		} else {
			tt.state = stHostWait
		}
	}
	// 6 (the slow share) and 0–2 admitted: four places; 7, 3, 4, 5 wait.
	var waiting []string
	for _, w := range a.hosts["h"].wait {
		waiting = append(waiting, w.t.t.ID)
	}
	if !slices.Equal(admitted, []string{"6", "0", "1", "2"}) || a.running != 4 || !slices.Equal(waiting, []string{"7", "3", "4", "5"}) {
		t.Fatalf("admitted %v, running %d, waiting %v; want [6 0 1 2], 4, [7 3 4 5]", admitted, a.running, waiting)
	}
	var handed []string
	queue := func(tt *target) { handed = append(handed, tt.t.ID); tt.state = stReady }
	if a.refill(queue) || len(handed) != 0 {
		t.Fatalf("refill handed %v with no worker ended", handed)
	}
	// A healthy worker ends: the oldest waiter that fits (3) is handed;
	// the slow one keeps waiting for the slow worker.
	a.release("h", classHealthy, key("0"), true, false)
	if !a.refill(queue) || !slices.Equal(handed, []string{"3"}) {
		t.Fatalf("handed %v, want [3]", handed)
	}
	// 3 went idle instead of starting: the next refill hands 4 for the
	// place that is still free, which it takes.
	if !a.refill(queue) || !slices.Equal(handed, []string{"3", "4"}) {
		t.Fatalf("handed %v, want [3 4]", handed)
	}
	if _, _, ok := a.admit(ts["4"], key("4")); !ok {
		t.Fatal("4 was handed a place it could not take")
	}
	if a.refill(queue) {
		t.Fatalf("handed %v with the host full", handed)
	}
	// The slow worker ends and was slow again: 7 takes the slow share.
	a.release("h", classSlow, key("6"), true, true)
	a.refill(queue)
	if !slices.Equal(handed, []string{"3", "4", "7"}) {
		t.Fatalf("handed %v, want [3 4 7]", handed)
	}
	if a.running != 3 {
		t.Fatalf("running %d, want 3", a.running)
	}
	// What the workers' results taught: 6 is still slow; a worker that
	// made no delivery teaches nothing; a fast delivery makes 7 healthy.
	a.release("h", classHealthy, key("1"), false, true)
	a.release("h", classHealthy, key("2"), true, true)
	if !a.slow[key("6")] || a.slow[key("1")] || !a.slow[key("2")] {
		t.Fatalf("slow set %v, want 2, 6, 7", a.slow)
	}
	a.slow[key("7")] = true
	a.release("h", classHealthy, key("7"), true, false)
	if a.slow[key("7")] {
		t.Fatal("a fast delivery left 7 slow")
	}
}
