//go:build !linux

package sqlite

import (
	"errors"
	"time"
)

var errSliceUnsupported = errors.New("per-thread scheduling slices are a Linux feature")

// setThreadSlice is Linux only (sched_linux.go); elsewhere the group
// committer keeps the default scheduling.
func setThreadSlice(time.Duration) (time.Duration, error) { return 0, errSliceUnsupported }

// threadID is 0: thread ids are read on Linux only.
func threadID() int { return 0 }
