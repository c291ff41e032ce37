package main

import (
	"os/exec"
	"syscall"
)

// stopWithParent asks the kernel to send the bench's server SIGTERM if
// the bench dies first (killed, or crashed), so that no server outlives
// it (prctl PR_SET_PDEATHSIG).
func stopWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
