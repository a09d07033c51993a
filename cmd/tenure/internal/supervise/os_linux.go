package supervise

import (
	"os"
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"
)

// RevokeSignal makes a running tenure run stand down at once, for a
// platform's resume or restore hook (kill -PWR PID).
const RevokeSignal = syscall.SIGPWR

// Supported says whether tenure run can supervise a command on this
// operating system, and if not, why.
func Supported() error { return nil }

// cloneInto makes cmd start straight in the cgroup dir (CLONE_INTO_CGROUP).
func cloneInto(cmd *exec.Cmd, dir *os.File) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.UseCgroupFD = true
	cmd.SysProcAttr.CgroupFD = int(dir.Fd())
	return nil
}

// signalPidfd sends sig to pid through a pidfd, after holds, asked with
// the pidfd open, says pid is still the process meant: a pid reused
// after the read is never signalled.
func signalPidfd(pid int, sig syscall.Signal, holds func(int) bool) bool {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return false // Gone (reaped) since the read.
	}
	defer func() { _ = unix.Close(fd) }() // A pidfd holds nothing to flush.
	return holds(pid) && unix.PidfdSendSignal(fd, sig, nil, 0) == nil
}

func gettid() int { return unix.Gettid() }

func becomeSubreaper() error { return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) }

// ProcAttr is how a command starts: in a process group of its own, killed
// by the kernel when the thread of tenure run that started it dies (Go
// ends threads only with a locked goroutine).
func ProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// OutOfCgroup undoes [Cgroup.Start]'s part of attr, to start the command
// again outside the cgroup.
func OutOfCgroup(attr *syscall.SysProcAttr) { attr.UseCgroupFD, attr.CgroupFD = false, 0 }
