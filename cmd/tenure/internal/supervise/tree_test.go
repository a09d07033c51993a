package supervise

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// family is a running `sh` that started children of its own, and printed
// their pids: the shell, its children and their process group.
type family struct {
	cmd  *exec.Cmd
	sh   Proc
	kids []int
	done chan struct{}
}

// startFamily starts sh -c script with attr; the script prints one pid a
// line, then "ready". The whole family is killed at the end of the test.
func startFamily(t *testing.T, attr *syscall.SysProcAttr, script string) *family {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	cmd.SysProcAttr = attr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	f := &family{cmd: cmd, done: make(chan struct{})}
	t.Cleanup(func() {
		for _, pid := range f.kids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		_ = cmd.Process.Kill()
		<-f.done
	})
	lines := bufio.NewScanner(out)
	for lines.Scan() && lines.Text() != "ready" {
		pid, err := strconv.Atoi(strings.TrimSpace(lines.Text()))
		require.NoError(t, err, "the script printed %q, not a pid", lines.Text())
		f.kids = append(f.kids, pid)
	}
	go func() {
		_ = cmd.Wait() // The family is killed, its status of no interest.
		close(f.done)
	}()
	var ok bool
	f.sh, ok = Identify(cmd.Process.Pid)
	require.True(t, ok)
	return f
}

// awaitGone waits until p no longer runs (see [Proc.Alive]).
func awaitGone(t *testing.T, p Proc) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for p.Alive() {
		require.True(t, time.Now().Before(deadline), "process %d still runs %s after it was killed", p.Pid, patience)
		time.Sleep(5 * time.Millisecond) // polling /proc, with a deadline
	}
}

// awaitSetsid waits until process pid leads a session of its own (field
// 6 of its stat): a shell prints the pid of `setsid CMD &` before setsid
// has run.
func awaitSetsid(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for {
		f, ok := identify(t, pid).stat()
		require.True(t, ok)
		if f[3] == strconv.Itoa(pid) {
			return
		}
		require.True(t, time.Now().Before(deadline), "process %d did not call setsid within %s", pid, patience)
		time.Sleep(5 * time.Millisecond) // polling /proc, with a deadline
	}
}

// parentOf returns the parent of process pid (field 4 of its stat).
func parentOf(t *testing.T, pid int) int {
	t.Helper()
	f, ok := identify(t, pid).stat()
	require.True(t, ok)
	ppid, err := strconv.Atoi(f[1])
	require.NoError(t, err)
	return ppid
}

func identify(t *testing.T, pid int) Proc {
	t.Helper()
	p, ok := Identify(pid)
	require.True(t, ok, "process %d is gone", pid)
	return p
}

// TestChildrenAndDescendants: the children of a shell are its own, the
// descendants reach the grandchildren, and skip leaves a subtree out.
func TestChildrenAndDescendants(t *testing.T) {
	t.Parallel()
	f := startFamily(t, nil, `sleep 60 & echo $!; sh -c 'sleep 60 & echo $!; echo ready; exec sleep 60' & wait`)
	require.Len(t, f.kids, 2)
	sleeper, grandchild := f.kids[0], f.kids[1]
	middle := parentOf(t, grandchild)
	require.ElementsMatch(t, []int{sleeper, middle}, Children(f.sh.Pid))
	require.ElementsMatch(t, []int{grandchild}, Children(middle))
	require.ElementsMatch(t, []int{sleeper, middle, grandchild}, Descendants(f.sh.Pid))
	require.ElementsMatch(t, []int{sleeper}, Descendants(f.sh.Pid, middle))
	require.Contains(t, Descendants(os.Getpid()), grandchild)
	require.Empty(t, Children(grandchild))
}

func TestDescendantsOfNothing(t *testing.T) {
	t.Parallel()
	require.Nil(t, Descendants(0))
	require.Nil(t, Descendants(-1))
	require.Empty(t, Children(noSuchPid(t)))
}

// noSuchPid returns a pid above the kernel's pid_max: no process has it.
func noSuchPid(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/sys/kernel/pid_max")
	require.NoError(t, err)
	max, err := strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err)
	return max + 1
}

// TestIdentify: a process is named by its pid and start time; a pid that
// names nothing, or a start time that is not the process's, is not it.
func TestIdentify(t *testing.T) {
	t.Parallel()
	me := identify(t, os.Getpid())
	require.Equal(t, os.Getpid(), me.Pid)
	require.NotZero(t, me.Start)
	again := identify(t, os.Getpid())
	require.Equal(t, me, again)
	require.True(t, me.Exists())
	require.True(t, me.Alive())
	require.Equal(t, strconv.Itoa(me.Pid)+":"+strconv.FormatUint(me.Start, 10), me.String())

	_, ok := Identify(noSuchPid(t))
	require.False(t, ok)
	stranger := Proc{Pid: me.Pid, Start: me.Start + 1}
	require.False(t, stranger.Exists(), "another start time names another process")
	require.False(t, stranger.Alive())
}

// TestIdentifyOddName: a command name with spaces and parentheses does
// not shift the fields after it.
func TestIdentifyOddName(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	exe := dir + "/a) b (c"
	sleep, err := exec.LookPath("sleep")
	require.NoError(t, err)
	require.NoError(t, os.Symlink(sleep, exe))
	cmd := exec.Command(exe, "60")
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait() // Killed: its status is of no interest.
	})
	p := identify(t, cmd.Process.Pid)
	me := identify(t, os.Getpid())
	require.GreaterOrEqual(t, p.Start, me.Start, "a child starts after its parent")
	require.True(t, p.Alive())
}

// TestStoppedIsAlive: a process stopped by SIGSTOP is alive: it is killed
// like any other.
func TestStoppedIsAlive(t *testing.T) {
	t.Parallel()
	f := startFamily(t, nil, `echo ready; exec sleep 60`)
	f.sh.Signal(syscall.SIGSTOP)
	deadline := time.Now().Add(patience)
	for {
		if st, _ := taskState("/proc/" + strconv.Itoa(f.sh.Pid) + "/stat"); st == "T" {
			break
		}
		require.True(t, time.Now().Before(deadline), "SIGSTOP did not stop %d within %s", f.sh.Pid, patience)
		time.Sleep(5 * time.Millisecond) // polling /proc, with a deadline
	}
	require.True(t, f.sh.Alive())
	f.sh.Signal(syscall.SIGKILL)
	<-f.done
	require.False(t, f.sh.Exists())
}

// TestSignalGoneProc: a Proc whose process was reaped is not signalled,
// though its pid may name another process by now.
func TestSignalGoneProc(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("true")
	require.NoError(t, cmd.Start())
	p := identify(t, cmd.Process.Pid)
	require.NoError(t, cmd.Wait())
	p.Signal(syscall.SIGKILL) // must not reach a stranger
	require.False(t, p.Exists())
	impostor := Proc{Pid: os.Getpid(), Start: identify(t, os.Getpid()).Start + 1}
	impostor.Signal(syscall.SIGKILL) // the test process is not the impostor
	require.True(t, identify(t, os.Getpid()).Alive())
}

// TestSignalGroup: the group's members get the signal, those that left it
// with setsid do not, and the group stays reachable through a member
// that outlived the leader.
func TestSignalGroup(t *testing.T) {
	t.Parallel()
	f := startFamily(t, &syscall.SysProcAttr{Setpgid: true},
		`sleep 60 & echo $!; setsid sleep 60 & echo $!; echo ready; wait`)
	awaitSetsid(t, f.kids[1])
	member, escapee := identify(t, f.kids[0]), identify(t, f.kids[1])
	SignalGroup(f.sh, syscall.SIGCONT) // harmless: every member is running
	require.True(t, member.Alive())

	// The leader exits; its orphan is still in the group.
	f.sh.Signal(syscall.SIGKILL)
	<-f.done
	require.True(t, member.Alive())
	SignalGroup(f.sh, syscall.SIGKILL)
	awaitGone(t, member)
	require.True(t, escapee.Alive(), "setsid left the group")
	escapee.Signal(syscall.SIGKILL)
	awaitGone(t, escapee)
}

// TestSignalGroupStale: a leader given by a start time that is not its
// process's is a stranger's: no signal goes to the group.
func TestSignalGroupStale(t *testing.T) {
	t.Parallel()
	f := startFamily(t, &syscall.SysProcAttr{Setpgid: true}, `sleep 60 & echo $!; echo ready; wait`)
	member := identify(t, f.kids[0])
	SignalGroup(Proc{Pid: f.sh.Pid, Start: f.sh.Start - 1}, syscall.SIGKILL)
	SignalGroup(Proc{}, syscall.SIGKILL)
	require.True(t, f.sh.Alive())
	require.True(t, member.Alive())
}

// TestSignalGroupAfterAllGone: once every member is gone, the group's
// number is not signalled (it may be a stranger's by now).
func TestSignalGroupAfterAllGone(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("true")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, cmd.Start())
	leader := identify(t, cmd.Process.Pid)
	require.NoError(t, cmd.Wait())
	require.False(t, groupHasMemberSince(leader.Pid, leader.Start))
	SignalGroup(leader, syscall.SIGKILL) // nothing to reach, nothing reached
}

// TestSignalTree: every descendant, the ones that left the group by
// setsid included, and the group get the signal; the skipped subtree
// does not.
func TestSignalTree(t *testing.T) {
	t.Parallel()
	f := startFamily(t, &syscall.SysProcAttr{Setpgid: true},
		`sleep 60 & echo $!; setsid sleep 60 & echo $!; sh -c 'sleep 60 & echo $!; echo ready; wait' & wait`)
	require.Len(t, f.kids, 3)
	member, escapee, spared := identify(t, f.kids[0]), identify(t, f.kids[1]), identify(t, f.kids[2])
	sparedParent := identify(t, parentOf(t, spared.Pid))
	n := SignalTree(f.sh, f.sh.Pid, syscall.SIGKILL, sparedParent.Pid)
	require.Equal(t, 2, n, "the member and the escapee, not the skipped subtree")
	<-f.done
	awaitGone(t, member)
	awaitGone(t, escapee)
	// The skipped subtree is in the group: the group's SIGKILL reached it.
	awaitGone(t, sparedParent)
	awaitGone(t, spared)
}

// TestSignalTreeSkipsOutsideGroup: a skipped subtree in a group of its
// own is left alone, as run leaves its watchdog.
func TestSignalTreeSkipsOutsideGroup(t *testing.T) {
	t.Parallel()
	f := startFamily(t, &syscall.SysProcAttr{Setpgid: true},
		`setsid sleep 60 & echo $!; sleep 60 & echo $!; echo ready; wait`)
	awaitSetsid(t, f.kids[0])
	skipped, member := identify(t, f.kids[0]), identify(t, f.kids[1])
	require.Equal(t, 1, SignalTree(f.sh, f.sh.Pid, syscall.SIGKILL, skipped.Pid))
	awaitGone(t, member)
	<-f.done
	require.True(t, skipped.Alive())
}

// TestLive: a zombie is a descendant but not alive; a running child is.
func TestLive(t *testing.T) {
	t.Parallel()
	exited := exec.Command("true")
	require.NoError(t, exited.Start())
	running := startFamily(t, nil, `echo ready; exec sleep 60`)
	zombie := identify(t, exited.Process.Pid)
	deadline := time.Now().Add(patience)
	for zombie.Alive() {
		require.True(t, time.Now().Before(deadline), "true did not exit within %s", patience)
		time.Sleep(5 * time.Millisecond) // polling /proc, with a deadline
	}
	live := Live(os.Getpid())
	require.Contains(t, live, running.sh.Pid)
	require.NotContains(t, live, zombie.Pid)
	require.Contains(t, Descendants(os.Getpid()), zombie.Pid, "a zombie is still a descendant")
	require.NotContains(t, Live(os.Getpid(), running.sh.Pid), running.sh.Pid)
	require.NoError(t, exited.Wait())
}

// TestReap is not parallel: Reap collects every child of the test process
// but those kept, and would take another test's child from its Wait.
//
//nolint:paralleltest // see above
func TestReap(t *testing.T) {
	kept := exec.Command("true")
	require.NoError(t, kept.Start())
	var orphan os.ProcAttr
	p, err := os.StartProcess("/bin/true", []string{"true"}, &orphan)
	require.NoError(t, err)
	zombie := identify(t, p.Pid)
	deadline := time.Now().Add(patience)
	for zombie.Alive() {
		require.True(t, time.Now().Before(deadline), "true did not exit within %s", patience)
		time.Sleep(5 * time.Millisecond) // polling /proc, with a deadline
	}
	require.True(t, zombie.Exists())
	Reap(kept.Process.Pid)
	require.False(t, zombie.Exists(), "Reap left a zombie child")
	require.NoError(t, kept.Wait(), "Reap took a kept child")
	require.NoError(t, p.Release())
}

// TestContains checks the small helper the reaping relies on.
func TestContains(t *testing.T) {
	t.Parallel()
	require.True(t, contains([]int{1, 2, 3}, 2))
	require.False(t, contains([]int{1, 2, 3}, 4))
	require.False(t, contains(nil, 0))
}

// subreaperArg, as the test binary's first argument, makes it run
// [subreaper] instead of the tests.
const subreaperArg = "supervise-test-subreaper"

// subreaper is the test binary as a process that orphans a grandchild
// twice: before it becomes a child subreaper, the orphan goes elsewhere;
// after, it comes to this process, which reaps it once killed. It prints
// what it saw and returns the exit code.
func subreaper(out io.Writer) int {
	orphan := func() int {
		b, err := exec.Command("sh", "-c", "sleep 60 >/dev/null 2>&1 & echo $!").Output()
		if err != nil {
			return 0
		}
		pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		return pid
	}
	before := orphan()
	fmt.Fprintf(out, "before: orphan is a child: %t\n", slices.Contains(Children(os.Getpid()), before))
	_ = syscall.Kill(before, syscall.SIGKILL) // Not ours to reap.
	if err := BecomeSubreaper(); err != nil {
		fmt.Fprintf(out, "BecomeSubreaper: %v\n", err)
		return 1
	}
	after := orphan()
	p, _ := Identify(after)
	fmt.Fprintf(out, "after: orphan is a child: %t\n", slices.Contains(Children(os.Getpid()), after))
	_ = syscall.Kill(after, syscall.SIGKILL)
	for p.Alive() {
		time.Sleep(5 * time.Millisecond) // polling /proc; the test bounds the wait
	}
	fmt.Fprintf(out, "zombie: %t\n", p.Exists())
	Reap()
	fmt.Fprintf(out, "reaped: %t\n", !p.Exists())
	return 0
}

// TestBecomeSubreaper: a child subreaper gets the orphans of its tree, as
// tenure run relies on to find and reap them.
func TestBecomeSubreaper(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(os.Args[0], subreaperArg)
	cmd.WaitDelay = patience
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		require.NoError(t, err, out.String())
	case <-time.After(patience):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("the subreaper helper still runs %s later: %s", patience, out.String())
	}
	require.Equal(t, "before: orphan is a child: false\nafter: orphan is a child: true\nzombie: true\nreaped: true\n", out.String())
}
