// Package supervise keeps the process tree of a command run under a lease
// (tenure run) within the lease's time, on Linux.
//
// What to do and when (kill rules, the watchdog's deadlines, the release,
// the exit code) is decided by [Policy], a pure state machine: events in,
// actions out, no goroutines, clocks or system calls, so that its rules
// are tested without processes. Tenure run's effect loop carries out its
// actions with the mechanisms below.
//
// A process counts as gone only when no thread of it is left: one whose
// main thread exited (pthread_exit, or a runtime whose first thread ends)
// while other threads go on reads as a zombie in /proc/PID/stat and its
// environ reads empty, yet it runs and writes. [Proc.Alive] looks at
// /proc/PID/task, signals go to such a process until its last thread is
// gone, and [Environ] reads a thread's environment when the main thread's
// is gone.
//
// The mechanisms, each a line of its own:
//
//   - A cgroup of the command's own, where the host allows it ([Mode]:
//     cgroup v2 mounted, and this process's cgroup writable: root, or a
//     delegated subtree such as a systemd unit's with Delegate=yes).
//     [NewCgroup] makes it under the supervisor's own cgroup, the command
//     is cloned into it (CLONE_INTO_CGROUP: it never runs outside), and
//     no process of its tree can leave it by setsid, double forks or the
//     exit of its main thread. [Cgroup.Kill] freezes it, writes
//     cgroup.kill and sends SIGKILL to each process it lists (cgroup.kill
//     passes over a process whose main thread has exited, seen on Linux
//     6.18); the tree is gone when the cgroup is empty, and the cgroup is
//     then removed. Where cgroup v2 cannot be used (not mounted, not
//     writable, or [NoCgroupV2Env] set) but the cgroup v1 freezer
//     hierarchy is mounted and writable (root), a freezer cgroup serves
//     the same way: the command is forked into it by a thread of the
//     supervisor moved in for the fork ([Cgroup.Start]), it is killed
//     frozen (SIGKILL to each process in it, then thawed), and it is
//     empty when its tasks file is. Where there is neither (no
//     permission, or [NoCgroupEnv] set) the other mechanisms stand alone.
//   - The supervisor (tenure run) becomes a child subreaper
//     ([BecomeSubreaper]): descendants that lose their parent (background
//     jobs of a shell that exited, daemons that double-forked or left the
//     process group with setsid) are re-parented to it instead of to init,
//     so [Descendants] still finds them and [SignalTree] kills them by pid
//     as well as by process group. The lease is released only once
//     nothing is left.
//   - A watchdog: a separate small process (tenure re-executing itself,
//     [RunWatchdog]) started before the command and fed each kill deadline
//     on CLOCK_MONOTONIC over a pipe ([Dog]). When a deadline passes without
//     a fresh one, or the pipe closes because the supervisor died, it kills
//     the command's cgroup, its process group and every process of the
//     tree it has seen or finds marked ([TreeEnv]), then removes the
//     cgroup. It does not depend on the supervisor being scheduled or
//     alive. It says why in one line, but for a deadline by which the
//     supervisor said it kills the tree itself ([Dog.Stopping]: the lease
//     lost or revoked, leftovers after the command's exit): that kill is
//     the supervisor's decision, which the supervisor reports.
//   - Pdeathsig SIGKILL on the command (set by the caller), for the
//     command itself should both of the above be gone.
//
// What none of this covers: a pause of the whole machine (a VM suspended,
// a snapshot restored) freezes the watchdog and CLOCK_MONOTONIC with
// everything else; only the fence (the token checked by the resource)
// covers that. Without a cgroup, when the supervisor dies, a process the
// watchdog had not seen yet that was re-parented out of the tree and
// cleared its environment is not found. A cgroup left by a supervisor and
// a watchdog that both died is removed by the next run of the same pid,
// when empty.
package supervise

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// BecomeSubreaper makes the calling process a child subreaper
// (prctl PR_SET_CHILD_SUBREAPER): orphaned descendants are re-parented to
// it. It must then reap them; see [Reap].
func BecomeSubreaper() error { return becomeSubreaper() }

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
	if pid <= 0 {
		return nil
	}
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

// Exists reports whether the pid still names p: alive, or a zombie not yet
// reaped.
func (p Proc) Exists() bool {
	_, ok := p.stat()
	return ok
}

// Alive reports whether p is still the same process and some thread of it
// still runs. A process whose main thread exited (pthread_exit) while
// other threads go on reads as a zombie in /proc/PID/stat, yet runs: it
// is alive until no thread but the exited leader is left in
// /proc/PID/task.
func (p Proc) Alive() bool {
	f, ok := p.stat()
	if !ok {
		return false
	}
	if f[0] != "Z" && f[0] != "X" {
		return true
	}
	return p.threadsLeft()
}

// threadsLeft reports whether a thread of p other than its exited leader
// is still running (not a zombie, not dead).
func (p Proc) threadsLeft() bool {
	dir := "/proc/" + strconv.Itoa(p.Pid) + "/task"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, t := range tasks {
		if t.Name() == strconv.Itoa(p.Pid) {
			continue
		}
		if st, ok := taskState(dir + "/" + t.Name() + "/stat"); ok && st != "Z" && st != "X" {
			return true
		}
	}
	return false
}

// taskState returns the state (field 3) of the stat file at path.
func taskState(path string) (string, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return "", false
	}
	f := strings.Fields(s[i+1:])
	if len(f) == 0 {
		return "", false
	}
	return f[0], true
}

// Signal sends sig to p while any thread of it is alive (see [Proc.Alive]):
// a signal to the pid reaches the whole thread group, even when its main
// thread has exited.
func (p Proc) Signal(sig syscall.Signal) {
	if p.Alive() {
		_ = syscall.Kill(p.Pid, sig) // Gone in between: nothing to do.
	}
}

// SignalGroup sends sig to the process group that leader made (its id is
// leader's pid) while that group still exists. A group id is a pid: once
// the group's last member is gone the number may be handed to a new
// process, which can lead a group of its own under it (pids wrap within
// minutes on a busy host), and a signal sent to the number then would hit
// a stranger. So the group is signalled only when no other process holds
// leader's pid and some process in the group started no earlier than the
// leader: a member of the leader's group (orphans included), since a
// stranger's group under the same number can only be made once all of
// those are gone, and then by a process that holds the number itself.
func SignalGroup(leader Proc, sig syscall.Signal) {
	if leader.Pid <= 0 {
		return
	}
	if p, ok := Identify(leader.Pid); ok && p != leader {
		return // The number leads a stranger's process now.
	}
	if groupHasMemberSince(leader.Pid, leader.Start) {
		_ = syscall.Kill(-leader.Pid, sig) // ESRCH: the last member left in between.
	}
}

// groupHasMemberSince reports whether a process in group pgid (field 5 of
// /proc/PID/stat), zombies included, started at or after start.
func groupHasMemberSince(pgid int, start uint64) bool {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return false
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		p, ok := Identify(pid)
		if !ok || p.Start < start {
			continue
		}
		if f, ok := p.stat(); ok && f[2] == strconv.Itoa(pgid) {
			return true
		}
	}
	return false
}

// stat returns the fields of p's /proc/PID/stat after "pid (comm)", while
// the pid still names p (its start time, field 22, matches).
func (p Proc) stat() ([]string, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(p.Pid) + "/stat")
	if err != nil {
		return nil, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return nil, false
	}
	start, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil || start != p.Start {
		return nil, false
	}
	return f, true
}

// SignalTree sends sig to every descendant of root but those under skip
// and to leader's process group (see [SignalGroup]), and returns how many
// descendants it signalled (zombies included: they are reaped by [Reap]).
// The descendants come first: finding them reads the tree's /proc
// entries, while the group's check reads every process's.
func SignalTree(leader Proc, root int, sig syscall.Signal, skip ...int) int {
	n := 0
	for _, pid := range Descendants(root, skip...) {
		if p, ok := Identify(pid); ok {
			n++
			p.Signal(sig)
		}
	}
	SignalGroup(leader, sig)
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

// Live returns the descendants of root that are alive (see [Proc.Alive]:
// a zombie leader whose other threads run counts), leaving out the
// subtrees of skip.
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
