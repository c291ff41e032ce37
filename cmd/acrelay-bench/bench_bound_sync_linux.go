package main

import (
	"os"
	"syscall"
)

// fdatasync makes f's data durable without its timestamps.
func fdatasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }
