package cli

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestOnceRefusesBadInput: the window flags refuse what does not fit with
// one line and exit 64, and touch no store (the file named by --store is
// never created).
func TestOnceRefusesBadInput(t *testing.T) {
	t.Parallel()
	dbPath := filepath.Join(t.TempDir(), "untouched.db")
	// Checked once every subtest has run.
	db := "sqlite:" + dbPath
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"RetryAlone", []string{"run", "--name", "x", "--retry-failed", "--store", db, "--", "true"}, "--retry-failed needs --once-per or --window-key"},
		{"PeriodTooShort", []string{"run", "--name", "x", "--once-per", "10ms", "--store", db, "--", "true"}, "--once-per: window of \"x\": the period 10ms must be at least 1s"},
		{"PeriodNotWholeMillis", []string{"run", "--name", "x", "--once-per", "1s500us", "--store", db, "--", "true"}, "whole number of milliseconds"},
		{"KeyDerivedLooking", []string{"run", "--name", "x", "--window-key", "@1+1", "--store", db, "--", "true"}, "--window-key: window key \"@1+1\" starts with '@'"},
		{"KeyControl", []string{"run", "--name", "x", "--window-key", "a\nb", "--store", db, "--", "true"}, "control character"},
		{"HeldExitCode", []string{"run", "--name", "x", "--once-per", "24h", "--held-exit-code", "0", "--store", db, "--", "true"}, "--held-exit-code does not apply with --once-per"},
		{"StoreWithoutWindows", []string{"run", "--name", "x", "--once-per", "24h", "--store", "always:idempotent in tests", "--", "true"}, "need a store that records windows"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o := cli(t, tc.args...)
			require.Equal(t, ExitUsage, o.code, o.stderr)
			require.Contains(t, o.stderr, tc.want)
			require.Empty(t, o.stdout, "nothing was run")
		})
	}
	t.Cleanup(func() {
		_, err := os.Stat(dbPath)
		require.ErrorIs(t, err, os.ErrNotExist, "no store was touched")
	})
}
