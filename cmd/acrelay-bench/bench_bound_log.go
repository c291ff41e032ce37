package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// boundLog is the durable bound's log (http-bound --durable-dir):
// the cheapest way we found to answer 201 only for an event that survives
// a crash of the machine. Appends overwrite a ring in a file of
// preallocated, synced zeros (so a sync has no block allocation or file
// size to persist) with leader-based group commit: the first append that
// finds no commit running leads — it sleeps boundLinger for others to
// join, takes every pending append, writes them with one pwrite(2), makes
// them durable with one fdatasync(2) and wakes exactly the appends of its
// batch; if appends arrived meanwhile, it hands the lead to one of them.
// No index, no transaction, no receipt: a durable relay does more work
// per event. The design is the best of those measured
// (docs/performance.md, "Seventh session"); it is not a proof that no
// commit policy does better.
type boundLog struct {
	mu      sync.Mutex
	size    int64  // the ring's size in bytes
	off     int64  // where the next batch is written
	pending []byte // appends waiting for the next batch, each ending in '\n'
	spare   []byte // the last batch's buffer, reused
	next    *boundBatch
	leading bool  // a leader is committing or about to
	err     error // sticky: after a failed write or sync nothing is acknowledged

	f *os.File
	// write and sync are the file operations (f.WriteAt, fdatasync):
	// tests replace them to observe or fail them.
	write func(b []byte, off int64) error
	sync  func() error
}

// boundBatch is one group commit: done is closed once err is final (nil:
// every append of the batch is on disk); lead passes the lead to one of
// its waiters.
type boundBatch struct {
	done chan struct{}
	lead chan struct{}
	err  error
}

func newBoundBatch() *boundBatch {
	return &boundBatch{done: make(chan struct{}), lead: make(chan struct{}, 1)}
}

const (
	// boundLogSize is the ring's size in bytes; a batch that would cross
	// its end starts at offset 0.
	boundLogSize = 64 << 20
	// boundLinger is what a leader asks time.Sleep for before taking its
	// batch (the kernel's timer slack makes it 100–450 µs under load): the
	// best of 0, 50, 100 and 250 µs at 16 clients, medians of 3–5 rounds.
	boundLinger = 100 * time.Microsecond
)

// openBoundLog creates path (which must not exist: O_EXCL, so no
// symbolic link is followed), fills it with boundLogSize zero bytes and
// syncs it and its directory.
func openBoundLog(path string) (*boundLog, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	zero := make([]byte, 1<<20)
	for off := int64(0); off < boundLogSize && err == nil; off += int64(len(zero)) {
		_, err = f.WriteAt(zero, off)
	}
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = syncDir(filepath.Dir(path))
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("durable bound log: %w", err)
	}
	l := &boundLog{f: f, size: boundLogSize, next: newBoundBatch()}
	l.write = func(b []byte, off int64) error { _, err := f.WriteAt(b, off); return err }
	l.sync = func() error { return fdatasync(f) }
	return l, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// append returns nil once b and every append before it are on disk, or
// the error of the write or sync that failed (for this and every later
// append). b must be shorter than the ring.
func (l *boundLog) append(b []byte) error {
	l.mu.Lock()
	if l.err != nil {
		err := l.err
		l.mu.Unlock()
		return err
	}
	if int64(len(b)) >= l.size {
		l.mu.Unlock()
		return fmt.Errorf("durable bound log: %d bytes do not fit a ring of %d", len(b), l.size)
	}
	l.pending = append(append(l.pending, b...), '\n')
	my := l.next
	lead := !l.leading
	l.leading = true
	l.mu.Unlock()
	if lead {
		l.commit()
	}
	for {
		select {
		case <-my.done:
			return my.err
		case <-my.lead:
			l.commit()
		}
	}
}

// commit makes the pending batch durable, then hands the lead to the
// next batch if it has appends, else gives it up.
func (l *boundLog) commit() {
	time.Sleep(boundLinger)
	l.mu.Lock()
	batch, buf := l.next, l.pending
	l.next, l.pending, l.spare = newBoundBatch(), l.spare[:0], nil
	if l.off+int64(len(buf)) > l.size {
		l.off = 0
	}
	off := l.off
	l.off += int64(len(buf))
	l.mu.Unlock()

	var err error
	if int64(len(buf)) > l.size {
		err = fmt.Errorf("a batch of %d bytes does not fit a ring of %d", len(buf), l.size)
	} else {
		err = l.write(buf, off)
	}
	if err == nil {
		err = l.sync()
	}

	l.mu.Lock()
	l.spare = buf
	if err != nil {
		l.err = fmt.Errorf("durable bound log: %w", err)
		batch.err = l.err
	}
	switch {
	case len(l.pending) == 0:
		l.leading = false
	case l.err != nil:
		// Appends that joined the next batch before the failure are
		// answered with it; later ones see l.err at once.
		l.next.err = l.err
		close(l.next.done)
		l.next, l.pending, l.leading = newBoundBatch(), nil, false
	default:
		l.next.lead <- struct{}{} // one of the next batch's appends leads
	}
	l.mu.Unlock()
	close(batch.done)
}

// close closes the file. Appends still running fail.
func (l *boundLog) close() error { return l.f.Close() }
