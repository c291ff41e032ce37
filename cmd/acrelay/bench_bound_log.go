package main

import (
	"fmt"
	"os"
	"sync"
	"time"
)

// boundLog is the durable bound's log (bench-http-bound --durable-dir):
// the least a server can do to answer 201 only for an event that
// survives a crash of the machine. Appends overwrite a ring in a file of
// preallocated, synced zeros (so a sync has no block allocation or file
// size to persist) with leader-based group commit: the first append that
// finds no commit running lingers boundLinger for others to join, takes
// every pending append, writes them with one pwrite(2), makes them
// durable with one fdatasync(2), and wakes every append of its batch;
// appends that arrive meanwhile form the next batch. No index, no
// transaction, no receipt: a durable relay does strictly more per event,
// so its ratio to the ceiling can only be lower. The design is the best
// of those measured on the sixth and seventh sessions' machine
// (docs/performance.md, "Seventh session").
type boundLog struct {
	mu      sync.Mutex
	cond    *sync.Cond
	f       *os.File
	off     int64  // where the next batch is written
	pending []byte // appends waiting for the next batch, newline-separated
	gen     uint64 // the batch the next append joins
	durable uint64 // the last batch on disk
	leading bool   // a batch is being written
	err     error  // sticky: after a failed write or sync nothing is acknowledged
}

const (
	// boundLogSize is the ring's size in bytes; a batch that would cross
	// its end starts at offset 0.
	boundLogSize = 64 << 20
	// boundLinger is how long a leader waits for its batch to fill: the
	// best of 0, 50, 100 and 250 µs at 16 clients (medians of 3-5 rounds).
	boundLinger = 100 * time.Microsecond
)

// openBoundLog creates (or truncates) path, fills it with boundLogSize
// zero bytes and syncs it.
func openBoundLog(path string) (*boundLog, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
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
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("durable bound log: %w", err)
	}
	l := &boundLog{f: f, gen: 1}
	l.cond = sync.NewCond(&l.mu)
	return l, nil
}

// append returns nil once b (at most boundLogSize-1 bytes) and every
// append before it are on disk, or the error of the write or sync that
// failed, for this and every later append.
func (l *boundLog) append(b []byte) error {
	if len(b) >= boundLogSize {
		return fmt.Errorf("durable bound log: %d bytes do not fit", len(b))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pending = append(append(l.pending, b...), '\n')
	my := l.gen
	for l.durable < my && l.err == nil {
		if l.leading {
			l.cond.Wait()
			continue
		}
		l.leading = true
		l.mu.Unlock()
		time.Sleep(boundLinger)
		l.mu.Lock()
		buf, gen := l.pending, l.gen
		l.pending = nil
		l.gen++
		if l.off+int64(len(buf)) > boundLogSize {
			l.off = 0
		}
		off := l.off
		l.off += int64(len(buf))
		l.mu.Unlock()
		_, err := l.f.WriteAt(buf, off)
		if err == nil {
			err = fdatasync(l.f)
		}
		l.mu.Lock()
		l.leading = false
		if err != nil {
			l.err = fmt.Errorf("durable bound log: %w", err)
		} else {
			l.durable = gen
		}
		l.cond.Broadcast()
	}
	return l.err
}

// close closes the file; appends must have returned.
func (l *boundLog) close() error { return l.f.Close() }
