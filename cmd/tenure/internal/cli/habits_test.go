package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestHabitsRefuseBadInput checks that the flags and commands for
// operators' habits refuse bad input with one line and exit 64, and that
// nothing was touched: the store file named by --store is never created.
func TestHabitsRefuseBadInput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "untouched.db")
	db := "sqlite:" + dbPath
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"HeldExitCodeTooHigh", []string{"run", "--name", "x", "--held-exit-code", "126", "--store", db, "--", "true"}, `"126" is not an exit code from 0 to 125`},
		{"HeldExitCodeNegative", []string{"run", "--name", "x", "--held-exit-code", "-1", "--store", db, "--", "true"}, `"-1" is not an exit code`},
		{"HeldExitCodeGarbage", []string{"run", "--name", "x", "--held-exit-code", "ok", "--store", db, "--", "true"}, `"ok" is not an exit code`},
		{"HeldExitCodeWithWait", []string{"run", "--name", "x", "--wait", "--held-exit-code", "0", "--store", db, "--", "true"}, "--held-exit-code applies only without --wait"},
		{"JSONDirectory", []string{"run", "--name", "x", "--json", dir, "--store", db, "--", "true"}, "is a directory"},
		{"JSONNoDirectory", []string{"run", "--name", "x", "--json", filepath.Join(dir, "no", "such", "out.json"), "--store", db, "--", "true"}, "cannot write in the directory"},
		{"ProgressTimeoutGarbage", []string{"run", "--name", "x", "--progress-timeout", "5", "--store", db, "--", "true"}, `"5" is not a duration`},
		{"ProgressArgument", []string{"progress", "now"}, "takes no arguments"},
		{"RevokeInheritedArgument", []string{"revoke-inherited", "now"}, "takes no arguments"},
		{"RevokeInheritedEmptyPath", []string{"revoke-inherited", "--remove", ""}, "the path is empty"},
		{"DoctorBadLabel", []string{"doctor", "--label", "a\x01b", "--store", db}, "--label"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o := cli(t, tc.args...)
			require.Equal(t, ExitUsage, o.code, o.stderr)
			requireOneLine(t, o)
			require.Contains(t, o.stderr, tc.want)
			require.Empty(t, o.stdout)
		})
	}
	t.Run("OutsideARun", func(t *testing.T) {
		t.Parallel()
		o := cliEnv(t, nil, "progress")
		require.Equal(t, ExitUsage, o.code, o.stderr)
		requireOneLine(t, o)
		require.Contains(t, o.stderr, "TENURE_RUN_CONTROL is not set: run it from the command of `tenure run`")
		o = cliEnv(t, nil, "revoke-inherited")
		require.Equal(t, ExitUsage, o.code, o.stderr)
		requireOneLine(t, o)
		require.Contains(t, o.stderr, "nothing to do: give --remove PATH")
	})
	t.Run("RunEnded", func(t *testing.T) {
		t.Parallel()
		gone := filepath.Join(t.TempDir(), "control")
		o := cliEnv(t, map[string]string{EnvControl: gone, EnvLease: "x", EnvHolder: "h/i", EnvToken: "3"}, "progress")
		require.Equal(t, ExitUnavailable, o.code, o.stderr)
		requireOneLine(t, o)
		require.Contains(t, o.stderr, "is the tenure run that started this command still running?")
	})
	_, err := os.Stat(dbPath)
	require.ErrorIs(t, err, os.ErrNotExist, "a refused command created the store")
}

// TestRevokeInheritedRemovesFiles checks revoke-inherited's rule for
// --remove: files and symbolic links (the link, never its target) are
// removed, a missing file is fine, and a directory refuses the whole
// call before anything is removed.
func TestRevokeInheritedRemovesFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	marker := filepath.Join(dir, "leader.marker")
	target := filepath.Join(dir, "node-id.real")
	link := filepath.Join(dir, "node-id")
	sub := filepath.Join(dir, "state")
	require.NoError(t, os.WriteFile(marker, []byte("leader\n"), 0o644))
	require.NoError(t, os.WriteFile(target, []byte("node-7\n"), 0o644))
	require.NoError(t, os.Symlink(target, link))
	require.NoError(t, os.Mkdir(sub, 0o755))

	o := cliEnv(t, nil, "revoke-inherited", "--remove", marker, "--remove", sub)
	require.Equal(t, ExitUsage, o.code, o.stderr)
	requireOneLine(t, o)
	require.Contains(t, o.stderr, sub+" is a directory")
	require.Contains(t, o.stderr, "nothing was removed")
	require.FileExists(t, marker)

	missing := filepath.Join(dir, "never-written")
	o = cliEnv(t, nil, "revoke-inherited", "--remove", marker, "--remove", link, "--remove", missing)
	require.Equal(t, ExitOK, o.code, o.stderr)
	require.Empty(t, o.stderr)
	require.Equal(t, strings.Join([]string{"removed " + marker, "removed " + link, missing + " is absent already"}, "\n")+"\n", o.stdout)
	require.NoFileExists(t, marker)
	_, err := os.Lstat(link)
	require.ErrorIs(t, err, os.ErrNotExist)
	got, err := os.ReadFile(target)
	require.NoError(t, err)
	require.Equal(t, "node-7\n", string(got), "the link's target was touched")
	require.DirExists(t, sub)
}
