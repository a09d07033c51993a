//go:build !linux

package testserver

import (
	"os/exec"
	"syscall"
)

// sysProcAttr does nothing outside Linux: a server whose test binary
// crashed keeps running until killed by hand.
func sysProcAttr() *syscall.SysProcAttr { return nil }

func startProcess(cmd *exec.Cmd) error { return cmd.Start() }

func kill(cmd *exec.Cmd) { _ = cmd.Process.Kill() }

func signalGroup(cmd *exec.Cmd, sig syscall.Signal) { _ = cmd.Process.Signal(sig) }
