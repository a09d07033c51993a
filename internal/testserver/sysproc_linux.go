package testserver

import (
	"os/exec"
	"runtime"
	"syscall"
)

// sysProcAttr puts the server in a process group of its own, so that
// [kill] ends it with every child it started, and makes the kernel kill it
// when the thread that started it ends ([startProcess] keeps that thread
// alive as long as the test binary), so that a test binary that dies (a
// panic, a test timeout) leaves no server behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// startProcess starts cmd from a thread locked for the call: the Go
// runtime never ends an unlocked thread, so the parent-death signal fires
// only when the test binary does.
func startProcess(cmd *exec.Cmd) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return cmd.Start()
}

// kill sends SIGKILL to cmd's process group.
func kill(cmd *exec.Cmd) {
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil {
		_ = cmd.Process.Kill() // The group is gone; the process may be too.
	}
}

// signalGroup sends sig to cmd's process group.
func signalGroup(cmd *exec.Cmd, sig syscall.Signal) {
	if err := syscall.Kill(-cmd.Process.Pid, sig); err != nil {
		_ = cmd.Process.Signal(sig)
	}
}
