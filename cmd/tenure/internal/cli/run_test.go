package cli

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/cmd/tenure/internal/supervise"
)

// TestRunSpeaksThePolicy: the words run and its policy share mean the same
// on both sides: the exit code of a lost tenure, the control socket's
// operations and the revoke signal.
func TestRunSpeaksThePolicy(t *testing.T) {
	t.Parallel()
	require.Equal(t, ExitLost, supervise.ExitLost)
	require.Equal(t, opProgress, supervise.OpProgress)
	require.Equal(t, opRevoke, supervise.OpRevoke)
	require.Equal(t, "release", supervise.OpRelease)
	require.Equal(t, RevokeSignal, supervise.RevokeSignal)
}
