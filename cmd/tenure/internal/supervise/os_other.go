//go:build !linux

package supervise

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"syscall"
)

// RevokeSignal makes a running tenure run stand down at once, for a
// platform's resume or restore hook. Only Linux has SIGPWR; tenure run
// does not run elsewhere, and this signal only names one.
const RevokeSignal = syscall.SIGUSR2

// errUnsupported is what supervision says where it cannot run.
var errUnsupported = fmt.Errorf("tenure run supervises a command through Linux's /proc, child subreaper and cgroups, which %s does not have: run it on Linux, or use the library (tenure.Client.Do) in the program itself", runtime.GOOS)

// Supported says whether tenure run can supervise a command on this
// operating system, and if not, why.
func Supported() error { return errUnsupported }

func cloneInto(*exec.Cmd, *os.File) error { return errUnsupported }

func signalPidfd(int, syscall.Signal, func(int) bool) bool { return false }

func gettid() int { return 0 }

func becomeSubreaper() error { return errUnsupported }

// ProcAttr is how a command starts: in a process group of its own.
func ProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// OutOfCgroup does nothing: there are no cgroups here.
func OutOfCgroup(*syscall.SysProcAttr) {}
