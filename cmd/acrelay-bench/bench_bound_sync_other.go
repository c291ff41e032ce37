//go:build !linux

package main

import "os"

// fdatasync makes f durable (fsync(2): the platform has no fdatasync in
// package syscall).
func fdatasync(f *os.File) error { return f.Sync() }
