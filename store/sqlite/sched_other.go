//go:build !linux

package sqlite

import (
	"errors"
	"fmt"
	"time"
)

var (
	errSliceUnsupported = errors.New("per-thread scheduling slices are a Linux feature")
	errSliceNotApplied  = errors.New("slice not applied")
)

// setThreadSlice is Linux only (sched_linux.go); elsewhere the group
// committer keeps the default scheduling.
func setThreadSlice(time.Duration) (time.Duration, error) {
	return 0, fmt.Errorf("%w: %w", errSliceNotApplied, errSliceUnsupported)
}

// threadID is 0: thread ids are read on Linux only.
func threadID() int { return 0 }
