package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// patience bounds the demo: two scenes of a few seconds each, on a loaded
// machine.
const patience = 2 * time.Minute

// linked lists the modules this program may link. The demo is README's
// first command: whatever else it links, a newcomer compiles before the
// story starts.
var linked = map[string]bool{
	"github.com/tenure-dev/tenure":                   true,
	"github.com/tenure-dev/tenure/cmd":               true,
	"github.com/tenure-dev/tenure/store/sqlitestore": true,
	"modernc.org/sqlite":                             true, // the embedded store's driver, and what it needs:
	"modernc.org/libc":                               true,
	"modernc.org/mathutil":                           true,
	"modernc.org/memory":                             true,
	"github.com/dustin/go-humanize":                  true,
	"github.com/google/uuid":                         true,
	"github.com/remyoudompheng/bigfft":               true,
	"golang.org/x/sys":                               true,
}

// TestLinksTheEmbeddedStoreAlone checks that the program links no
// module beyond tenure, the SQLite store and its driver: no other
// backend's client.
func TestLinksTheEmbeddedStoreAlone(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{with .Module}}{{.Path}}{{end}}", ".").Output()
	require.NoError(t, err, "go list")
	for m := range strings.FieldsSeq(string(out)) {
		require.True(t, linked[m], "the demo links module %s: a newcomer's first run compiles it; keep other backends out of cmd/tenure/internal/demo", m)
	}
}

// build compiles the program into a new temporary directory.
func build(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "demo")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "go build:\n%s", out)
	return bin
}

// TestDemo plays both stories as README's first command does and checks
// the verdict and the exit code.
func TestDemo(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	cmd := exec.Command(build(t))
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		require.NoError(t, err, "stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	case <-time.After(patience):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("the demo did not finish within %s; it said:\n%s\n%s", patience, stdout.String(), stderr.String())
	}
	out := stdout.String()
	require.Empty(t, stderr.String())
	require.Contains(t, out, "with fencing:    run 1 charged 1 time(s) (as expected)")
	require.Contains(t, out, "without fencing: run 1 charged 2 time(s) (as expected)")
	require.Contains(t, out, "strict fence:    run 1 charged 1 time(s) (as expected)")
	require.Contains(t, out, "token fence:     run 1 charged 2 time(s) (as expected)")
	entries, err := os.ReadDir(tmp)
	require.NoError(t, err)
	require.Empty(t, entries, "the demo removes its files")
}

// TestBadFlag checks that a bad flag exits 64 and plays nothing.
func TestBadFlag(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(build(t), "--scene", "nope")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	require.Equal(t, 64, exit.ExitCode())
	require.Contains(t, string(out), `--scene "nope" is not a scene; use pause, clone or all`)
}

// TestInterrupted checks that SIGINT in the middle of a story stops it:
// the demo stops its workers, removes its files and exits 130, as tenure
// demo does.
func TestInterrupted(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	cmd := exec.Command(build(t), "--scene", "pause")
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	first := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(stdout)
		if s.Scan() {
			first <- s.Text()
		}
		for s.Scan() {
		}
		close(first)
	}()
	select {
	case line := <-first:
		require.Contains(t, line, "tenure demo:")
	case <-time.After(patience):
		_ = cmd.Process.Kill()
		t.Fatalf("the demo printed nothing within %s", patience)
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	err = cmd.Wait()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	require.Equal(t, 130, exit.ExitCode())
	entries, err := os.ReadDir(tmp)
	require.NoError(t, err)
	require.Empty(t, entries, "an interrupted demo removes its files")
}
