package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
)

// The tests run the tenure binary as a user would. TestMain builds it once
// into a temporary directory (with -race when the tests have it).
//
// The test binary doubles as a helper command for tenure run: with
// helperEnv set, TestMain runs that helper instead of the tests.
const (
	helperEnv  = "TENURE_CLI_TEST_HELPER" // "ticker"
	helperFIFO = "TENURE_CLI_TEST_FIFO"   // where the ticker writes
)

// tickEvery is how often the ticker helper writes a timestamp.
const tickEvery = 10 * time.Millisecond

// patience bounds every wait for an event in these tests.
const patience = 20 * time.Second

var bin string // the tenure binary

func TestMain(m *testing.M) {
	if h := os.Getenv(helperEnv); h != "" {
		os.Exit(helper(h))
	}
	// Orphans of a tenure that a test kills come to us, not to whatever
	// subreaper runs the tests (which may not expect them); the test that
	// kills tenure reaps them by pid.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintln(os.Stderr, "become a child subreaper:", err)
		os.Exit(2)
	}
	dir, err := os.MkdirTemp("", "tenure-cli-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "make build directory:", err)
		os.Exit(2)
	}
	bin = filepath.Join(dir, "tenure")
	args := []string{"build", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, ".")...)
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build the tenure binary: %v\n%s", err, out)
		_ = os.RemoveAll(dir)
		os.Exit(2)
	}
	// testutil.VerifyTestMain takes no options; this is the same check with
	// the build directory removed afterwards.
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		_ = os.RemoveAll(dir)
		os.Exit(code)
	}))
}

// helper runs the helper command named h and returns its exit code.
//
// ticker ignores SIGTERM (so only SIGKILL ends it), opens the FIFO named by
// helperFIFO for writing and writes "tick UNIXNANO" to it every tickEvery
// for ever. Whoever reads the FIFO sees it end exactly when the ticker
// dies.
func helper(h string) int {
	if h != "ticker" {
		fmt.Fprintf(os.Stderr, "unknown helper %q\n", h)
		return 2
	}
	signal.Ignore(syscall.SIGTERM)
	f, err := os.OpenFile(os.Getenv(helperFIFO), os.O_WRONLY, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, "ticker:", err)
		return 2
	}
	for {
		if _, err := fmt.Fprintf(f, "tick %d\n", time.Now().UnixNano()); err != nil {
			fmt.Fprintln(os.Stderr, "ticker:", err)
			return 2
		}
		time.Sleep(tickEvery) // The ticker's own pace, not a synchronisation.
	}
}

// proc is a tenure process started by a test.
type proc struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *lines
	stderr *lines
	exited chan struct{}
	code   int
}

// testEnv is the environment every tenure process starts from: the test's,
// without TENURE_* and with a state directory of the test's own, so no test
// touches the user's default store.
func testEnv(t *testing.T, extra ...string) []string {
	t.Helper()
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TENURE_") && !strings.HasPrefix(kv, "XDG_STATE_HOME=") {
			env = append(env, kv)
		}
	}
	env = append(env, "XDG_STATE_HOME="+t.TempDir(), "TENURE_BIN="+bin)
	if raceEnabled {
		// A race-enabled binary sleeps a second before exiting, by
		// default, in case another goroutine is about to report a race.
		env = append(env, "GORACE=atexit_sleep_ms=0")
	}
	return append(env, extra...)
}

// start runs tenure with args and env. Its standard input is a pipe the
// test closes with closeStdin; its output is collected line by line.
func start(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	return startCmd(t, env, exec.Command(bin, args...))
}

// startCmd is start for a command that runs tenure (such as unshare).
func startCmd(t *testing.T, env []string, cmd *exec.Cmd) *proc {
	t.Helper()
	args := cmd.Args[1:]
	cmd.Env = env
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	p := &proc{t: t, cmd: cmd, stdin: stdin, exited: make(chan struct{})}
	p.stdout = collect(t, cmd, &cmd.Stdout)
	p.stderr = collect(t, cmd, &cmd.Stderr)
	p.stdout.peer = p.stderr
	p.stdout.status = p.status
	require.NoError(t, cmd.Start())
	p.stdout.started()
	p.stderr.started()
	go func() {
		err := cmd.Wait()
		p.code = cmd.ProcessState.ExitCode()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			p.code = 128 + int(ws.Signal())
		}
		_ = err // The exit code says it all.
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			// tenure's command leads a process group of its own: end it
			// too, or it would outlive the test.
			groups := childGroups(cmd.Process.Pid)
			_ = cmd.Process.Kill()
			for _, g := range groups {
				_ = syscall.Kill(-g, syscall.SIGKILL)
			}
			<-p.exited
			t.Errorf("tenure %s was still running at the end of the test; stderr:\n%s", strings.Join(args, " "), p.stderr.all())
		}
		p.stdout.stop()
		p.stderr.stop()
	})
	return p
}

// childGroups returns the process groups of the children of pid, read
// from /proc.
func childGroups(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var groups []int
	for _, e := range entries {
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...; comm may hold spaces and ')'.
		i := strings.LastIndexByte(string(stat), ')')
		if i < 0 {
			continue
		}
		var state string
		var ppid, pgrp int
		if _, err := fmt.Sscan(string(stat[i+1:]), &state, &ppid, &pgrp); err == nil && ppid == pid {
			groups = append(groups, pgrp)
		}
	}
	return groups
}

// run runs tenure to completion and returns its exit code.
func run(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	p := start(t, env, args...)
	p.closeStdin()
	p.wait()
	// The exit can be seen before the reader has read the pipes to their
	// end: read on until it has, unless a process the command left behind
	// holds a pipe open.
	p.stdout.drain()
	p.stderr.drain()
	return p
}

func (p *proc) closeStdin() {
	p.t.Helper()
	require.NoError(p.t, p.stdin.Close())
}

// wait waits for the process to exit and returns its exit code.
func (p *proc) wait() int {
	p.t.Helper()
	select {
	case <-p.exited:
		return p.code
	case <-time.After(patience):
		p.t.Fatalf("tenure did not exit within %s; stderr:\n%s", patience, p.stderr.all())
	}
	return 0
}

// status says how the process ended, waiting a little for its end: the
// output may end just before the exit is seen.
func (p *proc) status() string {
	select {
	case <-p.exited:
		return fmt.Sprintf("tenure exited with status %d", p.code)
	case <-time.After(2 * time.Second):
		return "tenure is still running"
	}
}

func (p *proc) signal(sig syscall.Signal) {
	p.t.Helper()
	require.NoError(p.t, p.cmd.Process.Signal(sig))
}

// lines collects what a process writes to one of its outputs and lets a
// test wait for a line. The process writes to the write end of an OS pipe
// of our own, so Wait never waits for a reader.
type lines struct {
	t      *testing.T
	r, w   *os.File
	done   chan struct{}
	mu     sync.Mutex
	got    []string
	notify chan struct{}
	peer   *lines        // the process's other output, shown when a wait fails
	status func() string // how the process ended, shown when a wait fails
}

// context is what a failed wait shows besides this output: the other one.
func (l *lines) context() string {
	var s string
	if l.status != nil {
		s = "\n" + l.status()
	}
	if l.peer == nil {
		return s
	}
	return s + "\nthe other output (stderr) was:\n" + l.peer.all()
}

func collect(t *testing.T, cmd *exec.Cmd, dst *io.Writer) *lines {
	t.Helper()
	r, w, err := os.Pipe()
	require.NoError(t, err)
	*dst = w
	l := &lines{t: t, r: r, w: w, done: make(chan struct{}), notify: make(chan struct{}, 1)}
	return l
}

// started closes our copy of the write end and starts reading.
func (l *lines) started() {
	_ = l.w.Close() // The child has its own copy.
	go func() {
		defer close(l.done)
		sc := bufio.NewScanner(l.r)
		for sc.Scan() {
			l.mu.Lock()
			l.got = append(l.got, sc.Text())
			l.mu.Unlock()
			select {
			case l.notify <- struct{}{}:
			default:
			}
		}
	}()
}

// drain waits until the reader has read the pipe to its end, at most a
// few seconds: a process the command left behind may hold it open.
func (l *lines) drain() {
	t := time.NewTimer(5 * time.Second)
	defer t.Stop()
	select {
	case <-l.done:
	case <-t.C:
	}
}

// stop ends the reader even if a grandchild still holds the pipe.
func (l *lines) stop() {
	_ = l.r.Close()
	<-l.done
}

func (l *lines) all() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.got, "\n")
}

// await waits for a line matching re and returns its submatches.
func (l *lines) await(re string) []string {
	l.t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.NewTimer(patience)
	defer deadline.Stop()
	for {
		l.mu.Lock()
		for _, s := range l.got {
			if m := rx.FindStringSubmatch(s); m != nil {
				l.mu.Unlock()
				return m
			}
		}
		l.mu.Unlock()
		select {
		case <-l.notify:
		case <-l.done:
			// One last look: the line may have come with the end.
			l.mu.Lock()
			for _, s := range l.got {
				if m := rx.FindStringSubmatch(s); m != nil {
					l.mu.Unlock()
					return m
				}
			}
			got := strings.Join(l.got, "\n")
			l.mu.Unlock()
			l.t.Fatalf("output ended without a line matching %q; it was:\n%s%s", re, got, l.context())
		case <-deadline.C:
			l.t.Fatalf("no line matching %q within %s; output so far:\n%s%s", re, patience, l.all(), l.context())
		}
	}
}

// ctxTimeout is a context for a test's own store calls.
func ctxTimeout(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	t.Cleanup(cancel)
	return ctx
}
