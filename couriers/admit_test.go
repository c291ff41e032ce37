package couriers

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/acrelay/acrelay/store"
)

func TestAdmissionPerHostAndClass(t *testing.T) {
	slots := newHostSlots(func(string) int { return 4 }, time.Second)
	a := newAdmission(func(string) int { return 4 }, slots, 2) // at most 64 workers
	p := newProject(context.Background(), store.Lease{ProjectID: "p", Fence: 1})
	var ts []*target
	for i := range 8 {
		ts = append(ts, &target{p: p, t: Target{ID: strconv.Itoa(i), Host: "h"}, idx: -1})
	}
	// Targets 6 and 7 were slow: one slow worker at a time (4/4).
	slots.slow[targetKey{"p", "6"}], slots.slow[targetKey{"p", "7"}] = true, true
	admitted := 0
	for _, tt := range ts {
		if _, class, ok := a.admit(tt, targetKey{"p", tt.t.ID}); ok {
			admitted++
			tt.state = stRunning
			if want := map[bool]int{false: 0, true: 1}[tt.t.ID >= "6"]; class != want {
				t.Fatalf("target %s admitted in class %d, want %d", tt.t.ID, class, want)
			}
		} else {
			tt.state = stHostWait
		}
	}
	// 0–3 healthy and 6 slow admitted; 4, 5 and 7 wait.
	if admitted != 5 || a.running != 5 || len(a.hosts["h"].wait[0]) != 2 || len(a.hosts["h"].wait[1]) != 1 {
		t.Fatalf("admitted %d, running %d, waiting %d healthy %d slow; want 5, 5, 2, 1",
			admitted, a.running, len(a.hosts["h"].wait[0]), len(a.hosts["h"].wait[1]))
	}
	var handed []string
	queue := func(tt *target) { handed = append(handed, tt.t.ID); tt.state = stReady }
	if a.refill(queue) || len(handed) != 0 {
		t.Fatalf("refill handed %v with no worker ended", handed)
	}
	// A healthy worker ends: the oldest healthy waiter (4) is handed; the
	// slow one keeps waiting for the slow worker.
	a.release("h", 0)
	if !a.refill(queue) || len(handed) != 1 || handed[0] != "4" {
		t.Fatalf("handed %v, want [4]", handed)
	}
	// 4 went idle instead of starting: the next refill hands 5 for the
	// room that is still free.
	if !a.refill(queue) || len(handed) != 2 || handed[1] != "5" {
		t.Fatalf("handed %v, want [4 5]", handed)
	}
	a.release("h", 1)
	a.refill(queue)
	if len(handed) != 3 || handed[2] != "7" {
		t.Fatalf("handed %v, want [4 5 7]", handed)
	}
	if a.running != 3 {
		t.Fatalf("running %d, want 3", a.running)
	}
}
