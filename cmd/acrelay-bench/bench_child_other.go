//go:build !linux

package main

import "os/exec"

// stopWithParent does nothing here: only Linux can signal a child when
// its parent dies. An interrupted bench still stops its servers.
func stopWithParent(*exec.Cmd) {}
