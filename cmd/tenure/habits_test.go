package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/cmd/tenure/internal/cli"
)

// outcomeJSON is run --json's object, field for field: decoding with
// DisallowUnknownFields keeps this list and the documentation honest.
type outcomeJSON struct {
	Lease      string     `json:"lease"`
	Slot       *int       `json:"slot"`
	Store      string     `json:"store"`
	Holder     string     `json:"holder"`
	Token      int64      `json:"token"`
	AcquiredAt *time.Time `json:"acquired_at"`
	HeldMS     *int64     `json:"held_ms"`
	Ended      string     `json:"ended"`
	Reason     string     `json:"reason"`
	HeldBy     *struct {
		Holder      string `json:"holder"`
		Token       int64  `json:"token"`
		RemainingMS int64  `json:"remaining_ms"`
	} `json:"held_by"`
	Signal  string `json:"signal"`
	Command *struct {
		ExitCode *int   `json:"exit_code"`
		Signal   string `json:"signal"`
	} `json:"command"`
	ExitCode int    `json:"exit_code"`
	Error    string `json:"error"`
}

func decodeOutcome(t *testing.T, b []byte) outcomeJSON {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var o outcomeJSON
	require.NoError(t, dec.Decode(&o), "%s", b)
	return o
}

// readOutcome reads the outcome run --json FILE wrote.
func readOutcome(t *testing.T, path string) outcomeJSON {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, 1, bytes.Count(b, []byte("\n")), "not one line: %s", b)
	return decodeOutcome(t, b)
}

// stderrOutcome finds the outcome run --json - wrote among its lines.
func stderrOutcome(t *testing.T, p *proc) outcomeJSON {
	t.Helper()
	for _, line := range strings.Split(p.stderr.rest(), "\n") {
		if strings.HasPrefix(line, "{") {
			return decodeOutcome(t, []byte(line))
		}
	}
	t.Fatalf("no JSON outcome on standard error:\n%s", p.stderr.all())
	return outcomeJSON{}
}

// TestRunJSONOutcome runs real commands under run --json and checks the
// object for each way run ends without trouble: the command's exit code,
// a signal that killed it, and a lease held elsewhere (with
// --held-exit-code 0, as a cron job that counts that as success would).
func TestRunJSONOutcome(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, s store) {
		env := s.env(t)
		out := filepath.Join(t.TempDir(), "outcome.json")
		before := time.Now().UTC()
		p := run(t, env, "run", "--name", "job", "--label", "cron", "--json", out, "--", "sh", "-c", "exit 3")
		require.Equal(t, 3, p.code, p.stderr.all())
		o := readOutcome(t, out)
		require.Equal(t, "job", o.Lease)
		require.NotEmpty(t, o.Store)
		require.Regexp(t, `^cron/\S+$`, o.Holder)
		require.Positive(t, o.Token)
		require.NotNil(t, o.AcquiredAt)
		require.False(t, o.AcquiredAt.Before(before.Add(-time.Second)), "acquired_at %s is before the run started", o.AcquiredAt)
		require.NotNil(t, o.HeldMS)
		require.GreaterOrEqual(t, *o.HeldMS, int64(0))
		require.Equal(t, "exited", o.Ended)
		require.NotNil(t, o.Command)
		require.NotNil(t, o.Command.ExitCode)
		require.Equal(t, 3, *o.Command.ExitCode)
		require.Equal(t, 3, o.ExitCode)
		require.Empty(t, o.Error)
		first := o.Token

		p = run(t, env, "run", "--name", "job", "--json", out, "--", "sh", "-c", "kill -KILL $$")
		require.Equal(t, 128+int(syscall.SIGKILL), p.code, p.stderr.all())
		o = readOutcome(t, out)
		require.Greater(t, o.Token, first)
		require.Equal(t, "exited", o.Ended)
		require.Equal(t, "SIGKILL", o.Command.Signal)
		require.Nil(t, o.Command.ExitCode)
		require.Equal(t, 137, o.ExitCode)

		a := start(t, env, append([]string{"run", "--name", "job", "--label", "a"}, blockingChild...)...)
		m := a.stdout.await(startedLine)
		b := run(t, env, "run", "--name", "job", "--held-exit-code", "0", "--json", "-", "--", "sh", "-c", "echo ran")
		require.Equal(t, 0, b.code, b.stderr.all())
		require.Empty(t, b.stdout.rest(), "the command ran although the lease was held")
		o = stderrOutcome(t, b)
		require.Regexp(t, fmt.Sprintf(`^tenure: lease "job" is held by a/%s with token %s for another \S+ by the store's clock; not acquired`, m[2], m[3]), b.stderr.all())
		require.Equal(t, "held", o.Ended)
		require.NotNil(t, o.HeldBy)
		require.Equal(t, "a/"+m[2], o.HeldBy.Holder)
		require.Equal(t, atoi(t, m[3]), o.HeldBy.Token)
		require.Positive(t, o.HeldBy.RemainingMS)
		require.Empty(t, o.Holder)
		require.Nil(t, o.Command)
		require.Equal(t, 0, o.ExitCode)
		require.Contains(t, o.Error, "not acquired")

		b = run(t, env, "run", "--name", "job", "--held-exit-code", "3", "--", "true")
		require.Equal(t, 3, b.code, b.stderr.all())

		a.closeStdin()
		require.Equal(t, 0, a.wait(), a.stderr.all())
	})
}

// TestStandbyIsReady: a standby waiting for a held lease under --health is
// alive and ready, and not the leader, so that a rolling update's new pod
// becomes ready beside the holder; once it holds the lease it is all three.
func TestStandbyIsReady(t *testing.T) {
	t.Parallel()
	s := sqliteStore(t)
	env := s.env(t)
	holder := start(t, env, append([]string{"run", "--name", "r", "--ttl", "6s"}, blockingChild...)...)
	holder.stdout.await(startedLine)
	standby := start(t, env, append([]string{"-v", "run", "--name", "r", "--ttl", "6s", "--wait", "--health", "127.0.0.1:0"}, blockingChild...)...)
	addr := standby.stderr.await(`msg="serving /livez, /readyz and /leaderz" .*addr=(\S+)`)[1]
	standby.stderr.await(`^tenure: lease "r" is held by .*; waiting for it$`)
	for path, want := range map[string]int{"/livez": http.StatusOK, "/readyz": http.StatusOK, "/leaderz": http.StatusServiceUnavailable, "/healthz": http.StatusServiceUnavailable} {
		code, body := probe(t, addr, path)
		require.Equal(t, want, code, "standby %s: %s", path, body)
	}
	holder.closeStdin()
	require.Equal(t, 0, holder.wait(), holder.stderr.all())
	standby.stdout.await(startedLine)
	for _, path := range []string{"/livez", "/readyz", "/leaderz", "/healthz"} {
		code, body := probe(t, addr, path)
		require.Equal(t, http.StatusOK, code, "holder %s: %s", path, body)
	}
	standby.closeStdin()
	require.Equal(t, 0, standby.wait(), standby.stderr.all())
}

// TestRunServesMetrics: run --metrics serves the lease client's metrics
// while the command runs: the lease held, its holder, and the build.
func TestRunServesMetrics(t *testing.T) {
	t.Parallel()
	s := sqliteStore(t)
	env := s.env(t)
	p := start(t, env, append([]string{"-v", "run", "--name", "m", "--metrics", "127.0.0.1:0"}, blockingChild...)...)
	addr := p.stderr.await(`msg="serving /metrics" .*addr=(\S+)`)[1]
	m := p.stdout.await(startedLine)
	code, body := probe(t, addr, "/metrics")
	require.Equal(t, http.StatusOK, code, body)
	for _, want := range []string{
		`tenure_lease_held{lease="m",store="sqlitestore"} 1`,
		fmt.Sprintf(`tenure_lease_holder_info{holder="%s/%s",lease="m",store="sqlitestore"} 1`, m[1], m[2]),
		`tenure_lease_token{lease="m",store="sqlitestore"} ` + m[3],
		`tenure_lease_transitions_total{lease="m",store="sqlitestore"} 1`,
		`tenure_build_info{goversion="`,
		"go_goroutines ",
		"process_open_fds ",
	} {
		require.Contains(t, body, want)
	}
	p.closeStdin()
	require.Equal(t, 0, p.wait(), p.stderr.all())

	busy := run(t, env, "run", "--name", "m2", "--metrics", "256.0.0.1:0", "--", "true")
	require.Equal(t, cli.ExitUsage, busy.code, busy.stderr.all())
	require.Contains(t, busy.stderr.all(), "cannot listen on --metrics 256.0.0.1:0")
}

// TestRunWaitReportsHolderChanges has two waiters, one with plain lines
// and one with --log-format json, wait for a held lease. When its holder
// releases it, one waiter takes it, and the other reports the new holder
// in its own format.
func TestRunWaitReportsHolderChanges(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, s store) {
		env := s.env(t)
		a := start(t, env, append([]string{"run", "--name", "w", "--ttl", "6s", "--label", "first"}, blockingChild...)...)
		m := a.stdout.await(startedLine)
		waiters := map[string]*proc{
			"plain":      start(t, env, append([]string{"run", "--name", "w", "--ttl", "6s", "--label", "plain", "--wait", "--json", "-"}, blockingChild...)...),
			"structured": start(t, env, append([]string{"--log-format", "json", "run", "--name", "w", "--ttl", "6s", "--label", "structured", "--wait"}, blockingChild...)...),
		}
		for _, w := range waiters {
			w.stderr.await(fmt.Sprintf(`^tenure: lease "w" is held by first/%s with token %s for another \S+ by the store's clock; waiting for it$`, m[2], m[3]))
		}
		s.awaitListeners(t, 3)

		a.closeStdin()
		require.Equal(t, 0, a.wait(), a.stderr.all())
		// Which waiter won is up to the store; poll it (there is no event
		// to await in this process) until one holds the lease.
		var rec leaseJSON
		deadline := time.Now().Add(patience)
		for rec.State != "held" || rec.Label == "first" {
			require.True(t, time.Now().Before(deadline), "no waiter took the lease within %s", patience)
			rec = status(t, env, "w")
		}
		winner := waiters[rec.Label]
		require.NotNil(t, winner, "held by %q", rec.Holder)
		won := winner.stdout.await(startedLine)
		require.Equal(t, rec.Holder, won[1]+"/"+won[2])

		if rec.Label == "structured" {
			loser := waiters["plain"]
			loser.stderr.await(fmt.Sprintf(`^tenure: lease "w" is now held by %s with token %d for another \S+ by the store's clock; still waiting for it$`, rec.Holder, rec.Token))
		} else {
			line := waiters["structured"].stderr.await(`^(\{.*"msg":"lease holder changed".*"holder":"plain/.*\})$`)[1]
			var got struct {
				Level     string `json:"level"`
				Lease     string `json:"lease"`
				Held      bool   `json:"held"`
				Holder    string `json:"holder"`
				Token     int64  `json:"token"`
				Remaining int64  `json:"remaining"`
			}
			require.NoError(t, json.Unmarshal([]byte(line), &got), line)
			require.Equal(t, "INFO", got.Level)
			require.Equal(t, "w", got.Lease)
			require.True(t, got.Held)
			require.Equal(t, rec.Holder, got.Holder)
			require.Equal(t, rec.Token, got.Token)
			require.Positive(t, got.Remaining)
		}

		for label, w := range waiters {
			if w == winner {
				continue
			}
			w.signal(syscall.SIGTERM)
			require.Equal(t, 128+int(syscall.SIGTERM), w.wait(), w.stderr.all())
			require.Empty(t, w.stdout.rest(), "the losing waiter's command ran")
			if label == "plain" {
				o := stderrOutcome(t, w)
				require.Equal(t, "interrupted", o.Ended)
				require.Equal(t, "SIGTERM", o.Signal)
				require.Equal(t, 143, o.ExitCode)
				require.Empty(t, o.Holder)
			}
		}
		winner.closeStdin()
		require.Equal(t, 0, winner.wait(), winner.stderr.all())
	})
}

// healthz asks run's /healthz and returns the status and the body.
func healthz(t *testing.T, addr string) (int, string) {
	t.Helper()
	return probe(t, addr, "/healthz")
}

// probe asks the probe at path of run's --health and returns the status
// and the body.
func probe(t *testing.T, addr, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + addr + path)
	require.NoError(t, err)
	defer func() { require.NoError(t, resp.Body.Close()) }()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// TestRunProgressGate runs a command that reports progress with `tenure
// progress` for each line the test sends, then stops: /healthz goes from
// 200 to 503, run gives the lease up as "progress stalled" (exit 79, the
// lease released at the store), and a report after that is refused.
// /readyz answers 200 while the run holds and 503 once the tenure is lost;
// /livez answers 200 again once the run is on its way out.
func TestRunProgressGate(t *testing.T) {
	t.Parallel()
	s := sqliteStore(t)
	env := s.env(t)
	out := filepath.Join(t.TempDir(), "outcome.json")
	// The command ignores SIGTERM, so it still runs in the grace after the
	// loss, when run answers 503 and refuses its report.
	script := `trap '' TERM; while read line; do "$TENURE_BIN" progress; echo "progress $? $line"; done`
	p := start(t, env, "-v", "run", "--name", "p", "--ttl", "15s", "--grace", "4s", "--progress-timeout", "5s",
		"--health", "127.0.0.1:0", "--json", out, "--", "sh", "-c", script)
	addr := p.stderr.await(`msg="serving /livez, /readyz and /leaderz" .*addr=(\S+)`)[1]
	send := func(line string) {
		_, err := fmt.Fprintln(p.stdin, line)
		require.NoError(t, err)
	}

	send("1")
	p.stdout.await(`^progress 0 1$`)
	code, body := healthz(t, addr)
	require.Equal(t, http.StatusOK, code, body)
	require.Regexp(t, `^holding lease "p" with token \d+; last progress \S+ ago\n$`, body)
	for _, path := range []string{"/livez", "/readyz", "/leaderz"} {
		code, body := probe(t, addr, path)
		require.Equal(t, http.StatusOK, code, "%s: %s", path, body)
	}

	// No more progress: poll the health check (it has no event to await)
	// until it turns.
	deadline := time.Now().Add(patience)
	for code == http.StatusOK && time.Now().Before(deadline) {
		code, body = healthz(t, addr)
	}
	require.Equal(t, http.StatusServiceUnavailable, code, body)
	require.Regexp(t, `no progress for \S+ \(--progress-timeout 5s\)|lost: progress stalled`, body)

	p.stderr.await(`^tenure: lost lease "p" with token \d+: progress stalled; stopping the command \(SIGTERM now, SIGKILL in `)
	code, body = healthz(t, addr)
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Contains(t, body, `lease "p" lost: progress stalled`)
	code, body = probe(t, addr, "/readyz")
	require.Equal(t, http.StatusServiceUnavailable, code, body)
	code, body = probe(t, addr, "/livez")
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, "the run is ending")
	send("2")
	p.stdout.await(fmt.Sprintf(`^progress %d 2$`, cli.ExitLost))

	require.Equal(t, cli.ExitLost, p.wait(), p.stderr.all())
	o := readOutcome(t, out)
	require.Equal(t, "lost", o.Ended)
	require.True(t, strings.HasPrefix(o.Reason, "progress stalled"), o.Reason)
	require.Equal(t, "SIGKILL", o.Command.Signal)
	require.Equal(t, cli.ExitLost, o.ExitCode)
	require.Equal(t, "released", status(t, env, "p").State, "the stalled holder kept the lease")
}

// TestRevokeInheritedInsideRun runs `tenure revoke-inherited` from the
// command, as a restore hook would: the marker file goes, the command is
// killed, run exits 79, and the lease is left to expire, not released.
func TestRevokeInheritedInsideRun(t *testing.T) {
	t.Parallel()
	s := sqliteStore(t)
	mark := filepath.Join(t.TempDir(), "leader.marker")
	require.NoError(t, os.WriteFile(mark, []byte("leader\n"), 0o644))
	env := s.env(t, "MARK="+mark)
	out := filepath.Join(t.TempDir(), "outcome.json")
	p := start(t, env, "run", "--name", "r", "--json", out, "--", "sh", "-c",
		`echo "started $TENURE_HOLDER $TENURE_TOKEN"; "$TENURE_BIN" revoke-inherited --remove "$MARK"; read x`)
	m := p.stdout.await(startedLine)
	p.stdout.await(`^removed ` + mark + `$`)
	p.stdout.await(`^asking tenure run to revoke lease "r": it kills this command's tree, this process included$`)
	require.Equal(t, cli.ExitLost, p.wait(), p.stderr.all())
	require.Contains(t, p.stderr.rest(), fmt.Sprintf(`tenure: lease "r" with token %s revoked by tenure revoke-inherited; the command was killed and the lease is left to expire`, m[3]))
	require.NoFileExists(t, mark)

	rec := status(t, env, "r")
	require.Equal(t, "held", rec.State, "the revoked lease was released")
	require.Equal(t, m[1]+"/"+m[2], rec.Holder)
	require.Equal(t, atoi(t, m[3]), rec.Token)
	o := readOutcome(t, out)
	require.Equal(t, "lost", o.Ended)
	require.Equal(t, "revoked", o.Reason)
	require.Equal(t, cli.ExitLost, o.ExitCode)
}
