package main

import (
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

	"github.com/tenure-dev/tenure/cmd/tenure/internal/supervise"
)

// The tests in this file run tenure run as a container's entrypoint does:
// PID 1 of a PID namespace of its own (unshare --pid --fork), with that
// namespace's /proc mounted.

// pid1 is a tenure run that is PID 1 of a new PID namespace.
type pid1 struct {
	*proc     // unshare, whose child tenure is
	pid   int // tenure's pid on this host
	ns    string
}

// startPID1 runs tenure with args as PID 1 of a new PID namespace.
func startPID1(t *testing.T, env []string, args ...string) *pid1 {
	t.Helper()
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("no unshare on PATH: the PID 1 tests run tenure in a PID namespace of its own with it; install util-linux")
		}
		t.Skip("no unshare on PATH; install util-linux to run the PID 1 tests")
	}
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("the PID 1 tests make a PID namespace (unshare --pid), which takes root")
		}
		t.Skip("not root: the PID 1 tests make a PID namespace (unshare --pid)")
	}
	// --kill-child: should the test end unshare, its child (tenure, and
	// with it the whole namespace) is killed too.
	cmd := exec.Command(unshare, append([]string{"--pid", "--fork", "--mount-proc", "--kill-child", bin}, args...)...)
	// A group of its own: the cleanup of a test that fails kills the
	// groups of unshare's children, tenure's among them.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p := startCmd(t, env, cmd)
	deadline := time.Now().Add(patience)
	for {
		for pid, cl := range children(p.cmd.Process.Pid) {
			if strings.HasPrefix(cl, bin+" ") {
				ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pid))
				require.NoError(t, err)
				require.Equal(t, 1, nsPid(t, pid), "tenure (pid %d here) is not PID 1 of its namespace", pid)
				return &pid1{proc: p, pid: pid, ns: ns}
			}
		}
		require.True(t, time.Now().Before(deadline), "unshare started no tenure; stderr:\n%s", p.stderr.all())
		time.Sleep(10 * time.Millisecond) // polling /proc, with a deadline
	}
}

// nsPid returns the pid that the process pid (of this host) has in its own
// PID namespace: the last field of NSpid in /proc/PID/status.
func nsPid(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	for _, l := range strings.Split(string(b), "\n") {
		if f, ok := strings.CutPrefix(l, "NSpid:"); ok {
			fields := strings.Fields(f)
			n, err := strconv.Atoi(fields[len(fields)-1])
			require.NoError(t, err)
			return n
		}
	}
	t.Fatalf("no NSpid in /proc/%d/status", pid)
	return 0
}

// zombies returns the processes of PID namespace ns that are zombies, as
// "pid (comm)", read from this host's /proc.
func zombies(ns string) []string {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var found []string
	for _, stat := range stats {
		dir := filepath.Dir(stat)
		if l, err := os.Readlink(dir + "/ns/pid"); err != nil || l != ns {
			continue
		}
		b, err := os.ReadFile(stat)
		if err != nil {
			continue
		}
		s := string(b)
		if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) && s[i+2] == 'Z' {
			found = append(found, s[:i+1])
		}
	}
	return found
}

// modeEnv is the environment that makes tenure run use the supervision
// mode.
func modeEnv(mode supervision) []string {
	switch mode {
	case cgroupV1:
		return []string{supervise.NoCgroupV2Env + "=1"}
	case taskScan:
		return []string{supervise.NoCgroupEnv + "=1"}
	}
	return nil
}

// TestRunPID1ReapsOrphans: the command double-forks children that exit
// while it runs on; they are re-parented to tenure, PID 1, which reaps
// them then, not when the command ends.
func TestRunPID1ReapsOrphans(t *testing.T) {
	t.Parallel()
	supervisionModes(t, func(t *testing.T, mode supervision) {
		orphans := filepath.Join(t.TempDir(), "orphans")
		require.NoError(t, os.WriteFile(orphans, nil, 0o600))
		env := sqliteStore(t).env(t, append(modeEnv(mode), "ORPHANS="+orphans)...)
		sh := `trap 'exit 0' TERM
i=0
while [ $i -lt 5 ]; do (sh -c 'echo $$ >> "$ORPHANS"' &); i=$((i+1)); done
while [ "$(wc -l < "$ORPHANS")" -lt 5 ]; do sleep 0.01; done
echo orphaned
while :; do sleep 1 & wait $!; done`
		p := startPID1(t, env, "run", "--name", "job", "--", "sh", "-c", sh)
		p.stdout.await(`^orphaned$`)
		// The orphans have written their line and exit; each is a zombie
		// until tenure reaps it.
		deadline := time.Now().Add(5 * time.Second)
		for z := zombies(p.ns); len(z) > 0; z = zombies(p.ns) {
			require.True(t, time.Now().Before(deadline), "zombies in tenure's PID namespace 5s after the orphans exited: %s", strings.Join(z, ", "))
			time.Sleep(10 * time.Millisecond) // polling /proc, with a deadline
		}
		require.NoError(t, syscall.Kill(p.pid, syscall.SIGTERM))
		require.Equal(t, 0, p.wait(), p.stderr.all())
		require.Equal(t, "released", status(t, env, "job").State)
	})
}

// TestRunPID1ForwardsSIGTERM: SIGTERM sent to tenure, PID 1 of its
// namespace, from outside it (as a container runtime does) reaches the
// command; tenure passes the command's status on and releases the lease.
func TestRunPID1ForwardsSIGTERM(t *testing.T) {
	t.Parallel()
	supervisionModes(t, func(t *testing.T, mode supervision) {
		env := sqliteStore(t).env(t, modeEnv(mode)...)
		sh := `trap 'echo "got TERM"; exit 0' TERM; echo ready; while :; do sleep 1 & wait $!; done`
		p := startPID1(t, env, "run", "--name", "job", "--", "sh", "-c", sh)
		p.stdout.await(`^ready$`)
		require.NoError(t, syscall.Kill(p.pid, syscall.SIGTERM))
		p.stdout.await(`^got TERM$`)
		require.Equal(t, 0, p.wait(), p.stderr.all())
		require.NotContains(t, p.stderr.all(), "killing it")
		require.Equal(t, "released", status(t, env, "job").State)
	})
}

// TestRunPID1KillsAfterGrace: a command that ignores SIGTERM is killed
// --grace after tenure got SIGTERM, and tenure releases and exits then,
// before a container runtime's own SIGKILL would come.
func TestRunPID1KillsAfterGrace(t *testing.T) {
	t.Parallel()
	supervisionModes(t, func(t *testing.T, mode supervision) {
		env := sqliteStore(t).env(t, modeEnv(mode)...)
		const grace = time.Second
		sh := `trap '' TERM; echo ready; while :; do sleep 0.05; done`
		p := startPID1(t, env, "run", "--name", "job", "--ttl", "3s", "--grace", grace.String(), "--", "sh", "-c", sh)
		p.stdout.await(`^ready$`)
		sent := time.Now()
		require.NoError(t, syscall.Kill(p.pid, syscall.SIGTERM))
		require.Equal(t, 128+int(syscall.SIGKILL), p.wait(), p.stderr.all())
		took := time.Since(sent)
		require.GreaterOrEqual(t, took, grace, "the command was killed before its grace was over")
		require.Less(t, took, grace+5*time.Second, "tenure took %s to exit after SIGTERM with --grace %s", took, grace)
		require.Contains(t, p.stderr.all(), "after SIGTERM; killing it")
		require.Equal(t, "released", status(t, env, "job").State)
	})
}
