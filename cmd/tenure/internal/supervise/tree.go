// Package supervise keeps the process tree of a command run under a lease
// (tenure run) within the lease's time, on Linux.
//
// Three mechanisms, each a line of its own:
//
//   - The supervisor (tenure run) becomes a child subreaper
//     ([BecomeSubreaper]): descendants that lose their parent (background
//     jobs of a shell that exited, daemons that double-forked or left the
//     process group with setsid) are re-parented to it instead of to init,
//     so [Descendants] still finds them and [Sweep] kills them by pid as
//     well as by process group. The lease is released only once nothing is
//     left.
//   - A watchdog: a separate small process (tenure re-executing itself,
//     [RunWatchdog]) started before the command and fed each kill deadline
//     on CLOCK_MONOTONIC over a pipe ([Dog]). When a deadline passes without
//     a fresh one, or the pipe closes because the supervisor died, it kills
//     the command's process group and every process of the tree it has
//     seen. It does not depend on the supervisor being scheduled or alive.
//   - Pdeathsig SIGKILL on the command (set by the caller), for the
//     command itself should both of the above be gone.
//
// What none of this covers: a pause of the whole machine (a VM suspended,
// a snapshot restored) freezes the watchdog and CLOCK_MONOTONIC with
// everything else; only the fence (the token checked by the resource)
// covers that. cgroup v2 is not used.
package supervise

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// BecomeSubreaper makes the calling process a child subreaper
// (prctl PR_SET_CHILD_SUBREAPER): orphaned descendants are re-parented to
// it. It must then reap them; see [Reap].
func BecomeSubreaper() error {
	return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
}

// Children returns the children of pid, read from
// /proc/PID/task/*/children (every thread's, since a child belongs to the
// thread that forked it).
func Children(pid int) []int {
	tasks, _ := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/children")
	var kids []int
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(f); err == nil {
				kids = append(kids, n)
			}
		}
	}
	return kids
}

// Descendants returns every descendant of pid, leaving out the subtrees
// of the pids in skip.
func Descendants(pid int, skip ...int) []int {
	var out []int
	seen := map[int]bool{pid: true}
	for _, s := range skip {
		seen[s] = true
	}
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range Children(p) {
			if seen[c] {
				continue
			}
			seen[c] = true
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// Proc names one process for as long as it lives: its pid and its start
// time (field 22 of /proc/PID/stat), so a reused pid is not mistaken for
// it.
type Proc struct {
	Pid   int
	Start uint64
}

// Identify returns pid's Proc, or false when it is gone.
func Identify(pid int) (Proc, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return Proc{}, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return Proc{}, false
	}
	// After "pid (comm)": state is field 3, starttime field 22.
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return Proc{}, false
	}
	start, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return Proc{}, false
	}
	return Proc{Pid: pid, Start: start}, true
}

// Alive reports whether p is still the same, unreaped, non-zombie process.
func (p Proc) Alive() bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(p.Pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 || f[0] == "Z" || f[0] == "X" {
		return false
	}
	start, err := strconv.ParseUint(f[19], 10, 64)
	return err == nil && start == p.Start
}

// Signal sends sig to p if it is still the same process.
func (p Proc) Signal(sig syscall.Signal) {
	if p.Alive() {
		_ = syscall.Kill(p.Pid, sig) // Gone in between: nothing to do.
	}
}

// SignalTree sends sig to the process group pgid and to every descendant
// of root but those under skip, and returns how many descendants it
// signalled (zombies included: they are reaped by [Reap]).
func SignalTree(pgid, root int, sig syscall.Signal, skip ...int) int {
	if pgid > 0 {
		_ = syscall.Kill(-pgid, sig) // ESRCH: the group is empty.
	}
	n := 0
	for _, pid := range Descendants(root, skip...) {
		if p, ok := Identify(pid); ok {
			n++
			p.Signal(sig)
		}
	}
	return n
}

// Reap collects the exit status of every child of the calling process
// except those in keep (the ones os/exec waits for itself), so orphans
// re-parented to a subreaper do not stay zombies.
func Reap(keep ...int) {
	for _, pid := range Children(os.Getpid()) {
		if contains(keep, pid) {
			continue
		}
		var ws syscall.WaitStatus
		for {
			_, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
			if !errors.Is(err, syscall.EINTR) {
				break
			}
		}
	}
}

// Live returns the descendants of root that are running or stopped (not
// zombies), leaving out the subtrees of skip.
func Live(root int, skip ...int) []int {
	var live []int
	for _, pid := range Descendants(root, skip...) {
		if p, ok := Identify(pid); ok && p.Alive() {
			live = append(live, pid)
		}
	}
	return live
}

func contains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
