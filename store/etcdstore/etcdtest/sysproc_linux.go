package etcdtest

import (
	"os/exec"
	"runtime"
	"syscall"
)

// sysProcAttr makes the kernel kill the server when the thread that
// started it ends, so that a test binary that dies (a panic, a test
// timeout) does not leave servers behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// startProcess starts cmd from a thread locked for the call: the Go
// runtime never ends an unlocked thread, so the parent-death signal fires
// only when the process does.
func startProcess(cmd *exec.Cmd) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return cmd.Start()
}
