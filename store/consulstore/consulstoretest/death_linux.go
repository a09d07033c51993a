package consulstoretest

import (
	"os/exec"
	"syscall"
)

// setDeathSignal makes the kernel kill cmd's process when the thread that
// starts it exits.
func setDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
