package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/cmd/tenure/internal/cli"
	"github.com/tenure-dev/tenure/cmd/tenure/internal/supervise"
)

// children returns the children of pid with their command lines.
func children(pid int) map[int]string {
	kids := map[int]string{}
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, task := range tasks {
		b, err := os.ReadFile(task)
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			n, err := strconv.Atoi(f)
			if err != nil {
				continue
			}
			cl, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", n))
			kids[n] = strings.ReplaceAll(string(cl), "\x00", " ")
		}
	}
	return kids
}

// watchdogOf returns the pid of tenure run's watchdog.
func watchdogOf(t *testing.T, p *proc) int {
	t.Helper()
	for pid, cl := range children(p.cmd.Process.Pid) {
		if strings.Contains(cl, "run --watchdog") {
			return pid
		}
	}
	t.Fatalf("tenure %d has no watchdog child", p.cmd.Process.Pid)
	return 0
}

// commandOf returns the pid (and process group) of tenure run's command.
func commandOf(t *testing.T, p *proc) int {
	t.Helper()
	for pid, cl := range children(p.cmd.Process.Pid) {
		if !strings.Contains(cl, "run --watchdog") {
			return pid
		}
	}
	t.Fatalf("tenure %d has no command child", p.cmd.Process.Pid)
	return 0
}

// ticker is a shell command that ignores SIGTERM, says "started …" and
// appends a `date +%s%N` timestamp to $TICKS every 20 ms for ever. Its
// background job (and, with setsid, a process that left the group and the
// session) does the same.
const ticker = `trap '' TERM
tick() { while :; do date +%s%N >> "$TICKS"; sleep 0.02; done; }
echo "started $TENURE_HOLDER $TENURE_TOKEN"
tick`

// nextHolder says when its command started, by the command's own clock.
var nextHolder = []string{"--", "sh", "-c", `echo "started $(date +%s%N)"`}

// lastTick reads the last timestamp in path.
func lastTick(t *testing.T, path string) int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var last int64
	for _, l := range strings.Split(string(b), "\n") {
		if n, err := strconv.ParseInt(strings.TrimSpace(l), 10, 64); err == nil && n > last {
			last = n
		}
	}
	require.Positive(t, last, "no tick in %s", path)
	return last
}

// awaitTicks waits until path holds at least one timestamp.
func awaitTicks(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for {
		if b, _ := os.ReadFile(path); strings.Count(string(b), "\n") >= 2 {
			return
		}
		require.True(t, time.Now().Before(deadline), "nothing ticked in %s", path)
		time.Sleep(10 * time.Millisecond) // polling a file, with a deadline
	}
}

// awaitTickAfter waits until path holds a timestamp after at.
func awaitTickAfter(t *testing.T, path string, at int64) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for {
		b, _ := os.ReadFile(path)
		for _, l := range strings.Split(string(b), "\n") {
			if n, err := strconv.ParseInt(strings.TrimSpace(l), 10, 64); err == nil && n > at {
				return
			}
		}
		require.True(t, time.Now().Before(deadline), "nothing ticked in %s after %d", path, at)
		time.Sleep(10 * time.Millisecond) // polling a file, with a deadline
	}
}

// awaitGone waits until none of pids is alive (zombies count as gone).
func awaitGone(t *testing.T, pids ...int) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for _, pid := range pids {
		for {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
			if err != nil {
				break
			}
			s := string(b)
			if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) && s[i+2] == 'Z' {
				break
			}
			require.True(t, time.Now().Before(deadline), "process %d is still alive: %s", pid, s)
			time.Sleep(10 * time.Millisecond) // polling /proc, with a deadline
		}
	}
}

// TestRunStoppedTenure: tenure is stopped (SIGSTOP) for longer than its
// TTL, with a command that ignores SIGTERM and no --grace. The watchdog
// kills the command before the next holder can start.
func TestRunStoppedTenure(t *testing.T) {
	t.Parallel()
	s := pgStore(t)
	ticks := filepath.Join(t.TempDir(), "ticks")
	env := s.env(t, "TICKS="+ticks)
	flags := []string{"run", "--name", "nightly", "--ttl", "3s"}
	a := start(t, env, append(flags, "--label", "a", "--", "sh", "-c", ticker)...)
	a.stdout.await(startedLine)
	awaitTicks(t, ticks)
	b := start(t, env, append(flags, append([]string{"--label", "b", "--wait"}, nextHolder...)...)...)
	b.stderr.await(`waiting for it$`)

	a.signal(syscall.SIGSTOP)
	bStart := atoi(t, b.stdout.await(`^started (\d+)$`)[1])
	require.Equal(t, 0, b.wait(), b.stderr.all())
	aLast := lastTick(t, ticks)
	a.signal(syscall.SIGCONT)
	require.Equal(t, cli.ExitLost, a.wait(), a.stderr.all())
	require.Less(t, aLast, bStart, "the stopped holder's command wrote %s after the next holder started", time.Duration(aLast-bStart))
	require.Contains(t, a.stderr.all(), "tenure: watchdog: the kill deadline passed")
	require.Equal(t, aLast, lastTick(t, ticks), "the command wrote after tenure resumed")
}

// TestRunKilledTenure: SIGKILL of tenure leaves no process of its
// command's tree running: not the command, not its background job, not a
// setsid escapee.
func TestRunKilledTenure(t *testing.T) {
	t.Parallel()
	env := sqliteStore(t).env(t)
	sh := `trap '' TERM
(trap '' TERM; while :; do sleep 0.05; done) &
echo "bg $!"
setsid sh -c 'trap "" TERM; echo "escapee $$"; while :; do sleep 0.05; done' &
echo "started $TENURE_HOLDER $TENURE_TOKEN"
while :; do sleep 0.05; done`
	a := start(t, env, "run", "--name", "nightly", "--ttl", "3s", "--", "sh", "-c", sh)
	a.stdout.await(startedLine)
	bg := int(atoi(t, a.stdout.await(`^bg (\d+)$`)[1]))
	escapee := int(atoi(t, a.stdout.await(`^escapee (\d+)$`)[1]))
	cmd, dog := commandOf(t, a), watchdogOf(t, a)
	var procs []supervise.Proc
	for _, pid := range []int{cmd, bg, escapee, dog} {
		p, ok := supervise.Identify(pid)
		require.True(t, ok, "process %d is gone before tenure was killed", pid)
		procs = append(procs, p)
	}
	a.signal(syscall.SIGKILL)
	require.Equal(t, 128+int(syscall.SIGKILL), a.wait())
	awaitGone(t, cmd, bg, escapee, dog)
	// They were re-parented to this test binary, a subreaper (TestMain):
	// reap the zombies that are still themselves (a pid reaped elsewhere
	// may name another test's process by now, which must not be waited for).
	for _, p := range procs {
		if p.Exists() {
			var ws syscall.WaitStatus
			_, _ = syscall.Wait4(p.Pid, &ws, syscall.WNOHANG, nil) // ECHILD: reaped by its own parent
		}
	}
	require.Contains(t, a.stderr.rest(), "tenure: watchdog: tenure exited without stopping its command")
}

// TestRunSweepsLeftovers: the command exits at once, leaving a background
// job and a setsid escapee that ignore SIGTERM and keep writing. The lease
// is released only after they are dead, so no write of theirs lands after
// the next holder started.
func TestRunSweepsLeftovers(t *testing.T) {
	t.Parallel()
	s := sqliteStore(t)
	dir := t.TempDir()
	bgTicks, escTicks := filepath.Join(dir, "bg"), filepath.Join(dir, "esc")
	env := s.env(t, "BG="+bgTicks, "ESC="+escTicks)
	sh := `(trap '' TERM; while :; do date +%s%N >> "$BG"; sleep 0.02; done) &
setsid sh -c 'trap "" TERM; while :; do date +%s%N >> "$ESC"; sleep 0.02; done' &
while [ ! -s "$BG" ] || [ ! -s "$ESC" ]; do sleep 0.01; done
echo "started $TENURE_HOLDER $TENURE_TOKEN"
exit 0`
	flags := []string{"run", "--name", "nightly", "--ttl", "3s"}
	a := start(t, env, append(flags, "--label", "a", "--", "sh", "-c", sh)...)
	a.stdout.await(startedLine)
	b := start(t, env, append(flags, append([]string{"--label", "b", "--wait"}, nextHolder...)...)...)
	bStart := atoi(t, b.stdout.await(`^started (\d+)$`)[1])
	require.Equal(t, 0, a.wait(), a.stderr.all())
	require.Equal(t, 0, b.wait(), b.stderr.all())
	require.Less(t, lastTick(t, bgTicks), bStart, "the background job wrote after the next holder started")
	require.Less(t, lastTick(t, escTicks), bStart, "the setsid escapee wrote after the next holder started")
}

// TestRunQuitIsForwarded: SIGQUIT goes to the command; tenure neither dumps
// its goroutines nor dies leaving the command behind.
func TestRunQuitIsForwarded(t *testing.T) {
	t.Parallel()
	env := sqliteStore(t).env(t)
	p := start(t, env, "run", "--name", "job", "--", "sh", "-c", `trap 'echo "got QUIT"; exit 42' QUIT; echo ready; while :; do sleep 1 & wait $!; done`)
	p.stdout.await(`^ready$`)
	p.signal(syscall.SIGQUIT)
	p.stdout.await(`^got QUIT$`)
	require.Equal(t, 42, p.wait(), p.stderr.all())
	require.NotContains(t, p.stderr.rest(), "goroutine")
	require.Equal(t, "released", status(t, env, "job").State)
}

// TestRunRevokeSignal: SIGPWR (cli.RevokeSignal) makes tenure run stand
// down at once: the command is killed without grace, even one ignoring
// SIGTERM; the lease is not released (it expires by its TTL); exit 79.
func TestRunRevokeSignal(t *testing.T) {
	t.Parallel()
	env := sqliteStore(t).env(t)
	ticks := filepath.Join(t.TempDir(), "ticks")
	p := start(t, append(env, "TICKS="+ticks), "run", "--name", "job", "--ttl", "30s", "--", "sh", "-c", ticker)
	first := atoi(t, p.stdout.await(startedLine)[3])
	cmd := commandOf(t, p)
	p.signal(cli.RevokeSignal)
	require.Equal(t, cli.ExitLost, p.wait(), p.stderr.all())
	awaitGone(t, cmd)
	require.Contains(t, p.stderr.rest(), fmt.Sprintf(`lease "job" with token %d revoked on wake or restore (SIGPWR`, first))
	st := status(t, env, "job")
	require.Equal(t, "held", st.State, "the revoked lease was released")
	require.Equal(t, first, st.Token)
}

// TestRunForcedRelease: `release --force` from another process, with a
// short TTL, no --grace, a command that ignores SIGTERM and a next holder
// already waiting (--wait). Release moves the holder's chain on and keeps
// the lease's expiry; the holder finds it at its next renewal and kills
// its command (SIGKILL after the grace) before that expiry, when the
// waiter takes over: no write of the old command lands after the next
// holder started. With --now the waiter would race the holder's kill.
func TestRunForcedRelease(t *testing.T) {
	t.Parallel()
	s := pgStore(t)
	ticks := filepath.Join(t.TempDir(), "ticks")
	env := s.env(t, "TICKS="+ticks)
	flags := []string{"run", "--name", "nightly", "--ttl", "3s"}
	a := start(t, env, append(flags, "--label", "a", "--", "sh", "-c", ticker)...)
	first := atoi(t, a.stdout.await(startedLine)[3])
	awaitTicks(t, ticks)
	b := start(t, env, append(flags, append([]string{"--label", "b", "--wait"}, nextHolder...)...)...)
	b.stderr.await(`waiting for it$`)

	r := run(t, env, "release", "--force", "nightly")
	require.Equal(t, 0, r.code, r.stderr.all())
	bStart := atoi(t, b.stdout.await(`^started (\d+)$`)[1])
	require.Equal(t, 0, b.wait(), b.stderr.all())
	require.Equal(t, cli.ExitLost, a.wait(), a.stderr.all())
	require.Regexp(t, fmt.Sprintf(`lost lease "nightly" with token %d: .*the chain moved on: a clone, or an operator's release --force`, first), a.stderr.all())
	aLast := lastTick(t, ticks)
	require.Less(t, aLast, bStart, "the old holder's command wrote %s after the next holder started", time.Duration(aLast-bStart))
}

// TestForcedReleaseNoOverlap: `release --force`, then a second tenure
// run --wait, while the first's command (which ignores SIGTERM) appends a
// timestamp every 20ms: no line of the first comes after the second's
// command started, on stores that notify (PostgreSQL, SQLite) and on one
// that cannot (MySQL). Release moves the holder's renewal chain on and
// keeps its expiry, which it prints; the holder stands down at its next
// renewal, the next holder gets in at the expiry.
func TestForcedReleaseNoOverlap(t *testing.T) {
	t.Parallel()
	for name, open := range map[string]func(*testing.T) store{"Postgres": pgStore, "SQLite": sqliteStore, "MySQL": mysqlStore} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := open(t)
			ticks := filepath.Join(t.TempDir(), "ticks")
			env := s.env(t, "TICKS="+ticks)
			flags := []string{"run", "--name", "nightly", "--ttl", "6s"}
			a := start(t, env, append(flags, "--label", "a", "--", "sh", "-c", ticker)...)
			first := atoi(t, a.stdout.await(startedLine)[3])
			s.awaitListeners(t, 1)
			awaitTicks(t, ticks)

			r := run(t, env, "release", "--force", "nightly")
			require.Equal(t, 0, r.code, r.stderr.all())
			released := r.stdout.rest()
			b := start(t, env, append(flags, append([]string{"--label", "b", "--wait"}, nextHolder...)...)...)
			bStart := atoi(t, b.stdout.await(`^started (\d+)$`)[1])
			require.Equal(t, 0, b.wait(), b.stderr.all())
			require.Equal(t, cli.ExitLost, a.wait(), a.stderr.all())
			aLast := lastTick(t, ticks)
			require.Less(t, aLast, bStart, "the old holder's command wrote %s after the next holder started", time.Duration(aLast-bStart))
			require.Regexp(t, `the next holder can take it in \S+ by the store's clock`, released)
			require.Regexp(t, fmt.Sprintf(`lost lease "nightly" with token %d: .*the chain moved on: a clone, or an operator's release --force`, first), a.stderr.all())
		})
	}
}

// TestForcedReleaseNowOnMySQL: with --now, MySQL lets the next holder in
// at once, and release says what that risks: the holder, which MySQL
// cannot tell, writes on beside the next holder until its next renewal.
func TestForcedReleaseNowOnMySQL(t *testing.T) {
	t.Parallel()
	s := mysqlStore(t)
	ticks := filepath.Join(t.TempDir(), "ticks")
	env := s.env(t, "TICKS="+ticks)
	// Renewals every 5s: the release and the next holder's start come
	// well before the first.
	flags := []string{"run", "--name", "nightly", "--ttl", "15s"}
	a := start(t, env, append(flags, "--label", "a", "--", "sh", "-c", ticker)...)
	a.stdout.await(startedLine)
	awaitTicks(t, ticks)

	r := run(t, env, "release", "--force", "--now", "nightly")
	require.Equal(t, 0, r.code, r.stderr.all())
	require.Contains(t, r.stdout.rest(), "beside the next holder")
	b := run(t, env, append(flags, append([]string{"--label", "b"}, nextHolder...)...)...)
	require.Equal(t, 0, b.code, "the next holder was not let in at once: %s", b.stderr.all())
	bStart := atoi(t, b.stdout.await(`^started (\d+)$`)[1])
	awaitTickAfter(t, ticks, bStart)
	require.Equal(t, cli.ExitLost, a.wait(), a.stderr.all())
}

// TestRunSelfReleaseThenExit: the command releases its own tenure, goes
// on briefly and exits 3. tenure run takes the release as the command's
// (no loss line, no kill) and passes status 3 on; a waiter starts at once.
func TestRunSelfReleaseThenExit(t *testing.T) {
	t.Parallel()
	env := sqliteStore(t).env(t)
	flags := []string{"run", "--name", "nightly", "--ttl", "30s"}
	a := start(t, env, append(flags, "--label", "a", "--", "sh", "-c",
		`echo "started $TENURE_HOLDER $TENURE_TOKEN"; read go; "$TENURE_BIN" release "$TENURE_LEASE" && echo "after release"; exit 3`)...)
	a.stdout.await(startedLine)
	b := start(t, env, append(flags, append([]string{"--label", "b", "--wait"}, nextHolder...)...)...)
	b.stderr.await(`waiting for it$`)
	_, err := a.stdin.Write([]byte("go\n"))
	require.NoError(t, err)
	a.stdout.await(`^after release$`)
	b.stdout.await(`^started \d+$`)
	require.Equal(t, 3, a.wait(), a.stderr.all())
	require.Equal(t, 0, b.wait(), b.stderr.all())
	require.NotContains(t, a.stderr.all(), "lost")
	require.Contains(t, a.stdout.all(), `released lease "nightly" (token 1)`)
}

// TestRunSaysHowItTracksTheTree: with -v, tenure run names the mechanism
// that tracks the command's descendants. The real binary is the whole
// process, so it is a child subreaper; where the host allows it, the
// command also gets a cgroup of its own, which is gone once run exits.
func TestRunSaysHowItTracksTheTree(t *testing.T) {
	t.Parallel()
	s := sqliteStore(t)
	p := run(t, s.env(t, supervise.NoCgroupEnv+"=1"), "-v", "run", "--name", "tracked", "--", "true")
	require.Equal(t, 0, p.code, p.stderr.all())
	require.Contains(t, p.stderr.all(), `msg="supervising the command"`)
	require.Contains(t, p.stderr.all(), `tracked_by="child subreaper and task scan: every descendant, setsid escapees too (no cgroup: TENURE_RUN_NO_CGROUP is set)"`)

	cgroup, how := supervise.Mode()
	if !cgroup {
		if os.Getenv("CI") != "" {
			t.Fatalf("no cgroup on this host: %s; CI runs as root with a writable cgroup", how)
		}
		t.Skipf("no cgroup on this host: %s", how)
	}
	p = run(t, s.env(t), "-v", "run", "--name", "tracked", "--", "sh", "-c", `grep '^0::' /proc/self/cgroup`)
	require.Equal(t, 0, p.code, p.stderr.all())
	require.Contains(t, p.stderr.all(), `tracked_by="`+strings.ReplaceAll(how, `"`, `\"`)+`"`)
	own := p.stdout.await(`^0::(.*/tenure-run-(\d+))$`)
	require.Equal(t, strconv.Itoa(p.cmd.Process.Pid), own[2], "the command is not in run's cgroup")
	parent, err := supervise.CgroupParent()
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(parent, "tenure-run-"+own[2]))
	require.ErrorIs(t, err, os.ErrNotExist, "run left its cgroup behind")
}

// TestRunCgroupV1: with cgroup v2 passed over (TENURE_RUN_NO_CGROUP_V2),
// on a host with the cgroup v1 freezer mounted, tenure run says so in its
// help and its -v log, runs the command in a freezer cgroup of its own,
// and removes it once run exits.
func TestRunCgroupV1(t *testing.T) {
	t.Parallel()
	if !freezerMounted() {
		if os.Getenv("CI") != "" {
			t.Fatal("no cgroup v1 freezer hierarchy is mounted on this host; CI runs as root on a host with the v1 freezer mounted beside cgroup v2")
		}
		t.Skip("no cgroup v1 freezer hierarchy is mounted on this host")
	}
	s := sqliteStore(t)
	env := s.env(t, supervise.NoCgroupV2Env+"=1")
	h := run(t, env, "run", "--help")
	require.Regexp(t, `(?m)^On this host: supervision: cgroup v1 freezer \(each command in a freezer cgroup of its own under /`, h.stdout.all()+h.stderr.all())
	p := run(t, env, "-v", "run", "--name", "tracked", "--", "sh", "-c", `grep -E '^[0-9]+:([^:]*,)?freezer(,[^:]*)?:' /proc/self/cgroup`)
	require.Equal(t, 0, p.code, p.stderr.all())
	parent := trackedBy(t, p, cgroupV1)
	own := p.stdout.await(`:(/.*/tenure-run-(\d+)|/tenure-run-(\d+))$`)
	require.Equal(t, strconv.Itoa(p.cmd.Process.Pid), own[2]+own[3], "the command is not in run's freezer cgroup")
	_, err := os.Stat(filepath.Join(parent, "tenure-run-"+own[2]+own[3]))
	require.ErrorIs(t, err, os.ErrNotExist, "run left its cgroup behind")
}
