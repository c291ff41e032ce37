package sqlite

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// errSliceUnsupported: the kernel accepted the request but reports no
// custom slice (before Linux 6.12, sched_runtime means nothing to a
// SCHED_OTHER thread).
var errSliceUnsupported = errors.New("this kernel has no per-thread slices for SCHED_OTHER threads (Linux 6.12 or later has)")

// setThreadSlice asks the kernel to schedule the calling OS thread with a
// slice of d: sched_setattr(2) with SCHED_OTHER and sched_runtime = d, which
// Linux's EEVDF scheduler (6.12 or later) clamps to [100µs, 100ms]. A
// thread with a shorter slice than the others gets an earlier virtual
// deadline, so when it wakes (its fdatasync completes, an append arrives)
// it preempts a thread of the default slice (0.7 ms × (1 + log2 CPUs):
// 1.4 ms on two cores) instead of waiting for that slice to end. Its share of the CPU is unchanged and it
// needs no privilege. The thread keeps its nice value; a thread under
// another policy (SCHED_BATCH or IDLE, a real-time one the operator set)
// is left alone. The caller must hold its OS thread
// (runtime.LockOSThread). Returns the slice the kernel reports afterwards,
// or errSliceUnsupported, or the system call's error.
func setThreadSlice(d time.Duration) (time.Duration, error) {
	a, err := unix.SchedGetAttr(0, 0)
	if err != nil {
		return 0, fmt.Errorf("sched_getattr: %w", err)
	}
	if a.Policy != unix.SCHED_NORMAL {
		return 0, fmt.Errorf("the thread runs scheduling policy %d, not SCHED_OTHER: left as it is", a.Policy)
	}
	want := unix.SchedAttr{Policy: unix.SCHED_NORMAL, Nice: a.Nice, Runtime: uint64(d)}
	if err := unix.SchedSetAttr(0, &want, 0); err != nil {
		return 0, fmt.Errorf("sched_setattr: %w", err)
	}
	if a, err = unix.SchedGetAttr(0, 0); err != nil {
		return 0, fmt.Errorf("sched_getattr: %w", err)
	}
	if a.Runtime == 0 {
		return 0, errSliceUnsupported
	}
	return time.Duration(a.Runtime), nil
}

// threadID is the calling OS thread's id (gettid(2)).
func threadID() int { return unix.Gettid() }
