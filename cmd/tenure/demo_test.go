package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// demoPatience bounds the demo: two scenes of a few seconds each, under
// the race detector on a loaded machine.
const demoPatience = 2 * time.Minute

// TestDemo runs `tenure demo` as a newcomer would and checks its verdict.
func TestDemo(t *testing.T) {
	t.Parallel()
	p := start(t, testEnv(t), "demo")
	p.closeStdin()
	select {
	case <-p.exited:
	case <-time.After(demoPatience):
		t.Fatalf("tenure demo did not finish within %s; output so far:\n%s\n%s", demoPatience, p.stdout.all(), p.stderr.all())
	}
	out := p.stdout.rest()
	t.Log("\n" + out)
	require.Equal(t, 0, p.code, "stderr:\n%s", p.stderr.rest())
	require.Empty(t, p.stderr.rest())
	require.Contains(t, out, "with fencing:    run 1 charged 1 time(s) (as expected)")
	require.Contains(t, out, "without fencing: run 1 charged 2 time(s) (as expected)")
	require.Contains(t, out, "REFUSED by the fence")
	require.Contains(t, out, "strict fence:    run 1 charged 1 time(s) (as expected)")
	require.Contains(t, out, "token fence:     run 1 charged 2 time(s) (as expected)")
}

// TestDemoWorkerIsHidden checks that the demo's worker command is not
// offered to users but is documented as internal.
func TestDemoWorkerIsHidden(t *testing.T) {
	t.Parallel()
	h := run(t, testEnv(t), "help")
	require.Equal(t, 0, h.code)
	help := h.stdout.rest()
	require.Contains(t, help, "tenure demo [--scene all|pause|clone] [--ttl 2s]")
	require.NotContains(t, help, "demo-worker")
	w := run(t, testEnv(t), "help", "demo-worker")
	require.Equal(t, 0, w.code)
	require.Contains(t, w.stdout.rest(), "internal to tenure demo")
	bad := run(t, testEnv(t), "demo-worker")
	require.Equal(t, 64, bad.code)
	require.Contains(t, bad.stderr.rest(), "--db and --id are required")
}
