package main

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"

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
