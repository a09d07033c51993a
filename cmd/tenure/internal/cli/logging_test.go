package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestGlobalFlagsRefuseBadInput(t *testing.T) {
	t.Parallel()
	db := sqliteURL(t)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"BadFormatFirst", []string{"--log-format", "xml", "version"}, `invalid value "xml" for flag --log-format: "xml" is not a log format; use json or text (see ` + "`tenure help`)"},
		{"BadFormatEquals", []string{"--log-format=yaml", "status", "--store", db}, `"yaml" is not a log format; use json or text`},
		{"BadFormatAfterCommand", []string{"run", "--log-format", "xml", "--name", "x", "--store", db, "--", "true"}, `run: invalid value "xml" for flag --log-format`},
		{"FormatWithoutValue", []string{"--log-format"}, "flag needs an argument: --log-format"},
		{"BadVerbose", []string{"-v=loud", "version"}, `invalid boolean value "loud" for -v`},
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
}

func TestGlobalFlagsLeaveCommandsAlone(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"-v", "version"}, {"--log-format", "json", "version"}, {"--log-format=text", "-v", "--version"}} {
		o := cli(t, args...)
		require.Equal(t, ExitOK, o.code, o.stderr)
		require.Regexp(t, `^tenure \S+ \(commit [^)]+\) go`, o.stdout)
		require.Empty(t, o.stderr)
	}
	o := cli(t, "-v")
	require.Equal(t, ExitUsage, o.code, "global flags alone are no command")
	require.Contains(t, o.stderr, "no command given")
	o = cli(t, "help")
	require.Contains(t, o.stdout, "--log-format FORMAT")
	o = cli(t, "help", "run")
	require.Contains(t, o.stdout, "--log-format FORMAT")
	require.Contains(t, o.stdout, "  --v\n")
}

func TestRunLogsWithVerbose(t *testing.T) {
	t.Parallel()
	t.Run("JSON", func(t *testing.T) {
		t.Parallel()
		db := sqliteURL(t)
		o := cli(t, "-v", "--log-format", "json", "run", "--name", "job", "--label", "cron", "--store", db, "--", "true")
		require.Equal(t, ExitOK, o.code, o.stderr)
		var msgs []string
		var acquired, supervising map[string]any
		for _, line := range strings.Split(strings.TrimSpace(o.stderr), "\n") {
			var rec map[string]any
			require.NoError(t, json.Unmarshal([]byte(line), &rec), "every line is JSON: %s", line)
			msgs = append(msgs, rec["msg"].(string))
			switch rec["msg"] {
			case "lease acquired":
				acquired = rec
			case "supervising the command":
				supervising = rec
			}
		}
		require.Equal(t, []string{"lease acquired", "supervising the command", "lease released"}, msgs)
		require.Equal(t, "the command's process group and subtree", supervising["tracked_by"],
			"run inside a test binary is not the whole process: no subreaper")
		require.Positive(t, supervising["watchdog_pid"])
		require.Equal(t, "INFO", acquired["level"])
		require.Equal(t, "job", acquired["lease"])
		require.EqualValues(t, 1, acquired["token"])
		require.Equal(t, "sqlitestore", acquired["store"])
		require.Regexp(t, `^cron/`, acquired["holder"])
	})
	t.Run("TextAfterTheCommand", func(t *testing.T) {
		t.Parallel()
		db := sqliteURL(t)
		o := cli(t, "run", "-v", "--name", "job", "--store", db, "--", "true")
		require.Equal(t, ExitOK, o.code, o.stderr)
		require.Regexp(t, `level=INFO msg="lease acquired" store=sqlitestore lease=job token=1 holder=\S+`, o.stderr)
		require.Contains(t, o.stderr, `msg="lease released" store=sqlitestore lease=job token=1`)
		require.Contains(t, o.stderr, "reason=released")
	})
	t.Run("QuietWithoutVerbose", func(t *testing.T) {
		t.Parallel()
		db := sqliteURL(t)
		o := cli(t, "--log-format", "json", "run", "--name", "job", "--store", db, "--", "true")
		require.Equal(t, ExitOK, o.code, o.stderr)
		require.Empty(t, o.stderr, "acquisitions are info: not logged at the default level")
	})
}

// TestVerboseRunKeepsStderrAFile checks that with a file as standard error
// the log lines and the command's own output land in that file, the
// command writing to it directly.
func TestVerboseRunKeepsStderrAFile(t *testing.T) {
	t.Parallel()
	db := sqliteURL(t)
	f, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	require.NoError(t, err)
	defer f.Close()
	var stdout bytes.Buffer
	code := Main(context.Background(), []string{"-v", "run", "--name", "job", "--store", db, "--",
		"sh", "-c", `[ "$(readlink /proc/self/fd/2)" = "$0" ] && echo child-writes-to-the-file >&2`, f.Name()}, &stdout, f)
	require.Equal(t, ExitOK, code)
	got, err := os.ReadFile(f.Name())
	require.NoError(t, err)
	require.Contains(t, string(got), `msg="lease acquired"`)
	require.Contains(t, string(got), "child-writes-to-the-file")
	require.Contains(t, string(got), `msg="lease released"`)
}
