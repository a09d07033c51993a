package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRunGivesTheCommandTheTerminal runs tenure on a real terminal (a pty
// that script(1) makes, with tenure in its foreground): a command that
// reads the terminal gets what is typed. Were the command not made the
// terminal's foreground group, its read would stop it (SIGTTIN) for ever
// while its lease stayed held, and the test would time out.
func TestRunGivesTheCommandTheTerminal(t *testing.T) {
	t.Parallel()
	script, err := exec.LookPath("script")
	require.NoError(t, err, "script(1) (Debian's bsdutils) runs tenure on a terminal")
	s := sqliteStore(t)
	line := bin + ` run --name term --store ` + s.url + ` -- sh -c 'read x; echo "got:$x"'`
	ctx, cancel := context.WithTimeout(t.Context(), patience)
	defer cancel()
	cmd := exec.CommandContext(ctx, script, "-qefc", line, "/dev/null")
	cmd.Env = testEnv(t)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	_, err = stdin.Write([]byte("hello\n"))
	require.NoError(t, err)
	err = cmd.Wait()
	_ = stdin.Close()
	require.NoError(t, ctx.Err(), "the command never got its input: it was not the terminal's foreground group\n%s", out.String())
	require.NoError(t, err, out.String())
	require.Contains(t, strings.ReplaceAll(out.String(), "\r", ""), "got:hello\n")
}

// TestRunSuspendsWithItsCommand types ^Z and fg at an interactive shell on
// a real terminal while the command waits for input. The terminal stops
// the command (its group is the foreground one); tenure sees that, takes
// the terminal back and stops itself, so the shell reports the job stopped
// and the two stand still together. fg continues tenure, which gives the
// terminal back to the command, which then reads what is typed.
func TestRunSuspendsWithItsCommand(t *testing.T) {
	t.Parallel()
	script, err := exec.LookPath("script")
	require.NoError(t, err, "script(1) (Debian's bsdutils) runs a shell on a terminal")
	bash, err := exec.LookPath("bash")
	require.NoError(t, err, "an interactive bash does the job control")
	s := sqliteStore(t)
	pidFile := filepath.Join(t.TempDir(), "pid")
	ctx, cancel := context.WithTimeout(t.Context(), patience)
	defer cancel()
	cmd := exec.CommandContext(ctx, script, "-qefc", bash+" --norc --noprofile -i", "/dev/null")
	cmd.Env = testEnv(t, "HISTFILE=/dev/null", "PS1=$ ")
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = stdin.Close() })
	typeLine := func(s string) {
		t.Helper()
		_, err := stdin.Write([]byte(s))
		require.NoError(t, err)
	}

	typeLine(bin + ` run --name suspend --store ` + s.url + ` -- sh -c 'echo $$ > ` + pidFile + `; read x; echo "got:$x"'` + "\n")
	command := awaitPidFile(t, pidFile)
	tenure := parentOf(t, command)
	awaitForeground(t, command)
	typeLine("\x1a") // ^Z: the terminal's VSUSP character
	awaitState(t, command, 'T')
	awaitState(t, tenure, 'T')

	typeLine("fg\n")
	awaitForeground(t, command)
	typeLine("hello\nexit\n")
	err = cmd.Wait()
	require.NoError(t, ctx.Err(), "the command never read its input after fg\n%s", out.String())
	require.NoError(t, err, out.String())
	shown := strings.ReplaceAll(out.String(), "\r", "")
	require.Contains(t, shown, "Stopped", "the shell saw the job stop")
	require.Contains(t, shown, "got:hello\n")
}

// awaitPidFile waits until path holds a pid, and returns it.
func awaitPidFile(t *testing.T, path string) int {
	t.Helper()
	deadline := time.Now().Add(patience)
	for {
		b, _ := os.ReadFile(path)
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && strings.HasSuffix(string(b), "\n") {
			return pid
		}
		require.True(t, time.Now().Before(deadline), "no pid in %s", path)
		time.Sleep(10 * time.Millisecond) // polling a file, with a deadline
	}
}

// statFields returns the fields of /proc/PID/stat after the command name:
// state, parent, process group, session, terminal, foreground group, ...
func statFields(t *testing.T, pid int) []string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	require.NoError(t, err, "process %d is gone", pid)
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	require.Positive(t, i, "unreadable /proc/%d/stat: %q", pid, s)
	fields := strings.Fields(s[i+1:])
	require.GreaterOrEqual(t, len(fields), 6, "unreadable /proc/%d/stat: %q", pid, s)
	return fields
}

// procStat returns pid's state letter and parent.
func procStat(t *testing.T, pid int) (state byte, ppid int) {
	t.Helper()
	f := statFields(t, pid)
	return f[0][0], int(atoi(t, f[1]))
}

// procGroups returns pid's process group and its terminal's foreground
// process group.
func procGroups(t *testing.T, pid int) (group, foreground int) {
	t.Helper()
	f := statFields(t, pid)
	return int(atoi(t, f[2])), int(atoi(t, f[5]))
}

func parentOf(t *testing.T, pid int) int {
	t.Helper()
	_, ppid := procStat(t, pid)
	return ppid
}

// awaitForeground waits until pid runs (not stopped) in the terminal's
// foreground process group.
func awaitForeground(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for {
		state, _ := procStat(t, pid)
		group, fg := procGroups(t, pid)
		if state != 'T' && group == fg {
			return
		}
		require.True(t, time.Now().Before(deadline), "process %d (%c, group %d) is not running in the foreground group %d", pid, state, group, fg)
		time.Sleep(10 * time.Millisecond) // polling /proc, with a deadline
	}
}

// awaitState waits until pid's state is want ('T': stopped by a signal).
func awaitState(t *testing.T, pid int, want byte) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for {
		state, _ := procStat(t, pid)
		if state == want {
			return
		}
		require.True(t, time.Now().Before(deadline), "process %d is %c, not %c", pid, state, want)
		time.Sleep(10 * time.Millisecond) // polling /proc, with a deadline
	}
}
