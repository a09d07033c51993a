package redisstoretest

import (
	"os/exec"
	"syscall"
)

// setProcAttr makes the kernel kill the server when the test process dies,
// so that no server outlives a crashed test binary.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
