package main

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/cmd/tenure/internal/cli"
	"github.com/tenure-dev/tenure/cmd/tenure/internal/storeurl"
	"github.com/tenure-dev/tenure/internal/testserver/etcdserver"
	"github.com/tenure-dev/tenure/internal/testserver/redisserver"
	"github.com/tenure-dev/tenure/internal/testutil"
)

// onceStore is a store URL for the window tests, and whether the store
// derives windows from its own clock (etcd has none a transaction reads).
type onceStore struct {
	url     string
	derives bool
	// history: the store keeps a history (tenure history).
	history bool
}

// TestRunOncePerWindow runs `tenure run --once-per` as real processes on
// SQLite, PostgreSQL, Redis and etcd. Every command appends one line
// "done TOKEN WINDOW" to a file when it completes; the test counts them
// per window.
func TestRunOncePerWindow(t *testing.T) {
	t.Parallel()
	stores := map[string]func(t *testing.T) onceStore{
		"SQLite":   func(t *testing.T) onceStore { return onceStore{url: sqliteStore(t).url, derives: true, history: true} },
		"Postgres": func(t *testing.T) onceStore { return onceStore{url: pgStore(t).url, derives: true, history: true} },
		"Redis": func(t *testing.T) onceStore {
			client := redisserver.RedisClient(t)
			u, err := url.Parse(redisserver.RedisURL())
			require.NoError(t, err)
			q := u.Query()
			q.Set(storeurl.ParamPrefix, redisserver.RedisPrefix(t, client))
			u.RawQuery = q.Encode()
			return onceStore{url: u.String(), derives: true}
		},
		"Etcd": func(t *testing.T) onceStore {
			srv := etcdserver.OwnEtcd(t)
			return onceStore{url: "etcd://" + strings.TrimPrefix(srv.Endpoint, "http://") + "?tenure_prefix=" + testutil.UniqueName(t) + "/"}
		},
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := open(t)
			t.Run("TenAtOnceAndADayBehind", func(t *testing.T) { onceTenAtOnce(t, s) })
			t.Run("Derived", func(t *testing.T) { onceDerived(t, s) })
			t.Run("PausedHolder", func(t *testing.T) { oncePaused(t, s) })
			t.Run("FailedCommand", func(t *testing.T) { onceFailed(t, s) })
		})
	}
}

// onceTTL is the TTL of the workers that fire at once: a worker whose
// notification of a release was lost takes the lease at the expiry it was
// told, so a short TTL bounds that wait well within patience.
const onceTTL = "3s"

// doneCommand appends "done TOKEN WINDOW" to $ONCE_FILE.
var doneCommand = []string{"--", "sh", "-c", `echo "done $TENURE_TOKEN $TENURE_WINDOW" >> "$ONCE_FILE"`}

// refusedLine is the line of a worker that found its window completed.
const refusedLine = `^tenure: window (.+) of "(\S+)" already ran: completed by (\S+) with token (\d+) at (\S+); nothing was run$`

// onceRuns reads the file the commands write: window → tokens that
// completed it.
func onceRuns(t *testing.T, file string) map[string][]string {
	t.Helper()
	b, err := os.ReadFile(file)
	if os.IsNotExist(err) {
		return map[string][]string{}
	}
	require.NoError(t, err)
	runs := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.SplitN(line, " ", 3)
		require.Len(t, f, 3, "line %q", line)
		require.Equal(t, "done", f[0])
		runs[f[2]] = append(runs[f[2]], f[1])
	}
	return runs
}

// fire starts n workers with args at once and waits for them all.
func fire(t *testing.T, env []string, n int, args ...string) []*proc {
	t.Helper()
	ps := make([]*proc, n)
	var wg sync.WaitGroup
	for i := range ps {
		wg.Go(func() {
			ps[i] = start(t, env, args...)
			ps[i].closeStdin()
		})
	}
	wg.Wait()
	for _, p := range ps {
		p.wait()
		p.stdout.drain()
		p.stderr.drain()
	}
	return ps
}

// lastLine is the last line p wrote on standard error: a worker that
// waited for the lease says so first.
func lastLine(p *proc) string {
	all := strings.Split(strings.TrimSpace(p.stderr.all()), "\n")
	return all[len(all)-1]
}

// requireOnce checks that of ps exactly one exited 0 and completed window
// key (its line in file), and that every other exited 80 with one line
// naming that run's token.
func requireOnce(t *testing.T, ps []*proc, file, lease, key string) {
	t.Helper()
	runs := onceRuns(t, file)
	require.Len(t, runs[key], 1, "exactly one run completed window %q: %v", key, runs)
	token := runs[key][0]
	ran := 0
	for _, p := range ps {
		if p.code == 0 {
			ran++
			continue
		}
		require.Equal(t, cli.ExitWindowDone, p.code, p.stderr.all())
		errs := lastLine(p)
		m := regexp.MustCompile(refusedLine).FindStringSubmatch(errs)
		require.NotNil(t, m, "the refusal names who ran the window, when and with which token: %q", errs)
		require.Equal(t, lease, m[2])
		require.Equal(t, token, m[4], "the refusal names the token of the run: %q", errs)
		_, err := time.Parse(time.RFC3339Nano, m[5])
		require.NoError(t, err, "the refusal says when: %q", errs)
	}
	require.Equal(t, 1, ran)
}

// onceTenAtOnce fires ten workers at once on one named window; one
// completes it and nine exit 80. Then a worker whose clock is a day
// behind fires the same window on the next day (its scheduler computed
// yesterday's date as today's): it exits 80, naming the run, while the
// next day's window runs once. A named window comes from the caller, and
// a wrong clock can only name a window that ran: it cannot run one twice.
func onceTenAtOnce(t *testing.T, s onceStore) {
	file := filepath.Join(t.TempDir(), "runs")
	env := testEnv(t, storeurl.EnvVar+"="+s.url, "ONCE_FILE="+file)
	day := "2026-12-04"
	ps := fire(t, env, 10, append([]string{"run", "--name", "nightly", "--ttl", onceTTL, "--once-per", "24h", "--window-key", day}, doneCommand...)...)
	requireOnce(t, ps, file, "nightly", day)

	next := run(t, env, append([]string{"run", "--name", "nightly", "--ttl", onceTTL, "--once-per", "24h", "--window-key", "2026-12-05"}, doneCommand...)...)
	require.Equal(t, 0, next.code, next.stderr.all())
	behind := run(t, env, append([]string{"run", "--name", "nightly", "--ttl", onceTTL, "--once-per", "24h", "--window-key", day}, doneCommand...)...)
	require.Equal(t, cli.ExitWindowDone, behind.code, behind.stderr.all())
	require.Regexp(t, `^tenure: window "2026-12-04" of "nightly" already ran: completed by `, lastLine(behind))
	runs := onceRuns(t, file)
	require.Len(t, runs, 2, "one run per window: %v", runs)
	require.Len(t, runs["2026-12-05"], 1)
	if s.history {
		requireWindowHistory(t, env, "nightly", map[string]string{day: runs[day][0], "2026-12-05": runs["2026-12-05"][0]})
	}
}

// requireWindowHistory checks that tenure history shows each window of
// lease begun and completed once, by the token that ran it, and nothing
// else of windows.
func requireWindowHistory(t *testing.T, env []string, lease string, ran map[string]string) {
	t.Helper()
	p := run(t, env, "history", lease, "--json")
	require.Equal(t, 0, p.code, p.stderr.all())
	var h struct {
		Events []struct {
			Event  string `json:"event"`
			Token  int64  `json:"token"`
			Window string `json:"window"`
		} `json:"events"`
	}
	require.NoError(t, json.Unmarshal([]byte(p.stdout.all()), &h))
	got := map[string][]string{}
	for _, ev := range h.Events {
		if ev.Window != "" {
			got[ev.Window] = append(got[ev.Window], fmt.Sprintf("%s %d", ev.Event, ev.Token))
		}
	}
	want := map[string][]string{}
	for window, token := range ran {
		want[window] = []string{"window-started " + token, "window-completed " + token}
	}
	require.Equal(t, want, got, "the history records each window once, begun and completed by the run's token")
	table := run(t, env, "history", lease)
	require.Regexp(t, `window-completed 2026-12-04\s+\S+\s+`+ran["2026-12-04"]+`\s`, table.stdout.all())
}

// onceDerived fires ten workers at once with no window key: the store
// derives the window from its own clock, so no worker's clock takes part
// (a worker whose clock is a day behind, which a Go binary cannot be given
// here — libfaketime does not reach it — would name the same window).
// etcd, which has no clock a transaction can read, refuses with exit 64.
func onceDerived(t *testing.T, s onceStore) {
	file := filepath.Join(t.TempDir(), "runs")
	env := testEnv(t, storeurl.EnvVar+"="+s.url, "ONCE_FILE="+file)
	args := append([]string{"run", "--name", "daily", "--ttl", onceTTL, "--once-per", "24h"}, doneCommand...)
	if !s.derives {
		p := run(t, env, args...)
		require.Equal(t, cli.ExitUsage, p.code, p.stderr.all())
		require.Regexp(t, `^tenure: .*etcd has no clock a transaction can read.*--window-key`, p.stderr.rest())
		require.Empty(t, onceRuns(t, file))
		return
	}
	before := time.Now().UTC().Truncate(24 * time.Hour)
	ps := fire(t, env, 10, args...)
	after := time.Now().UTC().Truncate(24 * time.Hour)
	runs := onceRuns(t, file)
	// Each window of a day has exactly one run (two windows only when the
	// test straddles midnight UTC).
	require.NotEmpty(t, runs)
	for key := range runs {
		want := fmt.Sprintf("@%d+%d", before.UnixMilli(), (24 * time.Hour).Milliseconds())
		if key != want {
			want = fmt.Sprintf("@%d+%d", after.UnixMilli(), (24 * time.Hour).Milliseconds())
		}
		require.Equal(t, want, key, "the window is the store's day, UTC")
	}
	if len(runs) == 1 {
		for key := range runs {
			requireOnce(t, ps, file, "daily", key)
		}
	}
}

// oncePaused stops a worker (tenure itself: its watchdog kills the
// command before the store expires the lease) while it runs a window; a
// worker without --retry-failed then refuses the window (begun, not
// completed), one with it runs it to completion, the paused worker wakes
// fenced (exit 79: its tenure was lost, and it cannot record the window),
// and a last worker finds the window completed by the retry.
func oncePaused(t *testing.T, s onceStore) {
	file := filepath.Join(t.TempDir(), "runs")
	env := testEnv(t, storeurl.EnvVar+"="+s.url, "ONCE_FILE="+file)
	flags := []string{"run", "--name", "import", "--window-key", "batch-7", "--ttl", "2s", "--grace", "500ms"}
	paused := start(t, env, append(flags, "--", "sh", "-c", `echo "begun $TENURE_TOKEN"; read x; echo "done $TENURE_TOKEN $TENURE_WINDOW" >> "$ONCE_FILE"`)...)
	first := paused.stdout.await(`^begun (\d+)$`)[1]
	paused.signal(syscall.SIGSTOP)

	// The lease expires at the store (the watchdog has killed the
	// command); the window was begun and not completed.
	refused := run(t, env, append(flags, doneCommand...)...)
	require.Equal(t, cli.ExitWindowDone, refused.code, refused.stderr.all())
	require.Regexp(t, fmt.Sprintf(`^tenure: window "batch-7" of "import" was begun by \S+ with token %s at \S+ and did not complete \(its tenure ended halfway\); it is not retried without RetryFailed \(--retry-failed\); nothing was run$`, first),
		lastLine(refused))

	retry := run(t, env, append(append(flags, "--retry-failed"), doneCommand...)...)
	require.Equal(t, 0, retry.code, retry.stderr.all())
	runs := onceRuns(t, file)
	require.Len(t, runs["batch-7"], 1)
	require.NotEqual(t, first, runs["batch-7"][0], "the retry ran with a newer token")

	paused.signal(syscall.SIGCONT)
	paused.closeStdin()
	require.Equal(t, cli.ExitLost, paused.wait(), paused.stderr.all())

	late := run(t, env, append(flags, doneCommand...)...)
	require.Equal(t, cli.ExitWindowDone, late.code, late.stderr.all())
	m := regexp.MustCompile(refusedLine).FindStringSubmatch(lastLine(late))
	require.NotNil(t, m, late.stderr.all())
	require.Equal(t, runs["batch-7"][0], m[4], "the window is completed by the retry's token")
	require.Len(t, onceRuns(t, file)["batch-7"], 1, "the paused worker's command never completed the window")
	if s.history {
		p := run(t, env, "history", "import")
		require.Equal(t, 0, p.code, p.stderr.all())
		out := p.stdout.all()
		retried := runs["batch-7"][0]
		require.Regexp(t, `window-started batch-7\s+\S+\s+`+first+`\s+-`, out, "the paused worker began the window")
		require.Regexp(t, `window-started batch-7\s+\S+\s+`+retried+`\s+\S+ \(token `+first+`\)`, out, "the retry took it over from the paused worker")
		require.Regexp(t, `window-completed batch-7\s+\S+\s+`+retried+`\s`, out)
		require.NotRegexp(t, `window-(completed|failed) batch-7\s+\S+\s+`+first+`\s`, out, "the paused worker recorded no outcome")
	}
}

// onceFailed: a command that exits non-zero records its window failed
// (run passes its status through); the next run refuses the window with
// exit 80, and one with --retry-failed runs it to completion.
func onceFailed(t *testing.T, s onceStore) {
	file := filepath.Join(t.TempDir(), "runs")
	env := testEnv(t, storeurl.EnvVar+"="+s.url, "ONCE_FILE="+file)
	flags := []string{"run", "--name", "export", "--window-key", "batch-9"}
	failed := run(t, env, append(flags, "--", "sh", "-c", "exit 3")...)
	require.Equal(t, 3, failed.code, failed.stderr.all())
	again := run(t, env, append(flags, doneCommand...)...)
	require.Equal(t, cli.ExitWindowDone, again.code, again.stderr.all())
	require.Regexp(t, `^tenure: window "batch-9" of "export" already ran and failed: begun by \S+ with token \d+ at \S+, failed at \S+; it is not retried without RetryFailed \(--retry-failed\); nothing was run$`, lastLine(again))
	require.Empty(t, onceRuns(t, file))
	retry := run(t, env, append(append(flags, "--retry-failed"), doneCommand...)...)
	require.Equal(t, 0, retry.code, retry.stderr.all())
	require.Len(t, onceRuns(t, file)["batch-9"], 1)
}
