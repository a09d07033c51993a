package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReleaseBuild runs scripts/release's build step for this machine's
// platform twice, into two directories, and checks that the two binaries
// are the same bytes, that SHA256SUMS lists the binary's hash, and that
// the binary reports the version it was built for and its commit.
func TestReleaseBuild(t *testing.T) {
	t.Parallel()
	const version = "v0.0.0"
	platform := runtime.GOOS + "/" + runtime.GOARCH
	name := fmt.Sprintf("tenure-%s-%s-%s", version, runtime.GOOS, runtime.GOARCH)
	script, err := filepath.Abs("../../scripts/release")
	require.NoError(t, err)

	build := func() (binary string, sums []byte) {
		dist := t.TempDir()
		cmd := exec.CommandContext(t.Context(), script, "--build", version, platform)
		cmd.Env = append(os.Environ(), "DIST="+dist)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "scripts/release --build:\n%s", out)
		sums, err = os.ReadFile(filepath.Join(dist, "SHA256SUMS"))
		require.NoError(t, err)
		return filepath.Join(dist, name), sums
	}
	first, sums := build()
	second, sums2 := build()

	a, err := os.ReadFile(first)
	require.NoError(t, err)
	b, err := os.ReadFile(second)
	require.NoError(t, err)
	require.True(t, bytes.Equal(a, b), "two builds of one commit differ: %s and %s", first, second)
	require.Equal(t, sums, sums2)
	sum := sha256.Sum256(a)
	require.Equal(t, hex.EncodeToString(sum[:])+"  "+name+"\n", string(sums))

	out, err := exec.CommandContext(t.Context(), first, "version").Output()
	require.NoError(t, err)
	require.Regexp(t, `^tenure `+version+` \(commit [0-9a-f]{12}(-dirty)?, \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\) go\S+ `+platform+"\n$", string(out))
}
