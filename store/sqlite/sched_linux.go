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

// errSliceNotApplied wraps every setThreadSlice error after which the
// thread's scheduling attributes are as they were.
var errSliceNotApplied = errors.New("slice not applied")

// setThreadSlice asks the kernel to schedule the calling OS thread with a
// slice of d: sched_setattr(2) with SCHED_OTHER and sched_runtime = d, which
// Linux's EEVDF scheduler (6.12 or later) clamps to [100µs, 100ms]. A
// thread with a shorter slice than the others gets an earlier virtual
// deadline, so when it wakes (its fdatasync completes, an append arrives)
// it is far more likely to preempt a thread of the default slice (0.7 ms
// × (1 + log2 CPUs): 1.4 ms on two cores) than to wait for that slice to
// end. Its share of the CPU is unchanged and it needs no privilege. The
// thread keeps its nice value; a thread under another policy (SCHED_BATCH
// or IDLE, a real-time one the operator set) is left alone. The caller
// must hold its OS thread (runtime.LockOSThread): threads cloned from it
// would inherit the slice. Returns the slice the kernel reports
// afterwards; or an error wrapping errSliceNotApplied (the system call
// failed or is filtered, another policy, or errSliceUnsupported) after
// which the thread is as it was; or the error of reading the result back.
func setThreadSlice(d time.Duration) (time.Duration, error) {
	a, err := unix.SchedGetAttr(0, 0)
	if err != nil {
		return 0, fmt.Errorf("%w: sched_getattr: %w", errSliceNotApplied, err)
	}
	if a.Policy != unix.SCHED_NORMAL {
		return 0, fmt.Errorf("%w: the thread runs scheduling policy %d, not SCHED_OTHER", errSliceNotApplied, a.Policy)
	}
	want := unix.SchedAttr{Policy: unix.SCHED_NORMAL, Nice: a.Nice, Runtime: uint64(d)}
	if err := unix.SchedSetAttr(0, &want, 0); err != nil {
		return 0, fmt.Errorf("%w: sched_setattr: %w", errSliceNotApplied, err)
	}
	if a, err = unix.SchedGetAttr(0, 0); err != nil {
		return 0, fmt.Errorf("sched_getattr after sched_setattr: %w", err)
	}
	if a.Runtime == 0 {
		// Same policy and nice: the call changed nothing.
		return 0, fmt.Errorf("%w: %w", errSliceNotApplied, errSliceUnsupported)
	}
	return time.Duration(a.Runtime), nil
}

// threadID is the calling OS thread's id (gettid(2)).
func threadID() int { return unix.Gettid() }
