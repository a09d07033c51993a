package demo_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/cmd/tenure/internal/demo"
	"github.com/tenure-dev/tenure/internal/testutil"
)

const workerEnv = "TENURE_DEMO_TEST_WORKER"

// TestMain doubles as the demo's worker: the test re-executes its own
// binary with workerEnv set.
func TestMain(m *testing.M) {
	if os.Getenv(workerEnv) == "1" {
		os.Exit(demo.Worker(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
	}
	testutil.VerifyTestMain(m)
}

func TestDemoTellsTheStory(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	ok, err := demo.Run(t.Context(), demo.Config{Worker: []string{os.Args[0]}, Env: []string{workerEnv + "=1"}, Dir: t.TempDir()}, &out)
	t.Log("\n" + out.String())
	require.NoError(t, err)
	require.True(t, ok)
	require.Contains(t, out.String(), "with fencing:    run 1 charged 1 time(s) (as expected)")
	require.Contains(t, out.String(), "without fencing: run 1 charged 2 time(s) (as expected)")
	require.Contains(t, out.String(), "REFUSED by the fence")
	require.Contains(t, out.String(), "strict fence:    run 1 charged 1 time(s) (as expected)")
	require.Contains(t, out.String(), "token fence:     run 1 charged 2 time(s) (as expected)")
	require.Contains(t, out.String(), "A snapshot is a leader factory")
}

// TestDemoCloneScene plays the clone scene alone: two restored copies of
// one holder, one charge under the strict fence, two under the token
// fence.
func TestDemoCloneScene(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	ok, err := demo.Run(t.Context(), demo.Config{Worker: []string{os.Args[0]}, Env: []string{workerEnv + "=1"}, Dir: t.TempDir(), Scenes: []string{demo.SceneClone}}, &out)
	require.NoError(t, err)
	t.Log("\n" + out.String())
	require.True(t, ok)
	require.Contains(t, out.String(), "strict fence:    run 1 charged 1 time(s) (as expected)")
	require.Contains(t, out.String(), "token fence:     run 1 charged 2 time(s) (as expected)")
	require.Equal(t, 4, strings.Count(out.String(), "restored as worker-1/"), "each scene restores worker-1 twice")
	require.NotContains(t, out.String(), "SIGSTOP", "the pause scene is not played")
}

func TestDemoRefusesBadFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--ttl", "10ms"}, {"--ttl", "soon"}, {"extra"}, {"--scene", "both"}} {
		var stderr strings.Builder
		require.Equal(t, 64, demo.Main(t.Context(), args, nil, &strings.Builder{}, &stderr), "args %q", args)
		require.Contains(t, stderr.String(), "demo")
	}
}
