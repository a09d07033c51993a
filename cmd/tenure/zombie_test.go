package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/cmd/tenure/internal/cli"
	"github.com/tenure-dev/tenure/cmd/tenure/internal/supervise"
)

// leaderZombieSource is a worker whose main thread exits (pthread_exit)
// while a thread writes; see the file.
const leaderZombieSource = "internal/supervise/testdata/leaderzombie.c"

// buildLeaderZombie compiles leaderZombieSource with the machine's cc.
func buildLeaderZombie(t *testing.T) string {
	t.Helper()
	cc, err := exec.LookPath("cc")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("no C compiler (cc) on PATH: the leader-zombie tests build their worker with it; install gcc")
		}
		t.Skip("no C compiler (cc) on PATH; install gcc to run the leader-zombie tests")
	}
	exe := filepath.Join(t.TempDir(), "lz")
	out, err := exec.Command(cc, "-O", "-pthread", "-o", exe, leaderZombieSource).CombinedOutput()
	require.NoError(t, err, "cc: %s", out)
	return exe
}

// threadsRun reports whether process p is still itself and any thread of
// it is neither a zombie nor dead, read from /proc/PID/task on its own
// (not through the supervise package under test).
func threadsRun(p supervise.Proc) bool {
	if q, ok := supervise.Identify(p.Pid); !ok || q != p {
		return false
	}
	tasks, _ := filepath.Glob("/proc/" + strconv.Itoa(p.Pid) + "/task/*/stat")
	for _, task := range tasks {
		b, err := os.ReadFile(task)
		if err != nil {
			continue
		}
		if i := strings.LastIndexByte(string(b), ')'); i >= 0 && i+2 < len(b) && b[i+2] != 'Z' && b[i+2] != 'X' {
			return true
		}
	}
	return false
}

// leaderZombie starts the scene's worker bookkeeping: where it ticks, where
// it writes its pid, and a cleanup that kills and reaps it if the test
// left it running (it may have been re-parented to this test binary).
type leaderZombie struct {
	exe, ticks, pidFile string
}

func newLeaderZombie(t *testing.T) *leaderZombie {
	t.Helper()
	dir := t.TempDir()
	z := &leaderZombie{exe: buildLeaderZombie(t), ticks: filepath.Join(dir, "ticks"), pidFile: filepath.Join(dir, "pid")}
	t.Cleanup(func() {
		b, err := os.ReadFile(z.pidFile)
		if err != nil {
			return
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			return
		}
		_ = syscall.Kill(pid, syscall.SIGKILL) // only if the test failed and left it running
		var ws syscall.WaitStatus
		_, _ = syscall.Wait4(pid, &ws, syscall.WNOHANG, nil) // ECHILD: reaped elsewhere
	})
	return z
}

// proc returns the worker as a Proc, once it has written its pid.
func (z *leaderZombie) proc(t *testing.T) supervise.Proc {
	t.Helper()
	b, err := os.ReadFile(z.pidFile)
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err)
	p, ok := supervise.Identify(pid)
	require.True(t, ok, "the worker %d is gone already", pid)
	return p
}

// supervision is a mode of supervision a scene runs under.
type supervision int

const (
	cgroupV2 supervision = iota // a cgroup v2 of the command's own
	cgroupV1                    // a cgroup v1 freezer cgroup of its own (cgroup v2 passed over)
	taskScan                    // child subreaper and task scan, no cgroup
)

// env is the command environment of the scene: where the worker is, and
// which supervision run must use.
func (z *leaderZombie) env(mode supervision) []string {
	env := []string{"LZ=" + z.exe, "TICKS=" + z.ticks, "LZPID=" + z.pidFile}
	switch mode {
	case cgroupV1:
		env = append(env, supervise.NoCgroupV2Env+"=1")
	case taskScan:
		env = append(env, supervise.NoCgroupEnv+"=1")
	}
	return env
}

// supervisionModes runs scene once under each supervision mode: the
// cgroup v2 and the cgroup v1 freezer (where this host offers them) and
// the subreaper with the task scan.
func supervisionModes(t *testing.T, scene func(t *testing.T, mode supervision)) {
	t.Run("Cgroup", func(t *testing.T) {
		t.Parallel()
		if ok, why := supervise.Mode(); !ok {
			if os.Getenv("CI") != "" {
				t.Fatalf("tenure run has no cgroup on this host: %s; CI runs as root with cgroup v2", why)
			}
			t.Skipf("tenure run has no cgroup on this host: %s", why)
		}
		scene(t, cgroupV2)
	})
	t.Run("CgroupV1", func(t *testing.T) {
		t.Parallel()
		if !freezerMounted() {
			if os.Getenv("CI") != "" {
				t.Fatal("no cgroup v1 freezer hierarchy is mounted on this host; CI runs as root on a host with the v1 freezer mounted beside cgroup v2")
			}
			t.Skip("no cgroup v1 freezer hierarchy is mounted on this host")
		}
		scene(t, cgroupV1)
	})
	t.Run("TaskScan", func(t *testing.T) {
		t.Parallel()
		scene(t, taskScan)
	})
}

// freezerMounted reports whether a cgroup v1 hierarchy with the freezer
// is mounted here (and this process, root, can use it).
func freezerMounted() bool {
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil || os.Geteuid() != 0 {
		return false
	}
	return regexp.MustCompile(`(?m) - cgroup \S+ (\S+,)?freezer(,\S+)?$`).Match(mi)
}

// inRunCgroup checks that every running thread of the worker is in the
// cgroup of run a, in the hierarchy of mode, by /proc/PID/task/TID/cgroup
// (its exited main thread reads as in the root cgroup in cgroup v1).
func inRunCgroup(t *testing.T, worker supervise.Proc, a *proc, mode supervision) {
	t.Helper()
	line := map[supervision]string{cgroupV2: `(?m)^0::`, cgroupV1: `(?m)^\d+:([^:]*,)?freezer(,[^:]*)?:`}[mode]
	if line == "" {
		return
	}
	tasks, _ := filepath.Glob("/proc/" + strconv.Itoa(worker.Pid) + "/task/*")
	running := 0
	for _, task := range tasks {
		stat, err := os.ReadFile(task + "/stat")
		if i := strings.LastIndexByte(string(stat), ')'); err != nil || i < 0 || i+2 >= len(stat) || stat[i+2] == 'Z' || stat[i+2] == 'X' {
			continue
		}
		b, err := os.ReadFile(task + "/cgroup")
		require.NoError(t, err)
		require.Regexp(t, line+`.*/tenure-run-`+strconv.Itoa(a.cmd.Process.Pid)+`$`, string(b), "the worker is not in run's cgroup (%s)", task)
		running++
	}
	require.Positive(t, running, "the worker %d has no thread running", worker.Pid)
}

// trackedBy checks, from run's -v log, which supervision was in force,
// and returns the directory under which run made its cgroup, if any.
func trackedBy(t *testing.T, p *proc, mode supervision) string {
	t.Helper()
	switch mode {
	case taskScan:
		require.Contains(t, p.stderr.all(), `tracked_by="child subreaper and task scan`)
		return ""
	case cgroupV1:
		return p.stderr.await(`tracked_by="cgroup v1 freezer \(each command in a freezer cgroup of its own under ([^,]+),`)[1]
	}
	return p.stderr.await(`tracked_by="cgroup v2 \(each command in a cgroup of its own under ([^,]+),`)[1]
}

// TestRunLeaderZombieInBackground: the command starts a worker whose main
// thread exits while a thread writes, in the background, and exits 0 at
// once. tenure run must see the worker as alive: it kills it (SIGTERM is
// ignored: SIGKILL after the grace) before it releases, so no write of it
// lands after the next holder (--wait) started, and none of it is left.
func TestRunLeaderZombieInBackground(t *testing.T) {
	t.Parallel()
	supervisionModes(t, func(t *testing.T, mode supervision) {
		z := newLeaderZombie(t)
		env := sqliteStore(t).env(t, z.env(mode)...)
		sh := `"$LZ" "$TICKS" "$LZPID" &
while [ ! -s "$TICKS" ]; do sleep 0.01; done
echo "started $TENURE_HOLDER $TENURE_TOKEN"
exit 0`
		flags := []string{"run", "--name", "nightly", "--ttl", "3s"}
		a := start(t, env, append([]string{"-v"}, append(flags, "--label", "a", "--", "sh", "-c", sh)...)...)
		a.stdout.await(startedLine)
		worker := z.proc(t)
		inRunCgroup(t, worker, a, mode)
		b := start(t, env, append(flags, append([]string{"--label", "b", "--wait"}, nextHolder...)...)...)
		bStart := atoi(t, b.stdout.await(`^started (\d+)$`)[1])
		require.Equal(t, 0, b.wait(), b.stderr.all())
		require.Equal(t, 0, a.wait(), a.stderr.all())
		aLast := lastTick(t, z.ticks)
		require.Less(t, aLast, bStart, "the worker wrote %s after the next holder started", time.Duration(aLast-bStart))
		require.False(t, threadsRun(worker), "the worker %d still runs after tenure exited", worker.Pid)
		trackedBy(t, a, mode)
	})
}

// TestRunLeaderZombieSetsid: the command starts the same worker after
// setsid (out of its process group and session) and runs on, ignoring
// SIGTERM. `release --force` ends the tenure; tenure run must kill the
// worker with the rest before it exits, so none of it is left and no write
// of it lands after the next holder started. The next holder starts once
// the old tenure run has exited (a holder already waiting is
// TestRunForcedRelease's scene); the worker survived the old tenure run's
// exit before supervision counted its threads.
func TestRunLeaderZombieSetsid(t *testing.T) {
	t.Parallel()
	supervisionModes(t, func(t *testing.T, mode supervision) {
		z := newLeaderZombie(t)
		env := pgStore(t).env(t, z.env(mode)...)
		sh := `trap '' TERM
setsid "$LZ" "$TICKS" "$LZPID" &
while [ ! -s "$TICKS" ]; do sleep 0.01; done
echo "started $TENURE_HOLDER $TENURE_TOKEN"
while :; do sleep 0.05; done`
		flags := []string{"run", "--name", "nightly", "--ttl", "3s"}
		a := start(t, env, append([]string{"-v"}, append(flags, "--label", "a", "--", "sh", "-c", sh)...)...)
		a.stdout.await(startedLine)
		worker := z.proc(t)
		inRunCgroup(t, worker, a, mode)

		r := run(t, env, "release", "--force", "nightly")
		require.Equal(t, 0, r.code, r.stderr.all())
		require.Equal(t, cli.ExitLost, a.wait(), a.stderr.all())
		b := start(t, env, append(flags, append([]string{"--label", "b", "--wait"}, nextHolder...)...)...)
		bStart := atoi(t, b.stdout.await(`^started (\d+)$`)[1])
		require.Equal(t, 0, b.wait(), b.stderr.all())
		aLast := lastTick(t, z.ticks)
		require.Less(t, aLast, bStart, "the worker wrote %s after the next holder started", time.Duration(aLast-bStart))
		require.False(t, threadsRun(worker), "the worker %d still runs after tenure exited", worker.Pid)
		trackedBy(t, a, mode)
	})
}

// TestRunKilledTenureLeaderZombie: SIGKILL of tenure while the command's
// setsid'd worker has only its writing thread left. The watchdog alone
// must kill the worker: it no longer has a readable environ (no
// TENURE_RUN_TREE mark at /proc/PID/environ) and left the command's
// process group, so it is found by the watchdog's own scans, its threads'
// environ, or the cgroup.
func TestRunKilledTenureLeaderZombie(t *testing.T) {
	t.Parallel()
	supervisionModes(t, func(t *testing.T, mode supervision) {
		z := newLeaderZombie(t)
		env := sqliteStore(t).env(t, z.env(mode)...)
		sh := `trap '' TERM
setsid "$LZ" "$TICKS" "$LZPID" &
while [ ! -s "$TICKS" ]; do sleep 0.01; done
echo "started $TENURE_HOLDER $TENURE_TOKEN"
while :; do sleep 0.05; done`
		a := start(t, env, "-v", "run", "--name", "nightly", "--ttl", "3s", "--", "sh", "-c", sh)
		a.stdout.await(startedLine)
		worker := z.proc(t)
		inRunCgroup(t, worker, a, mode)
		a.signal(syscall.SIGKILL)
		require.Equal(t, 128+int(syscall.SIGKILL), a.wait())
		a.stderr.await(`tenure: watchdog: tenure exited without stopping its command`)
		deadline := time.Now().Add(patience)
		for threadsRun(worker) {
			require.True(t, time.Now().Before(deadline), "the worker %d still runs %s after tenure was killed", worker.Pid, patience)
			time.Sleep(10 * time.Millisecond) // polling /proc, with a deadline
		}
		// It was re-parented to this test binary, a subreaper (TestMain).
		var ws syscall.WaitStatus
		_, _ = syscall.Wait4(worker.Pid, &ws, syscall.WNOHANG, nil) // ECHILD: reaped by another
		if parent := trackedBy(t, a, mode); parent != "" {
			_, err := os.Stat(filepath.Join(parent, "tenure-run-"+strconv.Itoa(a.cmd.Process.Pid)))
			require.ErrorIs(t, err, os.ErrNotExist, "the watchdog left the cgroup behind")
		}
	})
}

// TestRunDelegatedCgroup: a user who is not root, in a cgroup v2 subtree
// delegated to it (the directory and its cgroup.procs, cgroup.threads and
// cgroup.subtree_control owned by the user, as systemd's Delegate=yes
// does), gets the cgroup mode: the command runs in a cgroup under the
// user's own, removed when run exits.
func TestRunDelegatedCgroup(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("the delegated-cgroup test sets up the delegation as root; CI runs as root")
		}
		t.Skip("the delegated-cgroup test sets up the delegation as root")
	}
	parent, err := supervise.CgroupParent()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("no cgroup on this host: %v; CI runs as root with cgroup v2", err)
		}
		t.Skipf("no cgroup on this host: %v", err)
	}
	const nobody = 65534
	name := "tenure-test-delegated-" + strconv.Itoa(os.Getpid())
	deleg := filepath.Join(parent, name)
	require.NoError(t, os.Mkdir(deleg, 0o755))
	t.Cleanup(func() { require.NoError(t, syscall.Rmdir(deleg)) })
	for _, f := range []string{"", "cgroup.procs", "cgroup.threads", "cgroup.subtree_control"} {
		require.NoError(t, os.Chown(filepath.Join(deleg, f), nobody, nobody))
	}
	// A copy of the binary and a state directory the user can reach.
	dir, err := os.MkdirTemp("", "tenure-delegated-")
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, os.RemoveAll(dir)) })
	require.NoError(t, os.Chmod(dir, 0o755))
	exe, state := filepath.Join(dir, "tenure"), filepath.Join(dir, "state")
	b, err := os.ReadFile(bin)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(exe, b, 0o755))
	require.NoError(t, os.Mkdir(state, 0o755))
	require.NoError(t, os.Chown(state, nobody, nobody))

	cgDir, err := os.Open(deleg)
	require.NoError(t, err)
	defer func() { require.NoError(t, cgDir.Close()) }()
	cmd := exec.Command(exe, "-v", "run", "--name", "delegated", "--", "sh", "-c", `grep '^0::' /proc/self/cgroup`)
	cmd.Env = pgStore(t).env(t, "XDG_STATE_HOME="+state, "HOME="+state)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody},
		UseCgroupFD: true, CgroupFD: int(cgDir.Fd())}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "tenure run as uid %d: %s", nobody, stderr.String())
	require.Regexp(t, `(?m)^0::.*/`+name+`/tenure-run-\d+$`, string(out), "the command is not in a cgroup of its own under the delegated one")
	require.Contains(t, stderr.String(), `tracked_by="cgroup v2 (each command in a cgroup of its own under `+deleg+",")
	left, err := os.ReadDir(deleg)
	require.NoError(t, err)
	for _, e := range left {
		require.False(t, e.IsDir(), "run left its cgroup %s behind", e.Name())
	}
}
