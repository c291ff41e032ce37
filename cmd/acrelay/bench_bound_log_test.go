package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
)

// TestBoundLogAppends: concurrent appends each return once their bytes
// are in the file, every append exactly once, none torn.
func TestBoundLogAppends(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bound.log")
	l, err := openBoundLog(path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.close()
	if fi, err := os.Stat(path); err != nil || fi.Size() != boundLogSize {
		t.Fatalf("log file: %v %v, want %d preallocated bytes", fi, err, boundLogSize)
	}
	const writers, each = 16, 50 // ≈ 20 KB: the ring does not wrap
	head := func() ([]byte, error) {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		b := make([]byte, 64<<10)
		_, err = f.ReadAt(b, 0)
		return b, err
	}
	var wg sync.WaitGroup
	var want []string
	for w := range writers {
		for i := range each {
			want = append(want, fmt.Sprintf(`{"writer":%d,"n":%d}`, w, i))
		}
		wg.Go(func() {
			for i := range each {
				line := fmt.Sprintf(`{"writer":%d,"n":%d}`, w, i)
				if err := l.append([]byte(line)); err != nil {
					t.Errorf("append %s: %v", line, err)
					return
				}
				// Acknowledged: it must be in the file now.
				b, err := head()
				if err != nil || !bytes.Contains(b, []byte(line+"\n")) {
					t.Errorf("append %s returned before its bytes were in the file (%v)", line, err)
				}
			}
		})
	}
	wg.Wait()
	b, err := head()
	if err != nil {
		t.Fatal(err)
	}
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
}

// TestBoundLogFailureSticks: once a write fails, that append and every
// later one report it; nothing after it is acknowledged.
func TestBoundLogFailureSticks(t *testing.T) {
	l, err := openBoundLog(filepath.Join(t.TempDir(), "bound.log"))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.append([]byte("first")); err != nil {
		t.Fatal(err)
	}
	l.f.Close() // every later write fails
	for i := range 3 {
		if err := l.append([]byte("later")); err == nil {
			t.Fatalf("append %d after the file failed: nil error", i)
		}
	}
	if err := l.append(make([]byte, boundLogSize)); err == nil {
		t.Fatal("an append larger than the ring: nil error")
	}
}
