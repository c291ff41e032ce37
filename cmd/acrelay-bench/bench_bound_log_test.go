package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"
)

// observedLog is a boundLog whose sync records what the file held when
// it was synced, so that a test can check that an acknowledged append
// had been synced, not only written.
type observedLog struct {
	*boundLog
	path   string
	mu     sync.Mutex
	synced []byte // the ring's first 64 KiB at the last sync
	syncs  int
}

func openObservedLog(t *testing.T) *observedLog {
	t.Helper()
	path := filepath.Join(t.TempDir(), "bound.log")
	l, err := openBoundLog(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.close() })
	o := &observedLog{boundLog: l, path: path}
	realSync := l.sync
	l.sync = func() error {
		snap := o.head(t)
		if err := realSync(); err != nil {
			return err
		}
		o.mu.Lock()
		o.synced, o.syncs = snap, o.syncs+1
		o.mu.Unlock()
		return nil
	}
	return o
}

// head reads the ring's first 64 KiB.
func (o *observedLog) head(t *testing.T) []byte {
	f, err := os.Open(o.path)
	if err != nil {
		t.Error(err)
		return nil
	}
	defer f.Close()
	b := make([]byte, 64<<10)
	if _, err := f.ReadAt(b, 0); err != nil {
		t.Error(err)
	}
	return b
}

// holdFirstSync makes the next sync close held and wait until release is
// closed before it runs.
func (o *observedLog) holdFirstSync() (held, release chan struct{}) {
	held, release = make(chan struct{}), make(chan struct{})
	observed := o.sync
	var once sync.Once
	o.sync = func() error {
		once.Do(func() { close(held); <-release })
		return observed()
	}
	return held, release
}

func (o *observedLog) wasSynced(line string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return bytes.Contains(o.synced, []byte(line+"\n"))
}

// TestBoundLogAppends: concurrent appends each return only once a sync
// has covered their bytes; every append is in the log exactly once, none
// torn; appends share syncs.
func TestBoundLogAppends(t *testing.T) {
	o := openObservedLog(t)
	if fi, err := os.Stat(o.path); err != nil || fi.Size() != boundLogSize {
		t.Fatalf("log file: %v %v, want %d preallocated bytes", fi, err, boundLogSize)
	}
	const writers, each = 16, 50 // ≈ 20 KB: the ring does not wrap
	var wg sync.WaitGroup
	var want []string
	for w := range writers {
		for i := range each {
			want = append(want, fmt.Sprintf(`{"writer":%d,"n":%d}`, w, i))
		}
		wg.Go(func() {
			for i := range each {
				line := fmt.Sprintf(`{"writer":%d,"n":%d}`, w, i)
				if err := o.append([]byte(line)); err != nil {
					t.Errorf("append %s: %v", line, err)
					return
				}
				if !o.wasSynced(line) {
					t.Errorf("append %s returned before a sync covered it", line)
				}
			}
		})
	}
	wg.Wait()
	b := o.head(t)
	got := bytes.Split(bytes.TrimRight(b, "\x00"), []byte("\n"))
	if len(got[len(got)-1]) != 0 {
		t.Fatalf("log does not end with a newline: %q", got[len(got)-1])
	}
	var lines []string
	for _, g := range got[:len(got)-1] {
		lines = append(lines, string(g))
	}
	slices.Sort(lines)
	slices.Sort(want)
	if !slices.Equal(lines, want) {
		t.Fatalf("log holds %d lines, want the %d appends exactly once", len(lines), len(want))
	}
	if o.syncs >= writers*each {
		t.Errorf("%d syncs for %d appends: no group commit", o.syncs, writers*each)
	}
}

// TestBoundLogWaitsForSync: while a sync is held, no append of its batch
// or the next returns; once it completes they all do.
func TestBoundLogWaitsForSync(t *testing.T) {
	o := openObservedLog(t)
	held, release := o.holdFirstSync()
	returned := make(chan error, 8)
	for i := range 8 {
		go func() { returned <- o.append(fmt.Appendf(nil, "event %d", i)) }()
		if i == 0 {
			<-held // the first batch is syncing; the others queue behind it
		}
	}
	select {
	case err := <-returned:
		t.Fatalf("an append returned (%v) while the sync was held", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	for range 8 {
		if err := <-returned; err != nil {
			t.Fatal(err)
		}
	}
	for i := range 8 {
		if !o.wasSynced(fmt.Sprintf("event %d", i)) {
			t.Errorf("event %d acknowledged, not synced", i)
		}
	}
}

// TestBoundLogFailureSticks: a failed sync fails its batch and every
// append queued behind it, and every later append even once the file
// works again; nothing after the failure is written.
func TestBoundLogFailureSticks(t *testing.T) {
	o := openObservedLog(t)
	if err := o.append([]byte("first")); err != nil {
		t.Fatal(err)
	}
	held, release := make(chan struct{}), make(chan struct{})
	observed := o.sync
	var calls int
	o.sync = func() error {
		calls++
		if calls == 1 {
			close(held)
			<-release
			return errors.New("injected EIO")
		}
		return observed()
	}
	var writes int
	write := o.write
	o.write = func(b []byte, off int64) error { writes++; return write(b, off) }
	returned := make(chan error, 8)
	for i := range 8 {
		go func() { returned <- o.append(fmt.Appendf(nil, "doomed %d", i)) }()
		if i == 0 {
			<-held
		}
	}
	time.Sleep(50 * time.Millisecond) // let the others queue
	close(release)
	for range 8 {
		if err := <-returned; err == nil {
			t.Fatal("an append of or behind the failed batch succeeded")
		}
	}
	for i := range 3 {
		if err := o.append([]byte("later")); err == nil {
			t.Fatalf("append %d after the failure: nil error", i)
		}
	}
	if writes != 1 || calls != 1 {
		t.Errorf("%d writes and %d syncs after the failure began, want 1 and 1", writes, calls)
	}
}

// TestBoundLogRing: appends wrap around the ring without tearing a
// batch, and an append that cannot fit is refused.
func TestBoundLogRing(t *testing.T) {
	o := openObservedLog(t)
	if err := o.append(make([]byte, boundLogSize)); err == nil {
		t.Fatal("an append as large as the ring: nil error")
	}
	o.size = 4096
	line := bytes.Repeat([]byte("x"), 99) // 100 bytes with its newline
	for i := range 100 {                  // 10,000 bytes: wraps twice
		if err := o.append(line); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	ring := o.head(t)[:4096]
	if o.off > 4096 || o.off < 100 || ring[o.off-1] != '\n' || !bytes.Equal(ring[o.off-100:o.off], append(line, '\n')) {
		t.Fatalf("after wrapping: next offset %d, want the last append just before it", o.off)
	}
	if fi, err := os.Stat(o.path); err != nil || fi.Size() != boundLogSize {
		t.Fatalf("the file grew: %v %v", fi, err)
	}
	if err := o.append(make([]byte, 4096)); err == nil {
		t.Fatal("an append as large as the ring: nil error")
	}
	if _, err := openBoundLog(o.path); err == nil {
		t.Fatal("openBoundLog over an existing file: nil error")
	}
}

// TestBoundLogBatchLargerThanRing: appends that each fit but together
// exceed the ring fail rather than write past its end.
func TestBoundLogBatchLargerThanRing(t *testing.T) {
	o := openObservedLog(t)
	o.size = 1024
	held, release := o.holdFirstSync()
	first := make(chan error, 1)
	go func() { first <- o.append([]byte("first")) }()
	<-held
	errs := make(chan error, 4)
	for range 4 { // 4 × 600 bytes queue behind the held sync: one batch of 2,404
		go func() { errs <- o.append(bytes.Repeat([]byte("y"), 599)) }()
	}
	time.Sleep(50 * time.Millisecond)
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	for range 4 {
		if err := <-errs; err == nil {
			t.Fatal("an append of a batch larger than the ring succeeded")
		}
	}
	if fi, err := os.Stat(o.path); err != nil || fi.Size() != boundLogSize {
		t.Fatalf("the file changed size: %v %v", fi, err)
	}
}
