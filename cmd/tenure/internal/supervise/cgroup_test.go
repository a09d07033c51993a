package supervise

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fakeHierarchy makes a directory standing for a cgroup hierarchy mounted
// at point, with the cgroup rel in it holding the file procs (none when
// procs is empty).
func fakeHierarchy(t *testing.T, rel, procs string) (point string) {
	t.Helper()
	point = t.TempDir()
	dir := filepath.Join(point, rel)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	if procs != "" {
		require.NoError(t, os.WriteFile(filepath.Join(dir, procs), nil, 0o644))
	}
	return point
}

// TestParents: where a command's cgroup goes, read from mountinfo and the
// process's own /proc/self/cgroup, and why there is none.
func TestParents(t *testing.T) {
	t.Parallel()
	writable := fakeHierarchy(t, "system.slice/job.service", "cgroup.procs")
	noProcs := fakeHierarchy(t, "system.slice/job.service", "")
	freezer := fakeHierarchy(t, "job", "tasks")
	v2 := func(point string) string {
		return "41 31 0:38 / " + point + " rw,relatime - cgroup2 cgroup2 rw\n"
	}
	v1 := func(point string) string {
		return "35 31 0:30 / " + point + " rw,relatime - cgroup cgroup rw,freezer\n"
	}
	for _, tt := range []struct {
		name      string
		mountinfo string
		own       string
		v1        bool
		want      parent
		err       string
	}{
		{"V2", v2(writable), "0::/system.slice/job.service\n", false,
			parent{dir: filepath.Join(writable, "system.slice/job.service"), rel: "/system.slice/job.service"}, ""},
		{"V2NotMounted", v1(freezer), "0::/system.slice/job.service\n", false, parent{}, "no cgroup v2 hierarchy is mounted"},
		{"V2NoLine", v2(writable), "6:freezer:/job\n", false, parent{}, "this process is in no cgroup v2 (no 0:: line in /proc/self/cgroup)"},
		{"V2NotWritable", v2(noProcs), "0::/system.slice/job.service\n", false, parent{},
			"cannot write to this process's cgroup " + filepath.Join(noProcs, "system.slice/job.service") + " (run as root, or in a delegated cgroup v2 subtree, e.g. systemd Delegate=yes)"},
		{"V2Gone", v2(writable), "0::/elsewhere\n", false, parent{}, "cannot write to this process's cgroup " + filepath.Join(writable, "elsewhere")},
		{"V2OutsideMount", "30 24 0:26 /user.slice " + writable + " rw - cgroup2 cgroup2 rw\n", "0::/system.slice/job.service\n", false, parent{},
			"this process's cgroup /system.slice/job.service is outside the mount at " + writable},
		{"V1", v1(freezer), "6:freezer:/job\n0::/\n", true, parent{dir: filepath.Join(freezer, "job"), rel: "/job", v1: true}, ""},
		{"V1NotMounted", v2(writable), "6:freezer:/job\n", true, parent{}, "no cgroup v1 freezer hierarchy is mounted"},
		{"V1NoLine", v1(freezer), "0::/\n", true, parent{}, "this process is in no cgroup v1 freezer cgroup (no freezer line in /proc/self/cgroup)"},
		{"V1NotWritable", v1(noProcs), "6:freezer:/system.slice/job.service\n", true, parent{},
			"cannot write to this process's cgroup " + filepath.Join(noProcs, "system.slice/job.service") + " (cgroup v1 freezer: run as root)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			find := v2Parent
			if tt.v1 {
				find = freezerParent
			}
			got, err := find(tt.mountinfo, tt.own)
			if tt.err != "" {
				require.ErrorContains(t, err, tt.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

// TestCgroupParentOfThisProcess: on this host the cgroup tenure run would
// use is the test process's own (it is listed there), and Mode says
// where.
func TestCgroupParentOfThisProcess(t *testing.T) {
	t.Parallel()
	dir, err := CgroupParent()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("no cgroup on this host: %v; CI runs as root with cgroup v2 mounted", err)
		}
		t.Skipf("no cgroup on this host: %v", err)
	}
	members := "cgroup.procs"
	if p, _ := findParent(false); p.v1 {
		members = "tasks"
	}
	b, err := os.ReadFile(filepath.Join(dir, members))
	require.NoError(t, err)
	require.Contains(t, strings.Fields(string(b)), strconv.Itoa(os.Getpid()))
	ok, how := Mode()
	require.True(t, ok)
	require.Contains(t, how, " under "+dir+",")
	require.True(t, strings.HasSuffix(how, " and child subreaper"), how)
}

// TestNewCgroup: a command's cgroup is made below the process's own, is
// empty until something is started in it, and is removed once empty;
// removing it again is no error.
func TestNewCgroup(t *testing.T) {
	t.Parallel()
	cgroupModes(t, func(t *testing.T, v1 bool) {
		cg := newTestCgroup(t, v1)
		p, err := findParent(v1)
		require.NoError(t, err)
		require.Equal(t, p.dir, filepath.Dir(cg.Dir))
		require.Equal(t, v1, cg.v1)
		require.Empty(t, cg.Procs())
		require.False(t, cg.Populated())
		require.Zero(t, cg.Kill(), "an empty cgroup has nothing to kill")
		require.NoError(t, cg.Remove(patience))
		_, err = os.Stat(cg.Dir)
		require.ErrorIs(t, err, os.ErrNotExist)
		require.NoError(t, cg.Remove(patience), "a cgroup already gone is removed")
	})
}

// TestOpenCgroupOutside: a directory outside the cgroup mounts, or a
// relative one, is no cgroup.
func TestOpenCgroupOutside(t *testing.T) {
	t.Parallel()
	_, ok := OpenCgroup(t.TempDir())
	require.False(t, ok)
	_, ok = OpenCgroup("relative/dir")
	require.False(t, ok)
}

// TestCgroupRemoveBusy: a cgroup with a process in it is not removed: the
// error names it, after waiting the time given for it to empty.
func TestCgroupRemoveBusy(t *testing.T) {
	t.Parallel()
	cgroupModes(t, func(t *testing.T, v1 bool) {
		cg := newTestCgroup(t, v1)
		w := startInCgroup(t, cg, false)
		err := cg.Remove(50 * time.Millisecond)
		require.ErrorContains(t, err, "cannot remove cgroup "+cg.Dir)
		require.ErrorIs(t, err, syscall.EBUSY)
		require.True(t, w.proc.Alive())
		cg.Kill()
		w.awaitExit(t)
		require.NoError(t, cg.Remove(patience))
	})
}

// startStopped starts sleep in cg and stops it with SIGSTOP.
func startStopped(t *testing.T, cg *Cgroup) (Proc, <-chan struct{}) {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	require.NoError(t, cg.Start(cmd))
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait() // Killed by the test: its status is of no interest.
		close(done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	p := identify(t, cmd.Process.Pid)
	require.NoError(t, syscall.Kill(p.Pid, syscall.SIGSTOP))
	deadline := time.Now().Add(patience)
	for {
		if st, _ := taskState("/proc/" + strconv.Itoa(p.Pid) + "/stat"); st == "T" {
			break
		}
		require.True(t, time.Now().Before(deadline), "SIGSTOP did not stop %d within %s", p.Pid, patience)
		time.Sleep(5 * time.Millisecond) // polling /proc, with a deadline
	}
	return p, done
}

// TestCgroupKillStopped: a process stopped by SIGSTOP (as ^Z or a
// debugger leaves it) is killed with the cgroup.
func TestCgroupKillStopped(t *testing.T) {
	t.Parallel()
	cgroupModes(t, func(t *testing.T, v1 bool) {
		cg := newTestCgroup(t, v1)
		p, done := startStopped(t, cg)
		require.True(t, cg.Populated())
		cg.Kill() // cgroup.kill may take it before it is counted
		select {
		case <-done:
		case <-time.After(patience):
			t.Fatalf("stopped process %d still runs %s after the cgroup was killed", p.Pid, patience)
		}
		require.False(t, p.Exists())
		awaitEmpty(t, cg)
	})
}

// awaitEmpty waits until no process is left in cg.
func awaitEmpty(t *testing.T, cg *Cgroup) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for cg.Populated() {
		require.True(t, time.Now().Before(deadline), "cgroup %s still holds %v %s after it was killed", cg.Dir, cg.Procs(), patience)
		time.Sleep(5 * time.Millisecond) // polling the cgroup, with a deadline
	}
}

// TestCgroupKillForking: a tree that keeps forking while it is killed
// leaves nothing behind: the cgroup is frozen before the kill.
func TestCgroupKillForking(t *testing.T) {
	t.Parallel()
	cgroupModes(t, func(t *testing.T, v1 bool) {
		cg := newTestCgroup(t, v1)
		cmd := exec.Command("sh", "-c", `i=0; while [ $i -lt 200 ]; do setsid sleep 60 & i=$((i+1)); done; echo ready; wait`)
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cg.Start(cmd))
		done := make(chan struct{})
		go func() {
			_ = cmd.Wait() // Killed by the test: its status is of no interest.
			close(done)
		}()
		t.Cleanup(func() {
			cg.Kill()
			<-done
		})
		var line [6]byte
		_, err = io.ReadFull(out, line[:])
		require.NoError(t, err)
		require.Equal(t, "ready\n", string(line[:]))
		require.Greater(t, len(cg.Procs()), 200, "the shell and its 200 sleeps")
		cg.Kill()
		<-done
		awaitEmpty(t, cg)
		require.Empty(t, cg.Procs())
	})
}

// TestCgroupSignal: a signal to the cgroup reaches each process in it (a
// stopped one resumes on SIGCONT), and says how many it reached.
func TestCgroupSignal(t *testing.T) {
	t.Parallel()
	cgroupModes(t, func(t *testing.T, v1 bool) {
		cg := newTestCgroup(t, v1)
		p, done := startStopped(t, cg)
		require.Equal(t, 1, cg.Signal(syscall.SIGCONT))
		deadline := time.Now().Add(patience)
		for {
			if st, _ := taskState("/proc/" + strconv.Itoa(p.Pid) + "/stat"); st != "T" {
				break
			}
			require.True(t, time.Now().Before(deadline), "SIGCONT did not resume %d within %s", p.Pid, patience)
			time.Sleep(5 * time.Millisecond) // polling /proc, with a deadline
		}
		require.True(t, cg.holds(p.Pid))
		require.False(t, cg.holds(os.Getpid()))
		cg.Kill()
		<-done
	})
}
