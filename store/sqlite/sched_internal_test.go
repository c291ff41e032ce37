//go:build linux

package sqlite

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acrelay/acrelay/store/storetest"
)

// threadSlice reads a thread's se.slice (ns) from /proc; ok is false when
// the kernel does not show it.
func threadSlice(t *testing.T, tid int) (ns int64, ok bool) {
	t.Helper()
	b, err := os.ReadFile("/proc/self/task/" + strconv.Itoa(tid) + "/sched")
	if errors.Is(err, os.ErrNotExist) {
		return 0, false // a kernel without CONFIG_SCHED_DEBUG
	}
	if err != nil {
		t.Fatalf("read sched of thread %d: %v", tid, err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if name, v, found := strings.Cut(line, ":"); found && strings.TrimSpace(name) == "se.slice" {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				t.Fatalf("se.slice %q: %v", v, err)
			}
			return n, true
		}
	}
	return 0, false
}

func openSlice(t *testing.T, slice time.Duration) *DB {
	t.Helper()
	db, err := OpenWith(context.Background(), filepath.Join(t.TempDir(), "acrelay.db"), slog.New(slog.DiscardHandler), Options{CommitterSlice: slice})
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// sliceRuns makes each run of TestCommitterSlice ask for its own slice
// (go test -count=N): a committer that ran on the process's main thread
// leaves that thread parked with its slice.
var sliceRuns atomic.Int64

// The group committer's thread, and only it, runs with the slice asked
// for; the thread ends with the store, so the slice never reaches Go's
// pool of threads; CommitterSlice -1 asks for nothing. The slice is an
// odd value no other store asks for (every other store's committer has
// the default).
func TestCommitterSlice(t *testing.T) {
	slice := time.Duration(1_234_567+1_000*sliceRuns.Add(1)) * time.Nanosecond
	db := openSlice(t, slice)
	got, err := db.CommitterSlice()
	if errors.Is(err, errSliceUnsupported) {
		db.Close()
		t.Skipf("not checked: %v", err)
	}
	if err != nil || got != slice {
		db.Close()
		t.Fatalf("CommitterSlice() = %v, %v; want %v, nil", got, err, slice)
	}
	tid := db.committerTID
	if ns, ok := threadSlice(t, tid); ok && ns != slice.Nanoseconds() {
		t.Errorf("thread %d se.slice = %d, want %d", tid, ns, slice.Nanoseconds())
	}
	// Appends run, concurrently (the runtime starts threads meanwhile),
	// and no other thread got the slice.
	ctx := context.Background()
	p, err := db.CreateProject(ctx, storetest.NewUUID())
	if err != nil {
		t.Fatal(err)
	}
	s := storetest.NewSigner(t, p.ID).Register(t, db)
	errs := make(chan error, 32)
	for i := range 32 {
		ev, c := s.Event(t, storetest.Spec{ThreadID: "t", Summary: strconv.Itoa(i)})
		go func() { _, err := db.Append(ctx, ev, c); errs <- err }()
	}
	for range 32 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range tasks {
		other, _ := strconv.Atoi(e.Name())
		if other == tid {
			continue
		}
		if _, err := os.Stat("/proc/self/task/" + e.Name()); err != nil {
			continue // ended meanwhile
		}
		if ns, ok := threadSlice(t, other); ok && ns == slice.Nanoseconds() {
			t.Errorf("thread %d also has the committer's slice", other)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if tid == os.Getpid() {
		t.Log("the committer ran on the main thread, which Go parks instead of ending: exit not checked")
		tid = 0
	}
	deadline := time.Now().Add(5 * time.Second)
	for tid != 0 {
		if _, err := os.Stat("/proc/self/task/" + strconv.Itoa(tid)); errors.Is(err, os.ErrNotExist) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the committer's thread %d outlived Close", tid)
		}
		time.Sleep(10 * time.Millisecond)
	}

	off := openSlice(t, -1)
	defer off.Close()
	if got, err := off.CommitterSlice(); got != 0 || err != nil || off.committerTID != 0 {
		t.Errorf("CommitterSlice -1: CommitterSlice() = %v, %v, thread %d; want 0, nil, 0", got, err, off.committerTID)
	}
}

// Options.CommitterSlice 0 asks for DefaultCommitterSlice; the kernel
// clamps a slice to at most 100 ms.
func TestCommitterSliceDefaultAndClamp(t *testing.T) {
	for _, c := range []struct{ ask, want time.Duration }{{0, DefaultCommitterSlice}, {time.Second, 100 * time.Millisecond}} {
		db := openSlice(t, c.ask)
		got, err := db.CommitterSlice()
		db.Close()
		if errors.Is(err, errSliceUnsupported) {
			t.Skipf("not checked: %v", err)
		}
		if err != nil || got != c.want {
			t.Errorf("CommitterSlice %v: CommitterSlice() = %v, %v; want %v, nil", c.ask, got, err, c.want)
		}
	}
}
