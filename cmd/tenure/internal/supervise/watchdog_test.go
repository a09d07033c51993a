package supervise

import (
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The watchdog tests run the test binary as the watchdog (watchdogArg,
// see TestMain), supervised by the test process. They are not parallel:
// a watchdog that fires kills every process carrying its supervisor's
// mark (TreeEnv), which is the test process's for all of them. Each names
// its family's shell as the root of the tree (Dog.Root), so that a firing
// watchdog never takes the test process's other children for the
// command's tree.

// watchdogArg, as the test binary's first argument, makes it run
// [RunWatchdog] instead of the tests.
const watchdogArg = "supervise-test-watchdog"

// testDog is a watchdog started by the test, with what it wrote.
type testDog struct {
	*Dog
	stderr *bytes.Buffer
}

// startTestDog starts a watchdog for the family f (nil: no command yet)
// and the cgroup cg (nil: none). The watchdog is disarmed at the end of
// the test unless it exited before.
func startTestDog(t *testing.T, f *family, cg *Cgroup) *testDog {
	t.Helper()
	var stderr bytes.Buffer
	d, err := StartDog(os.Args[0], []string{watchdogArg}, cg, &stderr)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = d.Disarm() }) // Fired or disarmed already: nothing to undo.
	if f != nil {
		require.NoError(t, d.Root(f.sh.Pid))
		require.NoError(t, d.Group(f.sh))
	}
	return &testDog{Dog: d, stderr: &stderr}
}

// said returns what the watchdog wrote, once it has exited.
func (d *testDog) said(t *testing.T) string {
	t.Helper()
	select {
	case <-d.exited:
	case <-time.After(patience):
		t.Fatalf("the watchdog still runs %s later", patience)
	}
	return d.stderr.String()
}

// group starts a family in a process group of its own: the shell, a
// member of its group and a setsid escapee.
func group(t *testing.T) (f *family, member, escapee Proc) {
	t.Helper()
	f = startFamily(t, &syscall.SysProcAttr{Setpgid: true}, `sleep 60 & echo $!; setsid sleep 60 & echo $!; echo ready; wait`)
	awaitSetsid(t, f.kids[1])
	return f, identify(t, f.kids[0]), identify(t, f.kids[1])
}

// TestWatchdogKillsAtDeadline: a deadline that passes without a fresh one
// kills the command's group and every process of its tree, and the
// watchdog says why and exits ExitFired.
//
//nolint:paralleltest // see the file's comment
func TestWatchdogKillsAtDeadline(t *testing.T) {
	f, member, escapee := group(t)
	d := startTestDog(t, f, nil)
	require.NoError(t, d.Deadline(Now()+int64(50*time.Millisecond)))
	require.True(t, d.Fired(patience), "the watchdog did not fire")
	// The group's SIGKILL may take the shell and its member before they
	// are counted one by one: between 1 and 3.
	require.Regexp(t, `^tenure: watchdog: the kill deadline passed without a renewal from tenure \(tenure stopped answering: stopped, or not scheduled\); killed the command's process group and [1-3] processes of its tree\n$`, d.said(t))
	<-f.done
	awaitGone(t, member)
	awaitGone(t, escapee)
	fired, err := d.Disarm()
	require.True(t, fired)
	require.NoError(t, err)
}

// TestWatchdogStoppingIsQuiet: at a deadline by which tenure said it kills
// the tree itself (Dog.Stopping), the watchdog kills it as a backstop and
// says nothing: tenure reports its own decision.
//
//nolint:paralleltest // see the file's comment
func TestWatchdogStoppingIsQuiet(t *testing.T) {
	f, member, escapee := group(t)
	d := startTestDog(t, f, nil)
	require.NoError(t, d.Deadline(Now()+int64(time.Hour)))
	at := Now() + int64(50*time.Millisecond)
	require.Equal(t, at, d.Stopping(at))
	require.True(t, d.Fired(patience))
	require.Empty(t, d.said(t))
	<-f.done
	awaitGone(t, member)
	awaitGone(t, escapee)
}

// TestWatchdogFreshDeadlineQuietsStopping: a renewal's deadline after
// Stopping makes the deadline a renewal's again, and its passing is
// reported.
//
//nolint:paralleltest // see the file's comment
func TestWatchdogFreshDeadlineQuietsStopping(t *testing.T) {
	f, _, escapee := group(t)
	d := startTestDog(t, f, nil)
	d.Stopping(Now() + int64(time.Hour))
	require.NoError(t, d.Deadline(Now()+int64(50*time.Millisecond)))
	require.True(t, d.Fired(patience))
	require.Contains(t, d.said(t), "the kill deadline passed without a renewal from tenure")
	awaitGone(t, escapee)
}

// TestWatchdogSupervisorGone: when the pipe closes without a disarm (the
// supervisor died: the kernel closes its end), the watchdog kills the
// tree at once.
//
//nolint:paralleltest // see the file's comment
func TestWatchdogSupervisorGone(t *testing.T) {
	f, member, escapee := group(t)
	d := startTestDog(t, f, nil)
	require.NoError(t, d.Deadline(Now()+int64(time.Hour)))
	d.mu.Lock()
	require.NoError(t, d.w.Close())
	d.mu.Unlock()
	require.True(t, d.Fired(patience))
	require.Contains(t, d.said(t), "tenure: watchdog: tenure exited without stopping its command; killed the command's process group and ")
	<-f.done
	awaitGone(t, member)
	awaitGone(t, escapee)
}

// TestWatchdogDisarm: a disarmed watchdog exits without killing anything.
//
//nolint:paralleltest // see the file's comment
func TestWatchdogDisarm(t *testing.T) {
	f, member, escapee := group(t)
	d := startTestDog(t, f, nil)
	require.NoError(t, d.Deadline(Now()+int64(time.Hour)))
	fired, err := d.Disarm()
	require.False(t, fired)
	require.NoError(t, err)
	require.Empty(t, d.said(t))
	require.True(t, f.sh.Alive())
	require.True(t, member.Alive())
	require.True(t, escapee.Alive())
}

// TestWatchdogLaterDeadlineWins: a fresh deadline replaces the one
// before, even an earlier one.
//
//nolint:paralleltest // see the file's comment
func TestWatchdogLaterDeadlineWins(t *testing.T) {
	f, member, _ := group(t)
	d := startTestDog(t, f, nil)
	// The first deadline leaves the watchdog time to read the second
	// before it passes, even on a loaded host.
	first := Now() + int64(500*time.Millisecond)
	require.NoError(t, d.Deadline(first))
	require.NoError(t, d.Deadline(Now()+int64(time.Hour)))
	// Not firing is shown by not firing well past the first deadline.
	require.False(t, d.Fired(2*time.Second), "the watchdog fired at the replaced deadline")
	require.Greater(t, Now(), first)
	fired, err := d.Disarm()
	require.False(t, fired)
	require.NoError(t, err)
	require.True(t, member.Alive())
}

// TestDogStoppingOnlyEarlier: Stopping moves the deadline in force earlier,
// never later, and returns it.
//
//nolint:paralleltest // see the file's comment
func TestDogStoppingOnlyEarlier(t *testing.T) {
	d := startTestDog(t, nil, nil)
	now := Now()
	require.NoError(t, d.Deadline(now+int64(time.Hour)))
	require.Equal(t, now+int64(time.Hour), d.Stopping(now+int64(2*time.Hour)))
	require.Equal(t, now+int64(30*time.Minute), d.Stopping(now+int64(30*time.Minute)))
	require.Equal(t, now+int64(30*time.Minute), d.Stopping(now+int64(45*time.Minute)))
	fired, err := d.Disarm()
	require.False(t, fired)
	require.NoError(t, err)
}

// TestWatchdogNoCommand: a watchdog whose supervisor never started a
// command kills nothing of the supervisor's tree when its pipe closes.
//
//nolint:paralleltest // see the file's comment
func TestWatchdogNoCommand(t *testing.T) {
	f, member, _ := group(t)
	d := startTestDog(t, nil, nil)
	d.mu.Lock()
	require.NoError(t, d.w.Close())
	d.mu.Unlock()
	require.True(t, d.Fired(patience))
	require.Contains(t, d.said(t), "killed the command's process group and 0 processes of its tree")
	require.True(t, f.sh.Alive(), "the supervisor's other children are not the command's")
	require.True(t, member.Alive())
}

// TestWatchdogKillsMarked: a process of the tree that left it (setsid,
// re-parented elsewhere) before the watchdog saw it is found by its mark
// (TreeEnv).
//
//nolint:paralleltest // see the file's comment
func TestWatchdogKillsMarked(t *testing.T) {
	f, _, _ := group(t)
	mark, err := TreeMark()
	require.NoError(t, err)
	me := identify(t, os.Getpid())
	require.Equal(t, TreeEnv+"="+me.String(), mark)
	stray := exec.Command("sleep", "60")
	stray.Env = append(os.Environ(), mark)
	stray.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	require.NoError(t, stray.Start())
	var strayErr error
	strayDone := make(chan struct{})
	go func() {
		strayErr = stray.Wait()
		close(strayDone)
	}()
	t.Cleanup(func() {
		_ = stray.Process.Kill()
		<-strayDone
	})
	require.Contains(t, Marked(mark), identify(t, stray.Process.Pid))

	d := startTestDog(t, f, nil)
	require.NoError(t, d.Deadline(Now()))
	require.True(t, d.Fired(patience))
	select {
	case <-strayDone:
	case <-time.After(patience):
		t.Fatalf("the marked process still runs %s after the watchdog fired", patience)
	}
	var ee *exec.ExitError
	require.ErrorAs(t, strayErr, &ee)
	require.Equal(t, syscall.SIGKILL, ee.Sys().(syscall.WaitStatus).Signal())
	require.Contains(t, d.said(t), "killed the command's process group and ")
}

// TestWatchdogCgroup: a watchdog given the command's cgroup kills what is
// in it at the deadline, and removes it.
//
//nolint:paralleltest // see the file's comment
func TestWatchdogCgroup(t *testing.T) {
	cgroupModes(t, func(t *testing.T, v1 bool) {
		cg := newTestCgroup(t, v1)
		w := startInCgroup(t, cg, true)
		f := startFamily(t, &syscall.SysProcAttr{Setpgid: true}, `echo ready; exec sleep 60`)
		d := startTestDog(t, f, cg)
		require.NoError(t, d.Deadline(Now()))
		require.True(t, d.Fired(patience))
		require.Contains(t, d.said(t), "killed the command's cgroup, its process group and ")
		w.awaitExit(t)
		<-f.done
		_, err := os.Stat(cg.Dir)
		require.ErrorIs(t, err, os.ErrNotExist, "the watchdog left the cgroup")
	})
}

// TestRunWatchdogRefuses: a watchdog started by hand, without its
// supervisor's name or with a cgroup that is none, says so and exits 2.
//
//nolint:paralleltest // see the file's comment
func TestRunWatchdogRefuses(t *testing.T) {
	for _, tt := range []struct {
		name string
		env  []string
		want string
	}{
		{"NoSupervisor", nil, supervisorEnv + `="" does not name the supervisor as PID:STARTTIME; the watchdog is started by tenure run, not by hand`},
		{"BadSupervisor", []string{supervisorEnv + "=12"}, supervisorEnv + `="12" does not name the supervisor`},
		{"NotACgroup", []string{supervisorEnv + "=1:1", cgroupEnv + "=/tmp"}, cgroupEnv + `="/tmp" is under neither the cgroup v2 mount nor the cgroup v1 freezer's`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], watchdogArg)
			cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, tt.env...)
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			require.ErrorAs(t, err, &ee)
			require.Equal(t, 2, ee.ExitCode())
			require.Contains(t, string(out), "tenure: watchdog: "+tt.want)
		})
	}
}

func TestParseSupervisor(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in   string
		want Proc
		ok   bool
	}{
		{"123:456", Proc{Pid: 123, Start: 456}, true},
		{"1:0", Proc{Pid: 1}, true},
		{"", Proc{}, false},
		{"123", Proc{}, false},
		{"0:5", Proc{}, false},
		{"-1:5", Proc{}, false},
		{"x:5", Proc{}, false},
		{"5:x", Proc{}, false},
		{"5:-1", Proc{}, false},
	} {
		p, err := parseSupervisor(tt.in)
		if !tt.ok {
			require.Error(t, err, tt.in)
			require.Contains(t, err.Error(), "the watchdog is started by tenure run, not by hand")
			continue
		}
		require.NoError(t, err, tt.in)
		require.Equal(t, tt.want, p)
		require.Equal(t, tt.in, p.String())
	}
}

// TestEnviron: a process's environment is read from /proc; a gone
// process has none.
func TestEnviron(t *testing.T) {
	t.Parallel()
	f := startFamily(t, nil, `echo ready; exec sleep 60`)
	require.Contains(t, Environ(f.sh.Pid), "PATH="+os.Getenv("PATH"))
	require.Nil(t, Environ(noSuchPid(t)))
	require.Empty(t, Marked("SUPERVISE_TEST_NO_SUCH_MARK="+strconv.Itoa(os.Getpid())))
}

// TestNow: CLOCK_MONOTONIC goes forward.
func TestNow(t *testing.T) {
	t.Parallel()
	a := Now()
	require.Positive(t, a)
	require.GreaterOrEqual(t, Now(), a)
}
