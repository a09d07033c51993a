package supervise

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/testutil"
)

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == watchdogArg {
		os.Exit(RunWatchdog(os.Stderr))
	}
	if len(os.Args) > 1 && os.Args[1] == subreaperArg {
		os.Exit(subreaper(os.Stdout))
	}
	testutil.VerifyTestMain(m)
}

// patience bounds every wait for an event in these tests.
const patience = 20 * time.Second

// worker is a running testdata/leaderzombie.c: its main thread has exited,
// a thread goes on writing to ticks.
type worker struct {
	cmd   *exec.Cmd
	proc  Proc
	ticks string
	mark  string // an environment entry of its own
	done  chan struct{}
}

// startWorker builds testdata/leaderzombie.c with the machine's cc and
// starts it with attr, waiting until its main thread has exited and its
// thread has written. The worker is killed at the end of the test.
func startWorker(t *testing.T, attr *syscall.SysProcAttr) *worker {
	t.Helper()
	return startWorkerBy(t, attr, (*exec.Cmd).Start)
}

// startWorkerBy is startWorker, starting the worker's command by start.
func startWorkerBy(t *testing.T, attr *syscall.SysProcAttr, start func(*exec.Cmd) error) *worker {
	t.Helper()
	cc, err := exec.LookPath("cc")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("no C compiler (cc) on PATH: the leader-zombie tests build their worker with it; install gcc")
		}
		t.Skip("no C compiler (cc) on PATH; install gcc to run the leader-zombie tests")
	}
	dir := t.TempDir()
	exe := filepath.Join(dir, "lz")
	out, err := exec.Command(cc, "-O", "-pthread", "-o", exe, "testdata/leaderzombie.c").CombinedOutput()
	require.NoError(t, err, "cc: %s", out)
	w := &worker{ticks: filepath.Join(dir, "ticks"), mark: "SUPERVISE_TEST_MARK=" + t.Name(), done: make(chan struct{})}
	w.cmd = exec.Command(exe, w.ticks, filepath.Join(dir, "pid"))
	w.cmd.Env = append(os.Environ(), w.mark)
	w.cmd.SysProcAttr = attr
	require.NoError(t, start(w.cmd))
	go func() {
		_ = w.cmd.Wait() // Ends once every thread has: how it ended is not the point.
		close(w.done)
	}()
	t.Cleanup(func() {
		_ = w.cmd.Process.Kill() // Gone already when the test passed.
		<-w.done
	})
	var ok bool
	w.proc, ok = Identify(w.cmd.Process.Pid)
	require.True(t, ok)
	deadline := time.Now().Add(patience)
	for {
		st, _ := taskState(fmt.Sprintf("/proc/%d/stat", w.proc.Pid))
		if b, _ := os.ReadFile(w.ticks); st == "Z" && len(b) > 0 {
			return w
		}
		require.True(t, time.Now().Before(deadline), "the worker's main thread did not exit, or its thread did not write, within %s", patience)
		time.Sleep(5 * time.Millisecond) // polling /proc and a file, with a deadline
	}
}

// awaitExit waits until the worker has exited, every thread of it.
func (w *worker) awaitExit(t *testing.T) {
	t.Helper()
	select {
	case <-w.done:
	case <-time.After(patience):
		t.Fatalf("worker %d still runs %s after it was killed", w.proc.Pid, patience)
	}
}

// TestLeaderZombie: a process whose main thread exited while another runs
// reads Z, but is alive, is found among the live descendants and by its
// mark, and takes signals until no thread of it is left.
func TestLeaderZombie(t *testing.T) {
	t.Parallel()
	w := startWorker(t, nil)
	require.True(t, w.proc.Alive(), "a process with a running thread is not alive")
	require.Contains(t, Live(os.Getpid()), w.proc.Pid)
	env, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", w.proc.Pid))
	require.Empty(t, env, "the scene needs an environ that reads empty")
	require.Contains(t, Environ(w.proc.Pid), w.mark)
	require.Contains(t, Marked(w.mark), w.proc)

	w.proc.Signal(syscall.SIGTERM) // ignored by the worker
	require.True(t, w.proc.Alive())
	w.proc.Signal(syscall.SIGKILL)
	w.awaitExit(t)
	require.False(t, w.proc.Alive())
	require.False(t, w.proc.Exists())
}

// TestAliveZombie: a process that has fully exited and is not reaped yet
// is not alive, though it exists.
func TestAliveZombie(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("true")
	require.NoError(t, cmd.Start())
	p, ok := Identify(cmd.Process.Pid)
	require.True(t, ok)
	deadline := time.Now().Add(patience)
	for {
		if st, _ := taskState(fmt.Sprintf("/proc/%d/stat", p.Pid)); st == "Z" {
			break
		}
		require.True(t, time.Now().Before(deadline), "true did not exit within %s", patience)
		time.Sleep(5 * time.Millisecond) // polling /proc, with a deadline
	}
	require.False(t, p.Alive())
	require.True(t, p.Exists())
	require.NoError(t, cmd.Wait())
	require.False(t, p.Exists())
}

// cgroupModes runs test once in each hierarchy tenure run can use here:
// cgroup v2 and the cgroup v1 freezer, each skipped where the host does
// not offer it (failing under CI, which runs as root on a hybrid host).
func cgroupModes(t *testing.T, test func(t *testing.T, v1 bool)) {
	for _, mode := range []struct {
		name string
		v1   bool
	}{{"V2", false}, {"V1Freezer", true}} {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			test(t, mode.v1)
		})
	}
}

// newTestCgroup makes a cgroup for the test in cgroup v2, or in the cgroup
// v1 freezer hierarchy, or skips when the host has none tenure run could
// use (fails under CI, which runs as root on a hybrid host).
func newTestCgroup(t *testing.T, v1 bool) *Cgroup {
	t.Helper()
	p, err := findParent(v1)
	if err == nil && p.v1 != v1 {
		err = errors.New("cgroup v2 is writable, so the v1 freezer is passed over")
	}
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("no cgroup (v1 freezer: %t) on this host: %v; CI runs as root with cgroup v2 and the v1 freezer mounted", v1, err)
		}
		t.Skipf("no cgroup (v1 freezer: %t) on this host: %v", v1, err)
	}
	name := fmt.Sprintf("tenure-test-%d-%s", os.Getpid(), strings.ReplaceAll(t.Name(), "/", "-"))
	cg, err := p.newCgroup(name)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, cg.Remove(patience)) })
	return cg
}

// newCgroupIn makes the cgroup name in cgroup v2, or in the cgroup v1
// freezer hierarchy, as [NewCgroup] does.
func newCgroupIn(v1 bool, name string) (*Cgroup, error) {
	p, err := findParent(v1)
	if err != nil {
		return nil, err
	}
	return p.newCgroup(name)
}

// startInCgroup starts the worker in cg, by [Cgroup.Start].
func startInCgroup(t *testing.T, cg *Cgroup, setsid bool) *worker {
	t.Helper()
	return startWorkerBy(t, &syscall.SysProcAttr{Setsid: setsid}, cg.Start)
}

// TestCgroupKill: a worker cloned into a cgroup is listed, held and
// reported as populating it while its main thread has exited; SIGTERM
// reaches it (and is ignored), Kill ends it, and the emptied cgroup is
// removed.
func TestCgroupKill(t *testing.T) {
	t.Parallel()
	cgroupModes(t, func(t *testing.T, v1 bool) {
		cg := newTestCgroup(t, v1)
		w := startInCgroup(t, cg, true)
		require.Equal(t, []int{w.proc.Pid}, cg.Procs())
		require.True(t, cg.holds(w.proc.Pid))
		require.False(t, cg.holds(os.Getpid()))
		require.True(t, cg.Populated())
		require.Equal(t, 1, cg.Signal(syscall.SIGTERM))
		require.True(t, w.proc.Alive())

		again, ok := OpenCgroup(cg.Dir)
		require.True(t, ok)
		require.Equal(t, *cg, *again, "the watchdog's view of the cgroup differs")
		require.Equal(t, 1, again.Kill())
		w.awaitExit(t)
		require.False(t, cg.Populated())
		require.NoError(t, cg.Remove(patience))
		_, err := os.Stat(cg.Dir)
		require.ErrorIs(t, err, os.ErrNotExist)
		require.False(t, cg.Populated(), "a removed cgroup is empty")
	})
}

// TestKillAllByCgroup: the watchdog's killAll, knowing nothing but the
// cgroup (no group, no root, no mark, nothing seen before), kills a
// setsid'd worker whose main thread has exited.
func TestKillAllByCgroup(t *testing.T) {
	t.Parallel()
	cgroupModes(t, func(t *testing.T, v1 bool) {
		cg := newTestCgroup(t, v1)
		w := startInCgroup(t, cg, true)
		n := killAll(Proc{}, Proc{}, "SUPERVISE_TEST_NO_SUCH_MARK=1", os.Getpid(), map[int]Proc{}, cg)
		require.Positive(t, n)
		w.awaitExit(t)
		require.False(t, cg.Populated())
	})
}

// TestKillAllKnownLeaderZombie: without a cgroup, killAll kills a worker
// it saw earlier (known) whose main thread has exited: it stays a target
// while a thread of it runs.
func TestKillAllKnownLeaderZombie(t *testing.T) {
	t.Parallel()
	w := startWorker(t, &syscall.SysProcAttr{Setsid: true})
	known := map[int]Proc{w.proc.Pid: w.proc}
	killAll(Proc{}, Proc{}, "SUPERVISE_TEST_NO_SUCH_MARK=1", os.Getpid(), known, nil)
	w.awaitExit(t)
}

func TestCgroupMount(t *testing.T) {
	t.Parallel()
	hybrid := `25 1 0:23 / /sys rw,nosuid - sysfs sysfs rw
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
35 31 0:30 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer`
	point, root, ok := cgroupMount(hybrid)
	require.True(t, ok)
	require.Equal(t, "/sys/fs/cgroup/unified", point)
	require.Equal(t, "/", root)

	nsRoot := `30 24 0:26 /user.slice /mnt/my\040cgroups rw - cgroup2 cgroup2 rw,nsdelegate`
	point, root, ok = cgroupMount(nsRoot)
	require.True(t, ok)
	require.Equal(t, "/mnt/my cgroups", point)
	require.Equal(t, "/user.slice", root)

	_, _, ok = cgroupMount(`35 31 0:30 / /sys/fs/cgroup/freezer rw - cgroup cgroup rw,freezer`)
	require.False(t, ok, "cgroup v1 is not v2")
}

func TestUnifiedPath(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want string
		ok   bool
	}{
		{"0::/\n", "/", true},
		{"6:freezer:/\n0::/system.slice/x.service\n", "/system.slice/x.service", true},
		{"6:freezer:/a\n1:cpu:/\n", "", false},
	} {
		got, ok := unifiedPath(tc.in)
		require.Equal(t, tc.ok, ok, tc.in)
		require.Equal(t, tc.want, got, tc.in)
	}
}

// TestNoCgroupEnv: the environment variable forces the fallback. Not
// parallel: it sets the process's environment.
func TestNoCgroupEnv(t *testing.T) {
	t.Setenv(NoCgroupEnv, "1")
	ok, how := Mode()
	require.False(t, ok)
	require.Equal(t, "child subreaper and task scan (no cgroup: "+NoCgroupEnv+" is set)", how)
	_, err := NewCgroup("never")
	require.ErrorContains(t, err, NoCgroupEnv)
}

// TestCgroupLeftBehind: an empty cgroup of the same name, left by a run
// that died with its watchdog, is made anew; a populated one is refused.
func TestCgroupLeftBehind(t *testing.T) {
	t.Parallel()
	cgroupModes(t, func(t *testing.T, v1 bool) {
		cg := newTestCgroup(t, v1)
		name := filepath.Base(cg.Dir)
		again, err := newCgroupIn(v1, name)
		require.NoError(t, err)
		require.Equal(t, cg.Dir, again.Dir)
		w := startInCgroup(t, again, false)
		_, err = newCgroupIn(v1, name)
		require.ErrorIs(t, err, os.ErrExist)
		again.Kill()
		w.awaitExit(t)
		require.Empty(t, again.Procs())
	})
}

func TestVersionAtLeast(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		release string
		want    bool
	}{
		{"6.18.44-fc-v1300", true},
		{"5.14.0-362.el9.x86_64", true},
		{"5.13.19", false},
		{"4.19.0-27-amd64", false},
		{"6.1", true},
		{"6", false},
		{"", false},
	} {
		require.Equal(t, tc.want, versionAtLeast(tc.release, 5, 14), tc.release)
	}
}

// TestCgroupNested: a cgroup the command made below its own (as a
// container runtime would) is covered too: its processes are listed,
// held, killed, and it is removed with the command's.
func TestCgroupNested(t *testing.T) {
	t.Parallel()
	cgroupModes(t, func(t *testing.T, v1 bool) {
		cg := newTestCgroup(t, v1)
		sub := &Cgroup{Dir: filepath.Join(cg.Dir, "inner"), rel: cg.rel + "/inner", v1: v1}
		require.NoError(t, os.Mkdir(sub.Dir, 0o755))
		w := startInCgroup(t, sub, true)
		require.Equal(t, []int{w.proc.Pid}, cg.Procs())
		require.True(t, cg.holds(w.proc.Pid))
		require.True(t, cg.Populated())
		require.Error(t, cg.Remove(0), "a populated cgroup was removed")
		require.Equal(t, 1, cg.Kill())
		w.awaitExit(t)
		require.NoError(t, cg.Remove(patience))
		_, err := os.Stat(cg.Dir)
		require.ErrorIs(t, err, os.ErrNotExist)
	})
}

func TestFreezerMount(t *testing.T) {
	t.Parallel()
	hybrid := `41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
37 31 0:34 /lxc /sys/fs/cgroup/free\040zer rw,relatime - cgroup cgroup rw,freezer`
	point, root, ok := freezerMount(hybrid)
	require.True(t, ok)
	require.Equal(t, "/sys/fs/cgroup/free zer", point)
	require.Equal(t, "/lxc", root)
	point, _, ok = freezerMount(`30 24 0:26 / /sys/fs/cgroup/cpu,freezer rw - cgroup cgroup rw,cpu,freezer,nsdelegate`)
	require.True(t, ok, "a freezer mounted with other controllers")
	require.Equal(t, "/sys/fs/cgroup/cpu,freezer", point)
	_, _, ok = freezerMount(`41 31 0:38 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw
36 31 0:33 / /sys/fs/cgroup/freezerish rw - cgroup cgroup rw,freezerish`)
	require.False(t, ok, "cgroup v2 alone, and a name that is not the freezer")
}

func TestFreezerPath(t *testing.T) {
	t.Parallel()
	p, ok := freezerPath("9:name=systemd:/\n7:blkio:/\n6:cpu,freezer:/a/b\n0::/\n")
	require.True(t, ok)
	require.Equal(t, "/a/b", p)
	_, ok = freezerPath("0::/a\n7:blkio:/\n")
	require.False(t, ok)
}

// TestCgroupV1StartThread: in cgroup v1 the command is forked by a thread
// of this process moved into the cgroup for the fork; once Start
// returned, the command is in the cgroup and no thread of this process
// is.
func TestCgroupV1StartThread(t *testing.T) {
	t.Parallel()
	cg := newTestCgroup(t, true)
	cmd := exec.Command("sleep", "60")
	require.NoError(t, cg.Start(cmd))
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	tasks, err := os.ReadFile(filepath.Join(cg.Dir, "tasks"))
	require.NoError(t, err)
	require.Equal(t, []string{strconv.Itoa(cmd.Process.Pid)}, strings.Fields(string(tasks)))
	for _, task := range readDirNames(t, "/proc/self/task") {
		b, err := os.ReadFile("/proc/self/task/" + task + "/cgroup")
		require.NoError(t, err)
		rel, ok := freezerPath(string(b))
		require.True(t, ok)
		require.NotEqual(t, cg.rel, rel, "thread %s of this process stayed in the command's cgroup", task)
	}
	require.Equal(t, 1, cg.Kill())
	require.Error(t, cmd.Wait(), "sleep was not killed")
	require.False(t, cg.Populated())
	state, err := os.ReadFile(filepath.Join(cg.Dir, "freezer.state"))
	require.NoError(t, err)
	require.Equal(t, "THAWED", strings.TrimSpace(string(state)), "Kill left the cgroup frozen")
}

// readDirNames returns the names in dir.
func readDirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// TestCgroupSpare: Signal and Kill pass over the process named spare (the
// supervisor, seen by its watchdog) and the calling process, even when a
// thread of them is in the cgroup.
func TestCgroupSpare(t *testing.T) {
	t.Parallel()
	cg := newTestCgroup(t, true)
	cmd := exec.Command("sleep", "60")
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	require.NoError(t, os.WriteFile(filepath.Join(cg.Dir, "tasks"), []byte(strconv.Itoa(cmd.Process.Pid)), 0))
	spared := *cg
	spared.spare = cmd.Process.Pid
	require.True(t, cg.holds(cmd.Process.Pid))
	require.Equal(t, 0, spared.Kill())
	require.True(t, cg.Populated())
	require.Equal(t, 1, cg.Kill())
	require.Error(t, cmd.Wait(), "sleep was not killed")
}

// TestNoCgroupV2Env: the environment variable makes tenure run pass over
// cgroup v2 for the cgroup v1 freezer. Not parallel: it sets the
// process's environment.
func TestNoCgroupV2Env(t *testing.T) {
	t.Setenv(NoCgroupV2Env, "1")
	ok, how := Mode()
	if !ok {
		require.Contains(t, how, "cgroup v2 passed over: "+NoCgroupV2Env+" is set; ")
		return
	}
	require.True(t, strings.HasPrefix(how, "cgroup v1 freezer (each command in a freezer cgroup of its own under "), how)
	p, err := cgroupParent()
	require.NoError(t, err)
	require.True(t, p.v1)
}
