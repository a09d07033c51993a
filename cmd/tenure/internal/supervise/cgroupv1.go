package supervise

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// freezeWait bounds how long [Cgroup.killV1] waits for the cgroup to read
// FROZEN: a task in uninterruptible sleep holds it at FREEZING; the
// processes are killed anyway, and the caller's next round looks again.
const freezeWait = time.Second

// freezerMount returns where the cgroup v1 hierarchy with the freezer
// controller is mounted and the hierarchy path it mounts, from mountinfo
// (the freezer among the super options, maybe with other controllers).
func freezerMount(mountinfo string) (point, root string, ok bool) {
	for _, line := range strings.Split(mountinfo, "\n") {
		pre, post, found := strings.Cut(line, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if found && len(f) >= 5 && len(g) >= 3 && g[0] == "cgroup" && slices.Contains(strings.Split(g[2], ","), "freezer") {
			return unescapeMount(f[4]), unescapeMount(f[3]), true
		}
	}
	return "", "", false
}

// freezerPath returns the freezer hierarchy's path in a /proc/PID/cgroup
// text (its "ID:...,freezer,...:PATH" line).
func freezerPath(cgroup string) (string, bool) {
	for _, line := range strings.Split(cgroup, "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) == 3 && slices.Contains(strings.Split(f[1], ","), "freezer") {
			return f[2], true
		}
	}
	return "", false
}

// freezerParent returns the calling process's cgroup v1 freezer cgroup,
// from its mountinfo and /proc/self/cgroup.
func freezerParent(mountinfo, own string) (parent, error) {
	point, root, ok := freezerMount(mountinfo)
	if !ok {
		return parent{}, errors.New("no cgroup v1 freezer hierarchy is mounted")
	}
	rel, ok := freezerPath(own)
	if !ok {
		return parent{}, errors.New("this process is in no cgroup v1 freezer cgroup (no freezer line in /proc/self/cgroup)")
	}
	dir, err := writableParent(point, root, rel, "tasks")
	if err != nil {
		return parent{}, fmt.Errorf("%w (cgroup v1 freezer: run as root)", err)
	}
	return parent{dir: dir, rel: rel, v1: true}, nil
}

// startV1 starts cmd in the cgroup v1 cgroup c with no moment outside it.
// cgroup v1 has no CLONE_INTO_CGROUP, and a process moved in after it
// started would run outside until then; but a child is born in its
// parent thread's cgroup, and in cgroup v1 a single thread can be moved
// (by its TID, to tasks). So one thread of this process, locked to its
// goroutine, moves itself into c, forks the command there, and moves
// itself back to where it was. Go creates no runtime thread from a locked
// one (a template thread does it), so nothing else of this process is
// ever born in c. Should the thread fail to move back, the command is
// killed and the thread ends with its goroutine, never to run anything
// else in c.
func (c *Cgroup) startV1(cmd *exec.Cmd) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		tid := strconv.Itoa(gettid())
		b, err := os.ReadFile("/proc/thread-self/cgroup")
		var back parent
		if err == nil {
			back, err = freezerParent(readMountinfo(), string(b))
		}
		if err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("cannot tell this thread's own cgroup v1 freezer cgroup: %w", err)
			return
		}
		if err := os.WriteFile(filepath.Join(c.Dir, "tasks"), []byte(tid), 0); err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("cannot move a thread into cgroup %s to start the command there: %w", c.Dir, err)
			return
		}
		err = cmd.Start()
		if berr := os.WriteFile(filepath.Join(back.dir, "tasks"), []byte(tid), 0); berr != nil {
			if err == nil {
				_ = cmd.Process.Kill() // The thread stays in c: it ends here, and the command with it.
				_ = cmd.Wait()         // Reaped: its status is not the point.
				err = fmt.Errorf("started the command in cgroup %s but could not move tenure's thread back to %s (%w); the command was killed", c.Dir, back.dir, berr)
			}
			done <- err // Locked still: the thread ends with this goroutine.
			return
		}
		runtime.UnlockOSThread()
		done <- err
	}()
	return <-done
}

// readMountinfo returns /proc/self/mountinfo, or "" when it cannot be read
// (then no hierarchy is found).
func readMountinfo() string {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	return string(b)
}

// killV1 kills every process in the cgroup v1 cgroup: it freezes the
// cgroup (freezer.state FROZEN, which covers the cgroups below it) and
// waits until it reads FROZEN, so that no process forks or leaves in
// between; sends SIGKILL to each process in it; and thaws it, since a
// frozen process does not die. It returns how many processes it
// signalled.
func (c *Cgroup) killV1() int {
	state := filepath.Join(c.Dir, "freezer.state")
	if os.WriteFile(state, []byte("FROZEN"), 0) == nil {
		deadline := time.Now().Add(freezeWait)
		for {
			b, err := os.ReadFile(state)
			if err != nil || strings.TrimSpace(string(b)) == "FROZEN" || time.Now().After(deadline) {
				break
			}
			time.Sleep(time.Millisecond) // cgroup v1 has no event for the freezer's state: polled, with a deadline
		}
	}
	n := c.Signal(syscall.SIGKILL)
	_ = os.WriteFile(state, []byte("THAWED"), 0) // Gone already: nothing to thaw.
	return n
}

// tasksLeft reports whether any task is listed in the tasks file of the
// cgroup v1 cgroup or of a cgroup below it.
func (c *Cgroup) tasksLeft() bool {
	for _, dir := range c.dirs() {
		if b, err := os.ReadFile(filepath.Join(dir, "tasks")); err == nil && len(strings.TrimSpace(string(b))) > 0 {
			return true
		}
	}
	return false
}
