package main

import (
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/cmd/tenure/internal/cli"
)

// TestRunBlame: when tenure run's command is killed, the lines on
// tenure's stderr say who decided it, and only that: the lease forced
// away (release --force moved the chain on), a revoke on wake or restore
// (SIGPWR), or tenure itself stopped answering (SIGSTOP past the kill
// deadline), the one case where the watchdog's deadline line belongs.
// Each case lists every line tenure writes, in order.
func TestRunBlame(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		act   func(t *testing.T, env []string, p *proc)
		lines []string // regular expressions, TOKEN standing for the token
	}{{
		name: "ForcedRelease",
		act: func(t *testing.T, env []string, p *proc) {
			r := run(t, env, "release", "--force", "blame")
			require.Equal(t, 0, r.code, r.stderr.all())
		},
		lines: []string{`^tenure: lost lease "blame" with token TOKEN: .*\(the chain moved on: a clone, or an operator's release --force\); stopping the command \(SIGTERM now, SIGKILL in \d+ms\)$`},
	}, {
		name:  "RevokeSignal",
		act:   func(t *testing.T, env []string, p *proc) { p.signal(cli.RevokeSignal) },
		lines: []string{`^tenure: lease "blame" with token TOKEN revoked on wake or restore \(SIGPWR, which a resume or restore hook sends\); the command was killed and the lease is left to expire$`},
	}, {
		name: "TenureStopped",
		act: func(t *testing.T, env []string, p *proc) {
			cmd := commandOf(t, p)
			p.signal(syscall.SIGSTOP)
			awaitGone(t, cmd)
			p.stderr.await(`^tenure: watchdog: `) // before tenure runs again, so its lines come after
			p.signal(syscall.SIGCONT)
		},
		lines: []string{
			`^tenure: watchdog: the kill deadline passed without a renewal from tenure \(tenure stopped answering: stopped, or not scheduled\); killed the command's cgroup, its process group and \d+ processes of its tree$`,
			// Tenure, resumed, finds first the suspension, its lease's local
			// deadline passed (the stop outlasted the trusted part of the
			// TTL), or the watchdog's kill: which one depends on where its
			// timers stood when it was stopped.
			`^tenure: lost lease "blame" with token TOKEN: ((suspension detected|expired locally); stopping the command \(SIGKILL now: no grace is left\)|the watchdog killed the command while tenure was stopped or not scheduled)$`,
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := sqliteStore(t).env(t)
			p := start(t, env, "-v", "run", "--name", "blame", "--ttl", "3s", "--", "sh", "-c", `trap '' TERM
echo "started $TENURE_HOLDER $TENURE_TOKEN"
while :; do sleep 0.05; done`)
			token := p.stdout.await(startedLine)[3]
			tc.act(t, env, p)
			require.Equal(t, cli.ExitLost, p.wait(), p.stderr.all())
			var got []string // tenure's own lines, not the log's
			for _, line := range strings.Split(p.stderr.all(), "\n") {
				if strings.HasPrefix(line, "tenure: ") {
					got = append(got, line)
				}
			}
			require.Len(t, got, len(tc.lines), "tenure wrote:\n%s", p.stderr.all())
			for i, re := range tc.lines {
				require.Regexp(t, regexp.MustCompile(strings.ReplaceAll(re, "TOKEN", regexp.QuoteMeta(token))), got[i], "line %d of:\n%s", i+1, p.stderr.all())
			}
		})
	}
}
