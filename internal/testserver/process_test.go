package testserver_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/testserver"
	"github.com/tenure-dev/tenure/internal/testutil"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

func sh(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("sh")
	require.NoError(t, err)
	return bin
}

func TestBinarySaysHowToGetOne(t *testing.T) {
	t.Setenv("TENURE_TEST_NO_SUCH_BIN", "/nonexistent/server")
	_, err := testserver.Binary("TENURE_TEST_NO_SUCH_BIN", "server", "tools/server/ensure.sh builds one")
	require.ErrorContains(t, err, `TENURE_TEST_NO_SUCH_BIN names "/nonexistent/server"`)
	require.ErrorContains(t, err, "tools/server/ensure.sh builds one")

	t.Setenv("TENURE_TEST_NO_SUCH_BIN", "")
	_, err = testserver.Binary("TENURE_TEST_NO_SUCH_BIN", "tenure-no-such-server", "tools/server/ensure.sh builds one")
	require.ErrorContains(t, err, "no tenure-no-such-server binary: set TENURE_TEST_NO_SUCH_BIN to one or put tenure-no-such-server on PATH (tools/server/ensure.sh builds one)")
}

func TestFreePortsDiffer(t *testing.T) {
	t.Parallel()
	ports, err := testserver.FreePorts(4)
	require.NoError(t, err)
	seen := map[int]bool{}
	for _, p := range ports {
		require.False(t, seen[p], "port %d twice in %v", p, ports)
		seen[p] = true
	}
}

func TestOnFreePortsRetriesThenReportsEveryFailure(t *testing.T) {
	t.Parallel()
	calls := 0
	_, err := testserver.OnFreePorts(t.Context(), 2, func(ports []int) (int, error) {
		require.Len(t, ports, 2)
		calls++
		return 0, errors.New("taken")
	})
	require.Equal(t, 3, calls)
	require.ErrorContains(t, err, "taken\ntaken\ntaken")
}

func TestStartReportsAnExitWithTheLog(t *testing.T) {
	t.Parallel()
	dir := t.TempDir() + "/data"
	require.NoError(t, os.Mkdir(dir, 0o755))
	_, err := testserver.Start(t.Context(), testserver.Config{
		Name: "fake", Bin: sh(t), Args: []string{"-c", "echo cannot bind; exit 3"}, Dir: dir,
		Ready: func(context.Context) error { return errors.New("no answer") },
	})
	require.ErrorContains(t, err, "exited (exit status 3) before it was ready: no answer")
	require.ErrorContains(t, err, "its log ends:\ncannot bind")
	require.NoDirExists(t, dir, "a failed start removes the data directory")
}

func TestStartGivesUpOnAForeignServer(t *testing.T) {
	t.Parallel()
	dir := t.TempDir() + "/data"
	require.NoError(t, os.Mkdir(dir, 0o755))
	_, err := testserver.Start(t.Context(), testserver.Config{
		Name: "fake", Bin: sh(t), Args: []string{"-c", "exec sleep 600"}, Dir: dir,
		Ready: func(context.Context) error { return testserver.ErrForeign },
	})
	require.ErrorIs(t, err, testserver.ErrForeign)
}

func TestKillRestartStop(t *testing.T) {
	t.Parallel()
	dir := t.TempDir() + "/data"
	require.NoError(t, os.Mkdir(dir, 0o755))
	// The server appends a line to its data at every start, then waits
	// for a child of its process group.
	runs := 1 // the server is ready once it has appended its line
	p, err := testserver.Start(t.Context(), testserver.Config{
		Name: "fake", Bin: sh(t), Args: []string{"-c", "echo run >> data; sleep 600 & wait"}, Dir: dir,
		Ready: func(context.Context) error {
			b, err := os.ReadFile(dir + "/data")
			if err == nil && strings.Count(string(b), "\n") != runs {
				err = errors.New("not yet")
			}
			return err
		},
	})
	require.NoError(t, err)
	p.Kill()
	p.Kill()
	runs = 2
	require.NoError(t, p.Restart(t.Context()))
	b, err := os.ReadFile(dir + "/data")
	require.NoError(t, err)
	require.Equal(t, "run\nrun\n", string(b), "a restart keeps the data")
	require.NoError(t, p.Stop())
	require.NoError(t, p.Stop())
	require.NoDirExists(t, dir)
}

// A restart whose server is killed while it waits for it to be ready
// fails, and ends only its own run: a restart begun after that kill runs
// on. A late cleanup of the first once killed the second's server, and a
// chaos cell with restarts close together lost its server for good.
func TestFailedRestartSparesTheNextRestartsServer(t *testing.T) {
	t.Parallel()
	dir := t.TempDir() + "/data"
	require.NoError(t, os.Mkdir(dir, 0o755))
	pids := func() []string {
		b, err := os.ReadFile(dir + "/pids")
		if err != nil {
			return nil
		}
		return strings.Fields(string(b))
	}
	// phase is what the probes answer for: the start (ready once its run
	// wrote its pid), the first restart (its probe hangs until its
	// context ends, then fails for good) or the second (ready once its run
	// wrote its pid, after the before runs' pids).
	var phase, before atomic.Int32
	probing := make(chan struct{})
	p, err := testserver.Start(t.Context(), testserver.Config{
		Name: "fake", Bin: sh(t), Args: []string{"-c", "echo $$ >> pids; exec sleep 600"}, Dir: dir,
		Ready: func(ctx context.Context) error {
			runs := 1
			switch phase.Load() {
			case 1:
				close(probing)
				<-ctx.Done()
				return fmt.Errorf("%w: the first restart's probe", testserver.ErrForeign)
			case 2:
				runs = int(before.Load()) + 1
			}
			if len(pids()) < runs {
				return errors.New("not started yet")
			}
			return nil
		},
	})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Stop()) })

	phase.Store(1)
	first := make(chan error, 1)
	go func() { first <- p.Restart(t.Context()) }()
	<-probing
	p.Kill() // the first restart's server, while its probe hangs
	before.Store(int32(len(pids())))
	phase.Store(2)
	require.NoError(t, p.Restart(t.Context()), "a second restart")
	require.ErrorIs(t, <-first, testserver.ErrForeign, "the first restart failed")

	all := pids()
	require.Len(t, all, int(before.Load())+1, "the second restart's run wrote its pid last")
	pid, err := strconv.Atoi(all[len(all)-1])
	require.NoError(t, err)
	require.NoError(t, syscall.Kill(pid, 0), "the second restart's server still runs")
}
