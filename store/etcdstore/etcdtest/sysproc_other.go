//go:build !linux

package etcdtest

import (
	"os/exec"
	"syscall"
)

func sysProcAttr() *syscall.SysProcAttr { return nil }

func startProcess(cmd *exec.Cmd) error { return cmd.Start() }
