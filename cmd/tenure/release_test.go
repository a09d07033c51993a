package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
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

// TestReleaseTagsOncePinned runs the release's first steps on a clone of
// this commit: scripts/release refuses to tag while the modules require
// each other at the placeholder version; after scripts/modules pin and a
// commit it prints the tags, the root module's group first.
func TestReleaseTagsOncePinned(t *testing.T) {
	t.Parallel()
	const version = "v0.1.0"
	top, err := filepath.Abs("../..")
	require.NoError(t, err)
	dir := filepath.Join(t.TempDir(), "tenure")
	git := func(args ...string) {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), "git", args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "git %v:\n%s", args, out)
	}
	clone := exec.CommandContext(t.Context(), "git", "clone", "--quiet", "--no-hardlinks", top, dir)
	out, err := clone.CombinedOutput()
	require.NoError(t, err, "git clone:\n%s", out)
	script := func(name string, args ...string) (string, error) {
		cmd := exec.CommandContext(t.Context(), filepath.Join(dir, "scripts", name), args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	out2, err := script("release", "--dry-run", "--libraries", version)
	require.Error(t, err, "release tagged modules that require each other at the placeholder:\n%s", out2)
	require.Contains(t, out2, "store/pgstore/go.mod requires github.com/tenure-dev/tenure v0.0.0-00010101000000-000000000000; make it "+version)

	out2, err = script("modules", "pin", "0.1")
	require.Error(t, err)
	require.Contains(t, out2, "pin needs a version vX.Y.Z")
	out2, err = script("modules", "pin", version)
	require.NoError(t, err, "scripts/modules pin:\n%s", out2)
	git("-c", "user.name=test", "-c", "user.email=test@localhost", "commit", "--quiet", "-am", "require "+version)

	out2, err = script("release", "--dry-run", "--libraries", version)
	require.NoError(t, err, "scripts/release after pin:\n%s", out2)
	pushes := regexp.MustCompile(`(?m)^\s*git push --atomic origin (.+)$`).FindAllStringSubmatch(out2, -1)
	require.NotEmpty(t, pushes, "no pushes printed:\n%s", out2)
	require.Contains(t, strings.Fields(pushes[0][1]), version, "the root module's tag comes in the first push:\n%s", out2)
	for _, p := range pushes {
		for _, tag := range strings.Fields(p[1]) {
			require.True(t, strings.HasSuffix(tag, version), "tag %s", tag)
			require.NotEqual(t, "cmd/"+version, tag, "--libraries tags the command's module")
		}
	}
}
