package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/store"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure"
	"github.com/tenure-dev/tenure/cmd/tenure/internal/storeopen"
	"github.com/tenure-dev/tenure/cmd/tenure/internal/storeurl"
	"github.com/tenure-dev/tenure/internal/testserver/etcdserver"
	"github.com/tenure-dev/tenure/internal/testserver/pgserver"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/registry"
	"github.com/tenure-dev/tenure/store/sqlitestore"
)

func TestMain(m *testing.M) {
	// The test binary is run's watchdog here (watchdogExe), and run, being
	// one of many in this process, watches the command's subtree only.
	if len(os.Args) == 3 && os.Args[1] == "run" && os.Args[2] == "--watchdog" {
		os.Exit(Main(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
	}
	wholeProcess = false
	watchdogExe = os.Args[0]
	testutil.VerifyTestMain(m)
}

type outcome struct {
	code           int
	stdout, stderr string
}

// cli runs Main with args and buffers; the environment is the test's, so
// every test names its store with --store.
func cli(t *testing.T, args ...string) outcome {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := Main(context.Background(), args, &stdout, &stderr)
	return outcome{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// cliEnv runs the command with the environment variables vars only.
func cliEnv(t *testing.T, vars map[string]string, args ...string) outcome {
	t.Helper()
	var stdout, stderr bytes.Buffer
	e := &env{
		stdin:   nil,
		stdout:  &stdout,
		stderr:  &stderr,
		getenv:  func(k string) string { return vars[k] },
		environ: func() []string { return nil },
	}
	code := e.main(context.Background(), args)
	return outcome{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// requireOneLine checks that stderr is exactly one "tenure: " line.
func requireOneLine(t *testing.T, o outcome) {
	t.Helper()
	require.Regexp(t, `^tenure: [^\n]+\n$`, o.stderr)
	require.NotContains(t, o.stderr, "goroutine ")
}

func sqliteURL(t *testing.T) string {
	t.Helper()
	return "sqlite:" + filepath.Join(t.TempDir(), "tenure.db")
}

func openSQLite(t *testing.T, url string) *sqlitestore.Store {
	t.Helper()
	st, err := sqlitestore.Open(context.Background(), strings.TrimPrefix(url, "sqlite:"), sqlitestore.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	return st
}

// acquire acquires name for h for a minute, which must succeed.
func acquire(t *testing.T, st store.Store, name string, h store.Holder) store.Grant {
	t.Helper()
	g, err := st.Acquire(context.Background(), store.AcquireParams{Name: name, Holder: h, TTL: time.Minute})
	require.NoError(t, err)
	return g
}

// get reads name's record, which must exist.
func get(t *testing.T, st store.Store, name string) store.Record {
	t.Helper()
	rec, err := st.Get(context.Background(), name)
	require.NoError(t, err)
	return rec
}

func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	db := sqliteURL(t)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"UnknownCommand", []string{"bogus"}, `unknown command "bogus"`},
		{"RunWithoutName", []string{"run", "--store", db, "--", "true"}, "--name is required"},
		{"RunWithoutCommand", []string{"run", "--name", "x", "--store", db}, "no command to run"},
		{"RunUnknownFlag", []string{"run", "--bogus", "--name", "x", "--", "true"}, "flag provided but not defined: --bogus"},
		{"RunFlagWithoutValue", []string{"run", "--name"}, "flag needs an argument: --name"},
		{"DurationWithoutUnit", []string{"run", "--name", "x", "--ttl", "5", "--", "true"}, `"5" is not a duration; write a number with a unit`},
		{"DurationGarbage", []string{"run", "--name", "x", "--grace", "soon", "--", "true"}, `"soon" is not a duration`},
		{"NegativeDuration", []string{"run", "--name", "x", "--ttl", "-1s", "--", "true"}, `"-1s" is negative`},
		{"ZeroTTL", []string{"run", "--name", "x", "--ttl", "0s", "--", "true"}, "--ttl must be positive"},
		{"TTLTooShort", []string{"run", "--name", "x", "--ttl", "100ms", "--store", db, "--", "true"}, "--ttl 100ms must be at least 500ms"},
		{"PayloadTooLong", []string{"run", "--name", "x", "--payload", strings.Repeat("p", 1025), "--", "true"}, "payload is 1025 bytes long; the maximum is 1024"},
		{"PayloadControl", []string{"run", "--name", "x", "--payload", "a\nb", "--", "true"}, `payload "a\nb" contains the control character U+000A`},
		{"GraceDoesNotFit", []string{"run", "--name", "x", "--ttl", "2s", "--grace", "10s", "--store", db, "--", "true"}, "--grace 10s leaves no time to renew"},
		{"GraceDoesNotFitDefaultTTL", []string{"run", "--name", "x", "--grace", "20s", "--store", db, "--", "true"}, "--grace 20s"},
		{"WaitTimeoutWithoutWait", []string{"run", "--name", "x", "--wait-timeout", "1s", "--", "true"}, "--wait-timeout needs --wait"},
		{"BadName", []string{"run", "--name", "a\x01b", "--", "true"}, "control character"},
		{"BadLabel", []string{"run", "--name", "x", "--label", strings.Repeat("l", 200), "--store", db, "--", "true"}, "label"},
		{"UnsupportedStore", []string{"run", "--name", "x", "--store", "mongodb://localhost", "--", "true"}, "not supported"},
		{"StoreWithoutScheme", []string{"status", "--store", "/var/lib/x.db"}, "sqlite:/var/lib/x.db"},
		{"StoreBadURLHidesPassword", []string{"status", "--store", "postgres://u:hunter22@h:port/db"}, "not a valid URL"},
		{"StatusBadInterval", []string{"status", "--watch", "--interval", "0s", "--store", db}, "--interval must be positive"},
		{"StatusBadName", []string{"status", "--store", db, "a\x7fb"}, "control character"},
		{"ReleaseNoName", []string{"release", "--store", db}, "takes one lease NAME"},
		{"ReleaseTwoNames", []string{"release", "--force", "a", "b", "--store", db}, "takes one lease NAME, got 2"},
		{"ReleaseNowWithoutForce", []string{"release", "--now", "a", "--store", db}, "--now goes with --force"},
		{"MigrateArgument", []string{"migrate", "now"}, "takes no arguments"},
		{"MigrateGrantWithoutPrint", []string{"migrate", "--grant", "app"}, "--grant and --grant-read need --print"},
		{"MigrateTokenFloorPrint", []string{"migrate", "--print", "--token-floor"}, "does not go with --print"},
		{"MigrateTokenFloorSQLite", []string{"migrate", "--token-floor", "--store", db}, "--token-floor is for PostgreSQL"},
		{"MigratePrintRedis", []string{"migrate", "--print", "--store", "redis://" + closedPort(t)}, "the Redis store keeps no schema"},
		{"MigrateGrantSQLite", []string{"migrate", "--print", "--grant", "app", "--store", db}, "no roles to grant"},
		{"AgentsOnSQLite", []string{"agents", "--store", db}, "lives in PostgreSQL, not in the SQLite store " + db},
		{"OwnerOnDefaultSQLite", []string{"owner", "sandbox-1"}, "lives in PostgreSQL, not in the SQLite store"},
		{"AgentsArgument", []string{"agents", "x", "--store", db}, "takes no arguments"},
		{"OwnerNoResource", []string{"owner", "--json", "--store", db}, "takes one RESOURCE, got 0"},
		{"OwnerBadResource", []string{"owner", "a\x01b", "--store", db}, "resource"},
		{"OwnerUnknownFlag", []string{"owner", "r", "--bogus"}, "flag provided but not defined: --bogus"},
		{"DemoArgument", []string{"demo", "now"}, "takes no arguments"},
		{"DemoStore", []string{"demo", "--store", db}, "flag provided but not defined: --store"},
		{"DemoTTLOutOfRange", []string{"demo", "--ttl", "10ms"}, "--ttl 10ms must be between 1s and 1m"},
		{"DemoBadScene", []string{"demo", "--scene", "both"}, `--scene "both" is not a story; use all, pause or clone`},
		{"DoctorArgument", []string{"doctor", "now"}, "takes no arguments"},
		{"DoctorBadTTL", []string{"doctor", "--ttl", "soon"}, "is not a duration"},
		{"VersionArgument", []string{"version", "x"}, "takes no arguments"},
		{"HelpUnknown", []string{"help", "bogus"}, `unknown command "bogus"`},
		{"HelpTwo", []string{"help", "run", "status"}, "at most one"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o := cli(t, tc.args...)
			require.Equal(t, ExitUsage, o.code, o.stderr)
			requireOneLine(t, o)
			require.Contains(t, o.stderr, tc.want)
			require.NotContains(t, o.stderr, "hunter22")
			require.Empty(t, o.stdout)
		})
	}

	t.Run("NoArguments", func(t *testing.T) {
		t.Parallel()
		o := cli(t)
		require.Equal(t, ExitUsage, o.code)
		require.Contains(t, o.stderr, "Usage:")
		require.True(t, strings.HasSuffix(o.stderr, "tenure: no command given (see `tenure help`)\n"), o.stderr)
	})
}

func TestHelp(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"help"}, {"--help"}, {"-h"}} {
		o := cli(t, args...)
		require.Equal(t, ExitOK, o.code)
		require.Empty(t, o.stderr)
		for _, want := range []string{"tenure run --name NAME", "tenure status", "tenure release NAME", "tenure migrate",
			"tenure agents [--json]", "tenure owner RESOURCE [--json]", "tenure demo [--scene all|pause|clone] [--ttl 2s]", "tenure doctor [--ttl 30s]",
			"Exit codes:", "\n  3 ", "\n  4 ", "79", "tenure_schema", "redis://", "etcd://", "consul://", "tenure_session_ttl_min"} {
			require.Contains(t, o.stdout, want)
		}
		require.NotContains(t, o.stdout, "demo-worker")
	}
	o := cli(t, "help", "demo-worker")
	require.Equal(t, ExitOK, o.code)
	require.Contains(t, o.stdout, "internal to tenure demo")
	o = cli(t, "help", "demo")
	require.Equal(t, ExitOK, o.code)
	require.Contains(t, o.stdout, "always uses SQLite files of its own")
	require.Contains(t, o.stdout, "--ttl duration (default 2s)")
	for _, args := range [][]string{{"help", "run"}, {"run", "-h"}, {"run", "--help"}} {
		o := cli(t, args...)
		require.Equal(t, ExitOK, o.code)
		require.Contains(t, o.stdout, "Usage: tenure run --name NAME")
		for _, flag := range []string{"--name NAME", "--ttl duration (default 30s)", "--wait", "--wait-timeout duration", "--label", "--grace duration", "--store URL"} {
			require.Contains(t, o.stdout, flag)
		}
	}
	for _, name := range commandNames() {
		o := cli(t, "help", name)
		require.Equal(t, ExitOK, o.code)
		require.Contains(t, o.stdout, "Usage: tenure "+name)
	}
}

// TestEverySchemeNamed: `tenure help` and the --store usage of every
// command that takes any store name every scheme a store URL may have.
func TestEverySchemeNamed(t *testing.T) {
	t.Parallel()
	names := func(text, scheme string) bool {
		return regexp.MustCompile(`(^|[^a-z])` + scheme + `:`).MatchString(text)
	}
	help := cli(t, "help").stdout
	for _, scheme := range storeurl.Schemes {
		require.True(t, names(help, scheme), "tenure help shows the %s URL form", scheme)
	}
	for _, name := range commandNames() {
		o := cli(t, "help", name)
		if !strings.Contains(o.stdout, "--store URL") || !names(o.stdout, "sqlite") {
			continue // no store, or a PostgreSQL store only (fence, agents, owner)
		}
		for _, scheme := range storeurl.Schemes {
			require.True(t, names(o.stdout, scheme), "tenure help %s: --store's usage shows %s", name, scheme)
		}
	}
}

func TestVersion(t *testing.T) {
	t.Parallel()
	o := cli(t, "version")
	require.Equal(t, ExitOK, o.code)
	require.Regexp(t, `^tenure \S+ \(commit [^)]+\) go\S+ \w+/\w+\n$`, o.stdout)
	require.Equal(t, o, cli(t, "--version"))
}

func TestExitCode(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want int
	}{
		{nil, ExitOK},
		{errors.New("boom"), ExitFailure},
		{usagef("run", "x"), ExitUsage},
		{fmt.Errorf("x: %w", store.ErrInvalid), ExitUsage},
		{fmt.Errorf("x: %w", store.ErrUnavailable), ExitUnavailable},
		{fmt.Errorf("x: %w", store.ErrClosed), ExitUnavailable},
		{fmt.Errorf("x: %w", store.ErrNotMigrated), ExitNotMigrated},
		{&store.HeldError{Name: "x"}, ExitNotAcquired},
		{&tenure.LostError{Name: "x"}, ExitLost},
		{&exitError{code: 42}, 42},
		{fmt.Errorf("wrapped: %w", &exitError{code: ExitLost, err: store.ErrUnavailable}), ExitLost},
	} {
		require.Equal(t, tc.want, exitCode(tc.err), "%v", tc.err)
	}
	require.Equal(t, "a: b", message(errors.New("tenure: tenure: a:\n\tb")))
}

func TestParseArgs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args         []string
		interspersed bool
		pos          []string
		json         bool
	}{
		{[]string{"a", "--json", "b"}, true, []string{"a", "b"}, true},
		{[]string{"--json", "a"}, true, []string{"a"}, true},
		{[]string{"a", "--", "--json"}, true, []string{"a", "--json"}, false},
		{[]string{"a", "--json"}, false, []string{"a", "--json"}, false},
		{[]string{"--json", "--", "cmd", "--x"}, false, []string{"cmd", "--x"}, true},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var json bool
		fs.BoolVar(&json, "json", false, "")
		pos, err := parseArgs(fs, tc.args, tc.interspersed)
		require.NoError(t, err)
		require.Equal(t, tc.pos, pos, "%q", tc.args)
		require.Equal(t, tc.json, json, "%q", tc.args)
	}
}

func TestRunOnSQLite(t *testing.T) {
	t.Parallel()

	t.Run("CommandGetsTokenAndExitStatusPassesThrough", func(t *testing.T) {
		t.Parallel()
		db := sqliteURL(t)
		o := cli(t, "run", "--name", "job", "--label", "cron", "--store", db, "--",
			"sh", "-c", `echo "$TENURE_LEASE $TENURE_TOKEN $TENURE_HOLDER $TENURE_STORE"; exit 3`)
		require.Equal(t, 3, o.code)
		require.Empty(t, o.stderr)
		require.Regexp(t, `^job 1 cron/[a-z2-7]{26} `+regexp.QuoteMeta(db)+"\n$", o.stdout)

		st := openSQLite(t, db)
		rec := get(t, st, "job")
		require.Equal(t, store.StateReleased, rec.State)
		require.EqualValues(t, 1, rec.Token)

		o = cli(t, "run", "--name", "job", "--store", db, "--", "sh", "-c", `echo $TENURE_TOKEN`)
		require.Equal(t, ExitOK, o.code)
		require.Equal(t, "2\n", o.stdout)
	})

	t.Run("HeldExits75NamingHolder", func(t *testing.T) {
		t.Parallel()
		db := sqliteURL(t)
		st := openSQLite(t, db)
		h := testutil.Holder(t, "other")
		g := acquire(t, st, "job", h)
		o := cli(t, "run", "--name", "job", "--store", db, "--", "sh", "-c", "echo ran")
		require.Equal(t, ExitNotAcquired, o.code)
		requireOneLine(t, o)
		require.Empty(t, o.stdout)
		require.Contains(t, o.stderr, fmt.Sprintf(`lease "job" is held by %s with token %d for another `, h, g.Token))
		require.Contains(t, o.stderr, "by the store's clock")

		o = cli(t, "run", "--name", "job", "--wait", "--wait-timeout", "200ms", "--store", db, "--", "sh", "-c", "echo ran")
		require.Equal(t, ExitNotAcquired, o.code)
		require.Empty(t, o.stdout)
		lines := strings.Split(strings.TrimSpace(o.stderr), "\n")
		require.Len(t, lines, 2, o.stderr)
		require.Contains(t, lines[0], "waiting for it")
		require.Contains(t, lines[1], fmt.Sprintf(`gave up waiting for lease "job" after --wait-timeout 200ms: it is held by %s with token %d`, h, g.Token))
	})

	t.Run("CommandNotFoundIs127", func(t *testing.T) {
		t.Parallel()
		db := sqliteURL(t)
		o := cli(t, "run", "--name", "job", "--store", db, "--", "/nonexistent/tenure-test-command")
		require.Equal(t, ExitNotFound, o.code)
		requireOneLine(t, o)
		require.Contains(t, o.stderr, "cannot start")
		// The lease was given back: the next run gets it at once.
		require.Equal(t, ExitOK, cli(t, "run", "--name", "job", "--store", db, "--", "true").code)
	})

	t.Run("CommandNotExecutableIs126", func(t *testing.T) {
		t.Parallel()
		db := sqliteURL(t)
		script := filepath.Join(t.TempDir(), "job.sh")
		require.NoError(t, os.WriteFile(script, []byte("#!/bin/sh\n"), 0o600))
		o := cli(t, "run", "--name", "job", "--store", db, "--", script)
		require.Equal(t, ExitCannotExec, o.code)
		requireOneLine(t, o)
	})
}

// TestRunPublishesPayload: run --payload publishes the text with the
// tenure, and status shows it (after the release too: the last tenure's).
func TestRunPublishesPayload(t *testing.T) {
	t.Parallel()
	db := sqliteURL(t)
	o := cli(t, "run", "--name", "job", "--payload", "10.0.0.7:8443 ünï", "--store", db, "--", "true")
	require.Equal(t, ExitOK, o.code, o.stderr)

	o = cli(t, "status", "--store", db)
	require.Equal(t, ExitOK, o.code, o.stderr)
	require.Regexp(t, `(?m)^job\s+released\s+.*\s+10\.0\.0\.7:8443 ünï$`, o.stdout)
	o = cli(t, "status", "--json", "--store", db)
	require.Equal(t, ExitOK, o.code, o.stderr)
	require.Contains(t, o.stdout, `"payload":"10.0.0.7:8443 ünï"`)
}

func TestStatusOnSQLite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := sqliteURL(t)

	o := cli(t, "status", "--store", db)
	require.Equal(t, ExitOK, o.code)
	require.Equal(t, "no leases\n", o.stdout)
	o = cli(t, "status", "--json", "--store", db)
	require.Equal(t, ExitOK, o.code)
	require.JSONEq(t, `{"leases":[]}`, o.stdout)

	st := openSQLite(t, db)
	h := testutil.Holder(t, "worker")
	g := acquire(t, st, "held", h)

	o = cli(t, "status", "--store", db)
	require.Equal(t, ExitOK, o.code, o.stderr)
	require.Regexp(t, `(?m)^NAME\s+STATE\s+HOLDER\s+TOKEN\s+ACQUIRED\s+EXPIRES IN\s+PAYLOAD$`, o.stdout)
	require.Regexp(t, `(?m)^held\s+held\s+`+regexp.QuoteMeta(h.String())+fmt.Sprintf(`\s+%d\s+\d{4}-\d\d-\d\dT\S+Z\s+\d`, g.Token), o.stdout)

	o = cli(t, "status", "held", "--json", "never", "--store", db) // flags after names
	require.Equal(t, ExitOK, o.code, o.stderr)
	var snap struct {
		Leases []map[string]any `json:"leases"`
	}
	require.NoError(t, json.Unmarshal([]byte(o.stdout), &snap))
	require.Len(t, snap.Leases, 2)
	held, never := snap.Leases[0], snap.Leases[1]
	require.Equal(t, "held", held["state"])
	require.Equal(t, h.String(), held["holder"])
	require.EqualValues(t, g.Token, held["token"])
	require.Greater(t, held["expires_in_ms"], float64(0))
	require.LessOrEqual(t, held["expires_in_ms"], float64(time.Minute.Milliseconds()))
	require.Equal(t, "absent", never["state"])
	require.Nil(t, never["acquired_at"])

	t.Run("Watch", func(t *testing.T) {
		t.Parallel()
		w := newLineWriter()
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		var stderr bytes.Buffer
		code := make(chan int, 1)
		go func() {
			code <- Main(wctx, []string{"status", "--watch", "--json", "--interval", "20ms", "--store", db, "held"}, w, &stderr)
		}()
		for range 3 {
			select {
			case line := <-w.lines:
				require.Contains(t, line, `"state":"held"`)
			case <-time.After(10 * time.Second):
				t.Fatal("status --watch printed no snapshot")
			}
		}
		cancel()
		select {
		case c := <-code:
			require.Equal(t, ExitOK, c, stderr.String())
		case <-time.After(10 * time.Second):
			t.Fatal("status --watch did not stop")
		}
	})
}

func TestReleaseOnSQLite(t *testing.T) {
	t.Parallel()

	t.Run("Force", func(t *testing.T) {
		t.Parallel()
		db := sqliteURL(t)
		st := openSQLite(t, db)
		h := testutil.Holder(t, "stuck")
		g := acquire(t, st, "job", h)

		o := cli(t, "release", "job", "--force", "--store", db)
		require.Equal(t, ExitOK, o.code, o.stderr)
		require.Contains(t, o.stdout, fmt.Sprintf("the renewal chain of its holder %s with token %d moved on", h, g.Token))
		rec := get(t, st, "job")
		require.Equal(t, store.StateHeld, rec.State, "the lease keeps its expiry")
		require.Greater(t, rec.Seq, g.Seq, "the holder's chain moved on")
		res, err := st.Renew(t.Context(), []store.RenewParams{{Name: "job", Holder: h, Token: g.Token, Seq: g.Seq, TTL: time.Minute}})
		require.NoError(t, err)
		require.False(t, res[0].Renewed, "the holder's next renewal fails")

		o = cli(t, "release", "job", "--force", "--now", "--store", db)
		require.Equal(t, ExitOK, o.code, o.stderr)
		require.Contains(t, o.stdout, fmt.Sprintf("its holder %s with token %d is now fenced", h, g.Token))
		rec = get(t, st, "job")
		require.Equal(t, store.StateReleased, rec.State)

		o = cli(t, "release", "--force", "job", "--store", db)
		require.Equal(t, ExitOK, o.code)
		require.Contains(t, o.stdout, "is not held (released")

		g2 := acquire(t, st, "job", testutil.Holder(t, "next"))
		require.Greater(t, g2.Token, g.Token)

		o = cli(t, "release", "--force", "absent", "--store", db)
		require.Equal(t, ExitOK, o.code, "nobody holds it, as after a release: %s", o.stderr)
		require.Empty(t, o.stderr)
		require.Equal(t, fmt.Sprintf("lease %q does not exist in %s; nothing to release\n", "absent", db), o.stdout)
	})

	t.Run("Own", func(t *testing.T) {
		t.Parallel()
		db := sqliteURL(t)
		st := openSQLite(t, db)
		h := testutil.Holder(t, "me")
		g := acquire(t, st, "job", h)

		o := cliEnv(t, map[string]string{}, "release", "job", "--store", db)
		require.Equal(t, ExitUsage, o.code)
		require.Contains(t, o.stderr, "needs TENURE_HOLDER and TENURE_TOKEN")

		for _, bad := range []map[string]string{
			{EnvHolder: "no-slash", EnvToken: "1"},
			{EnvHolder: "a/b", EnvToken: "x"},
			{EnvHolder: "a/b", EnvToken: "-3"},
		} {
			o = cliEnv(t, bad, "release", "job", "--store", db)
			require.Equal(t, ExitUsage, o.code, "%v", bad)
			requireOneLine(t, o)
		}

		o = cliEnv(t, map[string]string{EnvHolder: testutil.Holder(t, "me").String(), EnvToken: g.Token.String()}, "release", "job", "--store", db)
		require.Equal(t, ExitNotAcquired, o.code)
		requireOneLine(t, o)
		require.Contains(t, o.stderr, fmt.Sprintf("is held by %s with token %d, not by", h, g.Token))

		o = cliEnv(t, map[string]string{EnvHolder: h.String(), EnvToken: g.Token.String()}, "release", "job", "--store", db)
		require.Equal(t, ExitOK, o.code, o.stderr)
		require.Equal(t, fmt.Sprintf("released lease \"job\" (token %d)\n", g.Token), o.stdout)
		rec := get(t, st, "job")
		require.Equal(t, store.StateReleased, rec.State)
	})
}

func TestMigrate(t *testing.T) {
	t.Parallel()

	t.Run("SQLite", func(t *testing.T) {
		t.Parallel()
		o := cli(t, "migrate", "--store", sqliteURL(t))
		require.Equal(t, ExitOK, o.code, o.stderr)
		require.Contains(t, o.stdout, "schema version")
	})

	t.Run("PrintSQLite", func(t *testing.T) {
		t.Parallel()
		db := sqliteURL(t)
		o := cli(t, "migrate", "--print", "--store", db)
		require.Equal(t, ExitOK, o.code, o.stderr)
		require.Contains(t, o.stdout, "CREATE TABLE IF NOT EXISTS tenure_leases")
		require.Contains(t, o.stdout, fmt.Sprintf("PRAGMA user_version = %d;", sqlitestore.SchemaVersion))
		_, err := os.Stat(strings.TrimPrefix(db, "sqlite:"))
		require.ErrorIs(t, err, os.ErrNotExist, "migrate --print created the file")
	})

	t.Run("PrintNeedsNoServer", func(t *testing.T) {
		t.Parallel()
		o := cli(t, "migrate", "--print", "--grant", "app", "--store", "postgres://u:pw@"+closedPort(t)+"/db?tenure_schema=ops&tenure_prefix=job_")
		require.Equal(t, ExitOK, o.code, o.stderr)
		require.Contains(t, o.stdout, `CREATE TABLE IF NOT EXISTS "ops"."job_leases"`)
		require.Contains(t, o.stdout, `"ops"."job_fence"`)
		require.Contains(t, o.stdout, `CREATE TABLE IF NOT EXISTS "ops"."job_agents"`)
		require.Contains(t, o.stdout, `GRANT`)
		require.Contains(t, o.stdout, `"app"`)
	})
}

func TestPostgres(t *testing.T) {
	t.Parallel()
	owner := pgserver.PostgresPool(t, pgx.QueryExecModeCacheStatement, "")
	url := func(t *testing.T) string {
		t.Helper()
		schema := testutil.UniqueName(t)
		t.Cleanup(func() { pgserver.PostgresDropSchema(t, owner, schema) })
		sep := "?"
		if strings.Contains(testutil.PostgresURL(), "?") {
			sep = "&"
		}
		return testutil.PostgresURL() + sep + storeurl.ParamSchema + "=" + schema
	}

	t.Run("TokenFloor", func(t *testing.T) {
		t.Parallel()
		before := time.Now().UnixMicro()
		o := cli(t, "migrate", "--token-floor", "--store", url(t))
		require.Equal(t, ExitOK, o.code, o.stderr)
		var floor int64
		_, err := fmt.Sscanf(o.stdout[strings.Index(o.stdout, "raised the token floor to "):], "raised the token floor to %d", &floor)
		require.NoError(t, err, o.stdout)
		require.Greater(t, floor, before-int64(time.Minute/time.Microsecond), "the server's clock in microseconds")
	})

	t.Run("NotMigratedIs78", func(t *testing.T) {
		t.Parallel()
		u := url(t)
		for _, args := range [][]string{
			{"status", "--store", u},
			{"status", "job", "--store", u},
			{"run", "--name", "job", "--store", u, "--", "true"},
			{"run", "--name", "job", "--wait", "--store", u, "--", "true"},
			{"release", "--force", "job", "--store", u},
		} {
			o := cli(t, args...)
			require.Equal(t, ExitNotMigrated, o.code, "%q: %s", args, o.stderr)
			requireOneLine(t, o)
			require.Contains(t, o.stderr, "tenure migrate")
		}
		for _, args := range [][]string{{"agents", "--store", u}, {"owner", "r", "--store", u}} {
			o := cli(t, args...)
			require.Equal(t, ExitNotMigrated, o.code, "%q: %s", args, o.stderr)
			requireOneLine(t, o)
			require.Contains(t, o.stderr, "tenure migrate")
		}
		o := cli(t, "migrate", "--store", u)
		require.Equal(t, ExitOK, o.code, o.stderr)
		require.Contains(t, o.stdout, "migrated the PostgreSQL store")
		require.Contains(t, o.stdout, "fleet registry tables tenure_agents, tenure_owners and tenure_reassignments")
		o = cli(t, "migrate", "--store", u)
		require.Equal(t, ExitOK, o.code, o.stderr)
		o = cli(t, "status", "--store", u)
		require.Equal(t, ExitOK, o.code, o.stderr)
		require.Equal(t, "no leases\n", o.stdout)
	})

	t.Run("UnreachableIs69", func(t *testing.T) {
		t.Parallel()
		u := "postgres://alice:Sup3rSecret@" + closedPort(t) + "/db?sslmode=disable"
		for _, args := range [][]string{
			{"status", "--store", u},
			{"run", "--name", "job", "--store", u, "--", "true"},
			{"migrate", "--store", u},
			{"agents", "--store", u},
		} {
			o := cli(t, args...)
			require.Equal(t, ExitUnavailable, o.code, "%q: %s", args, o.stderr)
			requireOneLine(t, o)
			require.Contains(t, o.stderr, "cannot reach PostgreSQL at postgres://alice:xxxxx@")
			require.NotContains(t, o.stderr, "Sup3rSecret")
		}
	})

	t.Run("RunAndStatus", func(t *testing.T) {
		t.Parallel()
		u := url(t)
		require.Equal(t, ExitOK, cli(t, "migrate", "--store", u).code)
		o := cli(t, "run", "--name", "job", "--ttl", "2s", "--store", u, "--", "sh", "-c", "echo $TENURE_TOKEN")
		require.Equal(t, ExitOK, o.code, o.stderr)
		o2 := cli(t, "status", "--json", "job", "--store", u)
		require.Equal(t, ExitOK, o2.code, o2.stderr)
		require.Contains(t, o2.stdout, `"token":`+strings.TrimSpace(o.stdout)+`,`)
		require.Contains(t, o2.stdout, `"state":"released"`)
	})

	t.Run("Fleet", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		schema := testutil.UniqueName(t)
		t.Cleanup(func() { pgserver.PostgresDropSchema(t, owner, schema) })
		u := testutil.PostgresURL()
		if strings.Contains(u, "?") {
			u += "&"
		} else {
			u += "?"
		}
		u += storeurl.ParamSchema + "=" + schema
		require.Equal(t, ExitOK, cli(t, "migrate", "--store", u).code)

		o := cli(t, "agents", "--store", u)
		require.Equal(t, ExitOK, o.code, o.stderr)
		require.Contains(t, o.stderr, "no agent has registered")
		o = cli(t, "agents", "--json", "--store", u)
		require.Equal(t, ExitOK, o.code, o.stderr)
		require.JSONEq(t, `{"agents":[]}`, o.stdout)

		reg, err := registry.New(owner, registry.Config{Schema: schema})
		require.NoError(t, err)
		g, err := reg.Register(ctx, registry.RegisterParams{ID: "host-1", Address: "10.0.0.1:7000"})
		require.NoError(t, err)
		_, err = reg.Place(ctx, "sandbox-1", registry.PlaceParams{})
		require.NoError(t, err)

		o = cli(t, "owner", "sandbox-1", "--store", u)
		require.Equal(t, ExitOK, o.code, o.stderr)
		require.Contains(t, o.stdout, "sandbox-1: owned by host-1 (10.0.0.1:7000), alive")
		o = cli(t, "agents", "--store", u)
		require.Equal(t, ExitOK, o.code, o.stderr)
		require.Regexp(t, `(?m)^host-1\s+alive\s+\S+\s+1\s+10\.0\.0\.1:7000`, o.stdout)

		o = cli(t, "owner", "--json", "sandbox-2", "--store", u)
		require.Equal(t, ExitNoOwner, o.code, o.stderr)
		require.Contains(t, o.stdout, `{"resource":"sandbox-2","outcome":"no_owner",`)

		require.NoError(t, reg.Deregister(ctx, g))
		o = cli(t, "owner", "--", "sandbox-1", "--store", u)
		require.Equal(t, ExitUsage, o.code, "after --, --store is a second resource: %s", o.stderr)
		o = cli(t, "owner", "sandbox-1", "--store", u)
		require.Equal(t, ExitOwnerDead, o.code, o.stderr)
		require.Contains(t, o.stdout, "sandbox-1: owned by host-1, dead: deregistered")
		require.Contains(t, o.stderr, "do not place sandbox-1 elsewhere")
	})
}

// lineWriter hands every line written to it to the lines channel.
type lineWriter struct {
	mu    sync.Mutex
	buf   []byte
	lines chan string
}

func newLineWriter() *lineWriter { return &lineWriter{lines: make(chan string, 100)} }

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		select {
		case w.lines <- string(w.buf[:i]):
		default:
		}
		w.buf = w.buf[i+1:]
	}
}

// TestTTLBelowStoreMinimum checks that run asks the opened store for its
// floor (etcd refuses leases below 2 s) and refuses a shorter --ttl as a
// usage error before it takes anything.
func TestTTLBelowStoreMinimum(t *testing.T) {
	t.Parallel()
	srv := etcdserver.OwnEtcd(t)
	u := "etcd://" + strings.TrimPrefix(srv.Endpoint, "http://") + "?tenure_prefix=" + testutil.UniqueName(t) + "/"
	o := cli(t, "run", "--name", "x", "--ttl", "1s", "--store", u, "--", "true")
	require.Equal(t, ExitUsage, o.code, o.stderr)
	requireOneLine(t, o)
	require.Contains(t, o.stderr, "--ttl 1s is below the etcd store's minimum TTL of 2s; use 2s or more")

	o = cli(t, "run", "--name", "x", "--ttl", "2s", "--grace", "100ms", "--store", u, "--", "true")
	require.Equal(t, 0, o.code, o.stderr)
}

func TestLossReason(t *testing.T) {
	t.Parallel()
	require.Equal(t, "renew error: pgstore: renew: timeout",
		lossReason(&tenure.LostError{Reason: tenure.LossRenewError, Cause: errors.New("pgstore: renew:\ntimeout")}))
	require.Contains(t, lossReason(&tenure.LostError{Reason: tenure.LossExpiredAtStore}), "tenure release --force")
	require.Contains(t, lossReason(&tenure.LostError{Reason: tenure.LossSeqMismatch}), "an operator's release --force")
	require.Equal(t, "unknown reason", lossReason(nil))
}

func TestUnreachableServersAre69(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ url, want string }{
		{"redis://:Sup3rSecret@" + closedPort(t), "cannot reach Redis at redis://:xxxxx@"},
		{"etcd://alice:Sup3rSecret@" + closedPort(t) + "," + closedPort(t), "cannot reach etcd at etcd://alice:xxxxx@"},
		{"consul://" + closedPort(t), "cannot reach Consul at consul://"},
	} {
		t.Run(tc.url[:strings.Index(tc.url, ":")], func(t *testing.T) {
			t.Parallel()
			started := time.Now()
			for _, args := range [][]string{
				{"status", "--store", tc.url},
				{"run", "--name", "job", "--store", tc.url, "--", "true"},
				{"release", "--force", "job", "--store", tc.url},
				{"migrate", "--store", tc.url},
			} {
				o := cli(t, args...)
				require.Equal(t, ExitUnavailable, o.code, "%q: %s", args, o.stderr)
				requireOneLine(t, o)
				require.Contains(t, o.stderr, tc.want)
				require.NotContains(t, o.stderr, "Sup3rSecret")
			}
			require.Less(t, time.Since(started), storeopen.DefaultConnectTimeout, "a refused connection took long to report")
		})
	}
}

func TestAlwaysLeaderStore(t *testing.T) {
	t.Parallel()
	const store = "always:the%20nightly%20report%20is%20idempotent"

	t.Run("RunSaysSoAndRuns", func(t *testing.T) {
		t.Parallel()
		o := cli(t, "run", "--name", "report", "--store", store, "--", "sh", "-c", `echo "$TENURE_TOKEN"`)
		require.Equal(t, ExitOK, o.code)
		require.Equal(t, "1\n", o.stdout)
		requireOneLine(t, o)
		require.Contains(t, o.stderr, "without mutual exclusion; reason: the nightly report is idempotent")
	})
	t.Run("StatusShowsTheReason", func(t *testing.T) {
		t.Parallel()
		o := cli(t, "status", "--store", store)
		require.Equal(t, ExitOK, o.code, o.stderr)
		require.Contains(t, o.stdout, "always-leader store: every holder leads, without mutual exclusion; reason: the nightly report is idempotent")
		o = cli(t, "status", "--json", "--store", store)
		require.Equal(t, ExitOK, o.code, o.stderr)
		require.Contains(t, o.stdout, `"always_leader_reason":"the nightly report is idempotent"`)
	})
	t.Run("NoReasonIsAUsageError", func(t *testing.T) {
		t.Parallel()
		o := cli(t, "status", "--store", "always:")
		require.Equal(t, ExitUsage, o.code)
		requireOneLine(t, o)
		require.Contains(t, o.stderr, "reason")
	})
}
