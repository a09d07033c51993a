package supervise

import (
	"errors"
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure"
)

// The policy's tests run no process: each row is a sequence of events at
// instants (milliseconds after the command started) and the actions each
// must produce. The rows are taken from `tenure run --help` (the "What is
// killed, when, and by whom" list, cmd/tenure/internal/cli/run.go) and
// from the exit-code table of `tenure help` (cmd/tenure/internal/cli/help.go);
// each row quotes the line it checks.
//
// Exit codes decided before the command starts are not the policy's and
// are checked by the cmd/tenure tests that run the binary: 64 (usage),
// 69 (store unreachable), 75 (held elsewhere, --wait-timeout), 78 (not
// migrated), 126/127 (cannot execute, not found), 128+N (a signal while
// waiting for the lease).

const (
	testLease  = "nightly"
	testHolder = "host/abc"
	testToken  = tenure.Token(7)
	testGrace  = 10 * time.Second
)

// ms is an instant, n milliseconds after the start.
func ms(n int64) int64 { return n * int64(time.Millisecond) }

// fed is the watchdog deadline fed before the start: a tenure with 20s
// left, plus the grace.
var fed = ms(0) + int64(20*time.Second+testGrace)

func newTestPolicy(terminal bool) *Policy {
	return NewPolicy(PolicyConfig{
		Lease: testLease, Holder: testHolder, Token: testToken, Grace: testGrace, Terminal: terminal,
		Reason:     func(err error) string { return "why: " + err.Error() },
		Redact:     func(s string) string { return s + " (redacted)" },
		StoreError: func(err error) string { return "store: " + err.Error() },
	}, fed)
}

type step struct {
	at   int64 // ms after the start
	ev   Event
	want []Action
}

var (
	live = Tenure{Live: true, Remaining: 20 * time.Second}
	// errRefused is a store's refusal of a release.
	errRefused = errors.New("store said no")
	stalled    = lostFor(tenure.LossProgressStalled)
	gone       = Tenure{}
)

func lostFor(r tenure.LossReason) error { return &tenure.LostError{Reason: r} }

func why(err error) string { return "why: " + err.Error() }

func lostLine(err error, how string) Say {
	return Say{fmt.Sprintf("lost lease %q with token %d: %s (redacted); stopping the command (%s)", testLease, testToken, why(err), how)}
}

// lossWithGrace and lossAtOnce are the steps of a loss for reason r while
// the command runs, then the command's exit by SIGTERM or SIGKILL, and the
// end: exit 79, released only when the store may still hold it for us.
func lossWithGrace(r tenure.LossReason, release bool) []step {
	err := lostFor(r)
	end := []Action{RemoveCgroup{}}
	if release {
		end = append(end, ReleaseQuietly{})
	}
	return []step{
		{1000, LeaseEnded{err}, []Action{EndTenure{}, WatchdogStopping{ms(11000)}, SendTree{syscall.SIGTERM}, ArmKill{ms(11000)},
			lostLine(err, "SIGTERM now, SIGKILL in 10s")}},
		{2000, CommandExited{Status: 143, TreeGone: true, Tenure: gone}, append(end, Exit{Code: ExitLost, Lost: true, Reason: why(err)})},
	}
}

func lossAtOnce(r tenure.LossReason) []step {
	err := lostFor(r)
	return []step{
		{1000, LeaseEnded{err}, []Action{EndTenure{}, WatchdogStopping{ms(1000)}, SendTree{syscall.SIGKILL},
			lostLine(err, "SIGKILL now: no grace is left")}},
		{1001, CommandExited{Status: 137, TreeGone: true, Tenure: gone}, []Action{RemoveCgroup{}, Exit{Code: ExitLost, Lost: true, Reason: why(err)}}},
	}
}

// policyRow is one scenario: the steps of one policy, from its start.
type policyRow struct {
	name     string
	terminal bool
	steps    []step
}

// checkRows steps a fresh policy through each row's steps and checks the
// actions of every step.
func checkRows(t *testing.T, rows []policyRow) {
	t.Helper()
	for _, tt := range rows {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := newTestPolicy(tt.terminal)
			for i, s := range tt.steps {
				require.Equal(t, s.want, p.Step(ms(s.at), s.ev), "step %d: %T at %dms", i, s.ev, s.at)
			}
		})
	}
}

func TestPolicyExitCodes(t *testing.T) {
	t.Parallel()
	checkRows(t, []policyRow{
		// Exit codes, help.go: "0 success; under run, the command's own
		// exit status passes through (128+N when signal N ended it)".
		{"ExitZeroPassesThrough", false, []step{
			{5000, CommandExited{Status: 0, TreeGone: true, Tenure: live}, []Action{RemoveCgroup{}, Release{}}},
			{5001, Released{}, []Action{EndTenure{}, Exit{Code: 0}}},
		}},
		{"ExitStatusPassesThrough", false, []step{
			{5000, CommandExited{Status: 3, TreeGone: true, Tenure: live}, []Action{RemoveCgroup{}, Release{}}},
			{5001, Released{}, []Action{EndTenure{}, Exit{Code: 3}}},
		}},
		{"SignalStatusPassesThrough", false, []step{
			{5000, CommandExited{Status: 128 + 9, TreeGone: true, Tenure: live}, []Action{RemoveCgroup{}, Release{}}},
			{5001, Released{}, []Action{EndTenure{}, Exit{Code: 137}}},
		}},
		// run --help: "could not release ...; it expires by its TTL": the
		// status stands.
		{"ReleaseFailsStatusStands", false, []step{
			{5000, CommandExited{Status: 2, TreeGone: true, Tenure: live}, []Action{RemoveCgroup{}, Release{}}},
			{5001, Released{Err: errRefused}, []Action{EndTenure{},
				Say{fmt.Sprintf("could not release lease %q: store: store said no; it expires by its TTL", testLease)}, Exit{Code: 2}}},
		}},
		{"LostAsTheCommandExited", false, []step{
			{5000, CommandExited{Status: 0, TreeGone: true, Tenure: live}, []Action{RemoveCgroup{}, Release{}}},
			{5001, Released{Err: lostFor(tenure.LossSuperseded)}, []Action{EndTenure{},
				Say{fmt.Sprintf("lease %q with token %d ended (why: %s (redacted)) as the command exited with status 0; passing that status on",
					testLease, testToken, lostFor(tenure.LossSuperseded))}, Exit{Code: 0}}},
		}},
	})
}

func TestPolicyLoss(t *testing.T) {
	t.Parallel()
	checkRows(t, []policyRow{
		// Exit codes, help.go: "79 the lease was lost while the command
		// ran, and the command was stopped (SIGTERM, then SIGKILL after
		// --grace)"; run --help: "by run, on loss (renewals failing, ...):
		// one line with the reason and the token, SIGTERM, SIGKILL after
		// the grace ...; exit 79".
		{"LossRenewErrorGrace", false, lossWithGrace(tenure.LossRenewError, false)},
		{"LossSeqMismatchGrace", false, lossWithGrace(tenure.LossSeqMismatch, false)},
		{"LossStoreClockAheadGrace", false, lossWithGrace(tenure.LossStoreClockAhead, false)},
		// run --help: "the lease is given up as lost ("progress stalled",
		// exit 79)"; the store still answers, so the lease is released
		// once the tree is gone.
		{"LossProgressStalledReleases", false, lossWithGrace(tenure.LossProgressStalled, true)},
		{"LossGraceRunsOut", false, append(lossWithGrace(tenure.LossRenewError, false)[:1],
			step{11000, GraceOver{}, []Action{SendTree{syscall.SIGKILL}}},
			step{11001, CommandExited{Status: 137, TreeGone: true, Tenure: gone}, []Action{RemoveCgroup{},
				Exit{Code: ExitLost, Lost: true, Reason: why(lostFor(tenure.LossRenewError))}}},
		)},
		// run --help: "at once when the loss was found at or after the
		// local deadline or after the store let the lease go (released
		// with --force, expired, taken over ...)".
		{"LossExpiredLocallyAtOnce", false, lossAtOnce(tenure.LossExpiredLocally)},
		{"LossSuspendedAtOnce", false, append(lossAtOnce(tenure.LossSuspended)[:1],
			step{1001, CommandExited{Status: 137, TreeGone: true, Tenure: gone}, []Action{RemoveCgroup{}, ReleaseQuietly{},
				Exit{Code: ExitLost, Lost: true, Reason: why(lostFor(tenure.LossSuspended))}}})},
		// The stand-down after `tenure release --force`: the store let the
		// lease go, no grace, no release of a lease that is not ours.
		{"ReleasedByForceAtOnce", false, lossAtOnce(tenure.LossExpiredAtStore)},
		{"SupersededAtOnce", false, lossAtOnce(tenure.LossSuperseded)},
		// A loss declared while the kill deadline fed to the watchdog is
		// earlier than now plus the grace: the earlier one stands.
		{"LossKeepsTheEarlierWatchdogDeadline", false, []step{
			{29000, LeaseEnded{lostFor(tenure.LossRenewError)}, []Action{EndTenure{}, WatchdogStopping{fed}, SendTree{syscall.SIGTERM}, ArmKill{fed},
				lostLine(lostFor(tenure.LossRenewError), "SIGTERM now, SIGKILL in 1s")}},
		}},
	})
}

func TestPolicyRevoke(t *testing.T) {
	t.Parallel()
	checkRows(t, []policyRow{
		// run --help: "on SIGPWR (kill -PWR PID, for resume and restore
		// hooks) ...: SIGKILL at once, the tenure is revoked and not
		// released (it expires by its TTL), exit 79".
		{"RevokeSignal", false, []step{
			{1000, Signal{RevokeSignal}, []Action{Revoke{}, WatchdogStopping{ms(1000)}, SendTree{syscall.SIGKILL}, SendTree{syscall.SIGKILL}}},
			{1001, LeaseEnded{lostFor(tenure.LossRevoked)}, []Action{EndTenure{}, WatchdogStopping{ms(1000)}, SendTree{syscall.SIGKILL}}},
			{1002, Signal{RevokeSignal}, []Action{SendTree{syscall.SIGKILL}}},
			{1003, CommandExited{Status: 137, TreeGone: true, Tenure: gone}, []Action{RemoveCgroup{}, EndTenure{},
				Say{fmt.Sprintf("lease %q with token %d revoked on wake or restore (SIGPWR, which a resume or restore hook sends); the command was killed and the lease is left to expire", testLease, testToken)},
				Exit{Code: ExitLost, Lost: true, Reason: "revoked"}}},
		}},
		// run --help: "or when the command runs "tenure revoke-inherited"".
		{"RevokeInherited", false, []step{
			{1000, Control{Op: OpRevoke, Tenure: live}, []Action{Reply{Revoked: true, Token: 7}, Revoke{},
				WatchdogStopping{ms(1000)}, SendTree{syscall.SIGKILL}}},
			{1001, Control{Op: OpRevoke, Tenure: gone}, []Action{Reply{Token: 7}}},
			{1002, CommandExited{Status: 137, TreeGone: true, Tenure: gone}, []Action{RemoveCgroup{}, EndTenure{},
				Say{fmt.Sprintf("lease %q with token %d revoked by tenure revoke-inherited; the command was killed and the lease is left to expire", testLease, testToken)},
				Exit{Code: ExitLost, Lost: true, Reason: "revoked"}}},
		}},
	})
}

func TestPolicyStop(t *testing.T) {
	t.Parallel()
	checkRows(t, []policyRow{
		// run --help: "after a normal exit: leftover descendants get
		// SIGTERM, then SIGKILL after the grace. The lease is released
		// only when none is left".
		{"LeftoversStoppedBeforeRelease", false, []step{
			{5000, CommandExited{Status: 0, Tenure: live}, []Action{WatchdogStopping{ms(15000)}, SendTree{syscall.SIGTERM}, ArmKill{ms(15000)}}},
			{6000, FeedDue{Tenure: live}, []Action{FeedWatchdog{ms(6000) + int64(20*time.Second+testGrace)}}},
			{15000, GraceOver{}, []Action{SendTree{syscall.SIGKILL}}},
			{15020, TreeGone{Tenure: live}, []Action{RemoveCgroup{}, Release{}}},
			{15021, Released{}, []Action{EndTenure{}, Exit{Code: 0}}},
		}},
		// run --help: "by run, on SIGTERM to tenure (docker stop, a pod's
		// deletion, systemctl stop): forwarded to the command's group,
		// SIGKILL to the tree the grace later; then the release" and
		// "the command's tree is killed if it still runs the grace later
		// (then run releases the lease and exits 137)".
		{"SIGTERMForwardedThenKilled", false, []step{
			{1000, Signal{syscall.SIGTERM}, []Action{SendGroup{syscall.SIGTERM}, ArmKill{ms(11000)}}},
			{2000, Signal{syscall.SIGTERM}, []Action{SendGroup{syscall.SIGTERM}}},
			{11000, GraceOver{}, []Action{Say{"the command's tree was still running 10s (--grace) after SIGTERM; killing it"}, SendTree{syscall.SIGKILL}}},
			{11001, CommandExited{Status: 137, TreeGone: true, Tenure: live}, []Action{RemoveCgroup{}, Release{}}},
			{11002, Released{}, []Action{EndTenure{}, Exit{Code: 137}}},
		}},
		{"SIGTERMCommandExitsInTime", false, []step{
			{1000, Signal{syscall.SIGTERM}, []Action{SendGroup{syscall.SIGTERM}, ArmKill{ms(11000)}}},
			{1500, CommandExited{Status: 143, TreeGone: true, Tenure: live}, []Action{RemoveCgroup{}, Release{}}},
			{1501, Released{}, []Action{EndTenure{}, Exit{Code: 143}}},
		}},
		// run --help: "SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2,
		// SIGWINCH and SIGCONT sent to tenure are forwarded to the
		// command's process group".
		{"SignalsForwarded", false, []step{
			{1000, Signal{syscall.SIGINT}, []Action{SendGroup{syscall.SIGINT}}},
			{1001, Signal{syscall.SIGHUP}, []Action{SendGroup{syscall.SIGHUP}}},
			{1002, Signal{syscall.SIGQUIT}, []Action{SendGroup{syscall.SIGQUIT}}},
			{1003, Signal{syscall.SIGUSR1}, []Action{SendGroup{syscall.SIGUSR1}}},
			{1004, Signal{syscall.SIGUSR2}, []Action{SendGroup{syscall.SIGUSR2}}},
			{1005, Signal{syscall.SIGWINCH}, []Action{SendGroup{syscall.SIGWINCH}}},
			{1006, Signal{syscall.SIGCONT}, []Action{SendGroup{syscall.SIGCONT}}},
		}},
		// After the tree was stopped and then SIGKILLed for a loss, a
		// signal that comes later kills it again (a process the first kill
		// missed).
		{"SignalAfterKillKillsAgain", false, append(lossWithGrace(tenure.LossRenewError, false)[:1],
			step{11000, GraceOver{}, []Action{SendTree{syscall.SIGKILL}}},
			step{11500, Signal{syscall.SIGINT}, []Action{SendGroup{syscall.SIGINT}, SendTree{syscall.SIGKILL}}})},
		// A loss with no grace left kills once; a signal is only forwarded.
		{"SignalAfterKillAtOnce", false, append(lossAtOnce(tenure.LossExpiredLocally)[:1],
			step{1500, Signal{syscall.SIGINT}, []Action{SendGroup{syscall.SIGINT}}})},
		// A context that ends (tenure's own shutdown) stops the command.
		{"Cancelled", false, []step{
			{1000, Cancelled{}, []Action{SendGroup{syscall.SIGTERM}}},
		}},
		// run --help: "when ^Z stops it, run takes the terminal back and
		// stops too".
		{"StopAtTerminal", true, []step{
			{1000, FeedDue{Tenure: live, Stopped: true}, []Action{FeedWatchdog{ms(1000) + int64(20*time.Second+testGrace)}, StopSelf{}}},
			{9000, Signal{syscall.SIGCONT}, []Action{GiveTerminal{}, SendGroup{syscall.SIGCONT}}},
			{9001, Signal{syscall.SIGCONT}, []Action{SendGroup{syscall.SIGCONT}}},
		}},
		{"NoStopWithoutTerminal", false, []step{
			{1000, FeedDue{Tenure: live, Stopped: true}, []Action{FeedWatchdog{ms(1000) + int64(20*time.Second+testGrace)}}},
		}},
	})
}

func TestPolicyWatchdog(t *testing.T) {
	t.Parallel()
	checkRows(t, []policyRow{
		// run --help: "by a watchdog ... fed each kill deadline": fed while
		// trusted, never after the loss ("watchdog quiet when tenure
		// decided": the deadline is tenure's, WatchdogStopping).
		{"WatchdogFedWhileTrusted", false, []step{
			{1000, FeedDue{Tenure: Tenure{Live: true, Remaining: 19 * time.Second}}, []Action{FeedWatchdog{ms(1000) + int64(29*time.Second)}}},
			{1001, FeedDue{Tenure: gone}, nil},
			{1002, LeaseEnded{lostFor(tenure.LossRenewError)}, []Action{EndTenure{}, WatchdogStopping{ms(11002)}, SendTree{syscall.SIGTERM}, ArmKill{ms(11002)},
				lostLine(lostFor(tenure.LossRenewError), "SIGTERM now, SIGKILL in 10s")}},
			{1003, FeedDue{Tenure: live}, nil},
		}},
		// run --help: "SIGKILL when tenure is stopped, starved or killed
		// past the deadline": the watchdog's kill is a loss, exit 79.
		{"WatchdogFired", false, []step{
			{30000, CommandExited{Status: 137, TreeGone: true, Tenure: gone}, []Action{RemoveCgroup{}, AskWatchdog{}}},
			{30001, WatchdogAnswered{Fired: true}, []Action{
				Say{fmt.Sprintf("lost lease %q with token %d: the watchdog killed the command while tenure was stopped or not scheduled", testLease, testToken)},
				Exit{Code: ExitLost, Lost: true, Reason: "why: the watchdog killed the command"}}},
		}},
		{"WatchdogDidNotFire", false, []step{
			{30000, CommandExited{Status: 0, TreeGone: true, Tenure: gone}, []Action{RemoveCgroup{}, AskWatchdog{}}},
			{30001, WatchdogAnswered{}, []Action{Release{}}},
			{30002, Released{}, []Action{EndTenure{}, Exit{Code: 0}}},
		}},
	})
}

func TestPolicyControl(t *testing.T) {
	t.Parallel()
	checkRows(t, []policyRow{
		// run --help: "The command's own "tenure release $TENURE_LEASE"
		// asks run to release ...: that is not a loss; run passes the
		// command's status on, and kills the tree if it still runs the
		// grace later".
		{"CommandReleasesThenExits", false, []step{
			{1000, Control{Op: OpRelease, Lease: testLease, Holder: testHolder, Token: testToken, Tenure: live}, []Action{ReleaseForCommand{}}},
			{1001, SelfReleased{}, []Action{EndTenure{}, Reply{Released: true, Token: 7}, WatchdogStopping{ms(11001)}, ArmKill{ms(11001)}}},
			{1002, LeaseEnded{lostFor(tenure.LossReleased)}, nil},
			{1003, FeedDue{Tenure: gone}, nil},
			{2000, CommandExited{Status: 4, TreeGone: true, Tenure: gone}, []Action{RemoveCgroup{}, Exit{Code: 4}}},
		}},
		{"CommandReleasesTreeKilled", false, []step{
			{1000, Control{Op: OpRelease, Lease: testLease, Holder: testHolder, Token: testToken, Tenure: live}, []Action{ReleaseForCommand{}}},
			{1001, SelfReleased{}, []Action{EndTenure{}, Reply{Released: true, Token: 7}, WatchdogStopping{ms(11001)}, ArmKill{ms(11001)}}},
			{11001, GraceOver{}, []Action{
				Say{fmt.Sprintf("the command released lease %q (token %d) but its tree was still running 10s later; killing it", testLease, testToken)},
				SendTree{syscall.SIGKILL}}},
			{11002, CommandExited{Status: 137, TreeGone: true, Tenure: gone}, []Action{RemoveCgroup{}, Exit{Code: 137}}},
		}},
		// The command released from a process it left behind: the tree
		// already had its deadline from the exit.
		{"LeftoverReleases", false, []step{
			{1000, CommandExited{Status: 0, Tenure: live}, []Action{WatchdogStopping{ms(11000)}, SendTree{syscall.SIGTERM}, ArmKill{ms(11000)}}},
			{1500, Control{Op: OpRelease, Lease: testLease, Holder: testHolder, Token: testToken, Tenure: live}, []Action{ReleaseForCommand{}}},
			{1501, SelfReleased{}, []Action{EndTenure{}, Reply{Released: true, Token: 7}, WatchdogStopping{ms(11000)}}},
			{1600, TreeGone{Tenure: gone}, []Action{RemoveCgroup{}, Exit{Code: 0}}},
		}},
		// A release that fails is a loss: SIGTERM, SIGKILL after the grace.
		{"CommandReleaseFails", false, []step{
			{1000, Control{Op: OpRelease, Lease: testLease, Holder: testHolder, Token: testToken, Tenure: live}, []Action{ReleaseForCommand{}}},
			{1001, SelfReleased{Err: errRefused}, []Action{
				Reply{Error: fmt.Sprintf("tenure run could not release lease %q: store: store said no", testLease)},
				WatchdogStopping{ms(11001)}, SendTree{syscall.SIGTERM}, ArmKill{ms(11001)},
				lostLine(errRefused, "SIGTERM now, SIGKILL in 10s")}},
			{2000, CommandExited{Status: 143, TreeGone: true, Tenure: gone}, []Action{RemoveCgroup{}, Exit{Code: ExitLost, Lost: true, Reason: why(errRefused)}}},
		}},
		// A release that fails after the loss was declared: the reply
		// says so, the loss stands as it was.
		{"CommandReleaseFailsAfterLoss", false, []step{
			{1000, Control{Op: OpRelease, Lease: testLease, Holder: testHolder, Token: testToken, Tenure: live}, []Action{ReleaseForCommand{}}},
			{1001, LeaseEnded{stalled}, []Action{EndTenure{}, WatchdogStopping{ms(11001)}, SendTree{syscall.SIGTERM}, ArmKill{ms(11001)},
				lostLine(stalled, "SIGTERM now, SIGKILL in 10s")}},
			{1002, SelfReleased{Err: errRefused}, []Action{Reply{Error: fmt.Sprintf("tenure run could not release lease %q: store: store said no", testLease)}}},
		}},
		// A release for another lease, token or holder, or once the
		// tenure ended here: release asks the store itself.
		{"ReleaseNotOurs", false, []step{
			{1000, Control{Op: OpRelease, Lease: "other", Holder: testHolder, Token: testToken, Tenure: live}, []Action{Reply{Fallback: true}}},
			{1001, Control{Op: OpRelease, Lease: testLease, Holder: "host/def", Token: testToken, Tenure: live}, []Action{Reply{Fallback: true}}},
			{1002, Control{Op: OpRelease, Lease: testLease, Holder: testHolder, Token: 6, Tenure: live}, []Action{Reply{Fallback: true}}},
			{1003, Control{Op: OpRelease, Lease: testLease, Holder: testHolder, Token: testToken, Tenure: gone}, []Action{Reply{Fallback: true}}},
			{1004, Control{Op: "frobnicate", Lease: testLease, Holder: testHolder, Token: testToken, Tenure: live}, []Action{Reply{Fallback: true}}},
		}},
		// run --help: "the command must report progress at least every D
		// with "tenure progress"".
		{"Progress", false, []step{
			{1000, Control{Op: OpProgress, Lease: testLease, Holder: testHolder, Token: testToken, Tenure: live}, []Action{RecordProgress{}, Reply{Token: 7}}},
			{1001, Control{Op: OpProgress, Lease: testLease, Holder: testHolder, Token: testToken, Tenure: gone},
				[]Action{Reply{NotHeld: true, Error: progressRefused("no renewal was seen in time")}}},
			{1002, Control{Op: OpProgress, Lease: testLease, Holder: testHolder, Token: testToken, Tenure: Tenure{Err: stalled}},
				[]Action{Reply{NotHeld: true, Error: progressRefused("lost: " + why(stalled))}}},
			{1003, Control{Op: OpProgress, Lease: "other", Holder: testHolder, Token: testToken, Tenure: live},
				[]Action{Reply{NotHeld: true, Error: progressRefused("no renewal was seen in time")}}},
		}},
		{"ProgressAfterLoss", false, append(lossWithGrace(tenure.LossProgressStalled, true)[:1],
			step{1500, Control{Op: OpProgress, Lease: testLease, Holder: testHolder, Token: testToken, Tenure: live},
				[]Action{Reply{NotHeld: true, Error: progressRefused("lost: " + why(stalled))}}})},
		{"ProgressAfterRevoke", false, []step{
			{1000, Signal{RevokeSignal}, []Action{Revoke{}, WatchdogStopping{ms(1000)}, SendTree{syscall.SIGKILL}, SendTree{syscall.SIGKILL}}},
			{1001, Control{Op: OpProgress, Lease: testLease, Holder: testHolder, Token: testToken, Tenure: live},
				[]Action{Reply{NotHeld: true, Error: progressRefused("revoked")}}},
		}},
		{"ProgressAfterOwnRelease", false, []step{
			{1000, Control{Op: OpRelease, Lease: testLease, Holder: testHolder, Token: testToken, Tenure: live}, []Action{ReleaseForCommand{}}},
			{1001, Control{Op: OpProgress, Lease: testLease, Holder: testHolder, Token: testToken, Tenure: live},
				[]Action{Reply{NotHeld: true, Error: progressRefused("the command released it")}}},
		}},
	})
}

func progressRefused(why string) string {
	return fmt.Sprintf("tenure run no longer holds lease %q with token %d (%s); progress not recorded", testLease, testToken, why)
}

// TestPolicyStopTreeOnce: SIGTERM goes to the tree once, and the kill
// timer is set once, however many reasons to stop it come.
func TestPolicyStopTreeOnce(t *testing.T) {
	t.Parallel()
	p := newTestPolicy(false)
	err := lostFor(tenure.LossRenewError)
	require.Equal(t, []Action{WatchdogStopping{ms(3000)}, SendTree{syscall.SIGTERM}, ArmKill{ms(3000)}},
		p.Step(ms(-7000), CommandExited{Status: 0, Tenure: live}))
	require.Equal(t, []Action{EndTenure{}, WatchdogStopping{ms(3000)}, lostLine(err, "SIGTERM now, SIGKILL in 2s")},
		p.Step(ms(1000), LeaseEnded{err}))
	require.Equal(t, []Action{SendTree{syscall.SIGKILL}}, p.Step(ms(3000), GraceOver{}))
}

func TestNoGraceLeft(t *testing.T) {
	t.Parallel()
	for r, want := range map[tenure.LossReason]bool{
		tenure.LossExpiredLocally:  true,
		tenure.LossSuspended:       true,
		tenure.LossRevoked:         true,
		tenure.LossExpiredAtStore:  true,
		tenure.LossSuperseded:      true,
		tenure.LossRenewError:      false,
		tenure.LossSeqMismatch:     false,
		tenure.LossProgressStalled: false,
		tenure.LossStoreClockAhead: false,
		tenure.LossReleased:        false,
		tenure.LossClosed:          false,
	} {
		require.Equal(t, want, noGraceLeft(lostFor(r)), r.String())
	}
	require.False(t, noGraceLeft(errors.New("x")))
}

func TestStoreReachable(t *testing.T) {
	t.Parallel()
	require.True(t, storeReachable(lostFor(tenure.LossSuspended)))
	require.True(t, storeReachable(lostFor(tenure.LossProgressStalled)))
	require.False(t, storeReachable(lostFor(tenure.LossRevoked)))
	require.False(t, storeReachable(lostFor(tenure.LossRenewError)))
	require.False(t, storeReachable(lostFor(tenure.LossSuperseded)))
	require.False(t, storeReachable(errors.New("x")))
}

// world drives a policy the way run's effect loop does, from a fuzzer's
// bytes: the events that can happen next, and the answers the policy
// asked for. It checks, at every step, the promises run makes whatever
// happens in between.
type world struct {
	t   *testing.T
	p   *Policy
	now int64

	exited, treeGone bool
	leaseEnded       bool
	revoked          bool // the policy revoked
	lostHere         bool // a loss reached the policy (not the command's release)
	selfPending      bool // a release for the command is in flight
	selfReleased     bool // and it succeeded
	armed            bool
	dogDeadline      int64
	pending          Event // the answer the policy asked for
	exit             *Exit
}

var fuzzReasons = []tenure.LossReason{tenure.LossExpiredLocally, tenure.LossRenewError, tenure.LossSuperseded,
	tenure.LossExpiredAtStore, tenure.LossSeqMismatch, tenure.LossSuspended, tenure.LossProgressStalled, tenure.LossStoreClockAhead}

// next makes the event that b chooses, among those that can happen now.
func (w *world) next(b byte) Event {
	if w.pending != nil {
		ev := w.pending
		w.pending = nil
		return ev
	}
	w.now += int64(b%64) * int64(100*time.Millisecond)
	// A revoke reaches the lease a little later: the tenure still reads
	// live until its end is delivered.
	tn := Tenure{Live: !w.leaseEnded && !w.selfReleased, Remaining: 20 * time.Second}
	switch b % 9 {
	case 0:
		if !w.exited {
			w.exited = true
			return CommandExited{Status: int(b % 3), TreeGone: b%2 == 0, Tenure: tn}
		}
		return TreeGone{Tenure: tn}
	case 1:
		if w.leaseEnded {
			return GraceOver{}
		}
		w.leaseEnded = true
		switch {
		case w.revoked:
			return LeaseEnded{lostFor(tenure.LossRevoked)}
		case w.selfReleased:
			return LeaseEnded{lostFor(tenure.LossReleased)}
		}
		w.lostHere = true
		return LeaseEnded{lostFor(fuzzReasons[int(b/9)%len(fuzzReasons)])}
	case 2:
		return FeedDue{Tenure: tn, Stopped: b%2 == 0}
	case 3:
		return Signal{[]syscall.Signal{syscall.SIGTERM, syscall.SIGINT, RevokeSignal, syscall.SIGCONT}[int(b/9)%4]}
	case 4:
		return Control{Op: []string{OpRelease, OpProgress, OpRevoke}[int(b/9)%3], Lease: testLease, Holder: testHolder, Token: testToken, Tenure: tn}
	case 5:
		if w.selfPending {
			w.selfPending = false
			if b%2 == 0 {
				w.selfReleased = true
				return SelfReleased{}
			}
			w.lostHere = true
			return SelfReleased{Err: errRefused}
		}
		return Cancelled{}
	case 6:
		if w.armed {
			return GraceOver{}
		}
	}
	return FeedDue{Tenure: tn}
}

// check steps the policy through ev and checks what it does.
func (w *world) check(ev Event) {
	acts := w.p.Step(w.now, ev)
	replies := 0
	for i, a := range acts {
		require.Nil(w.t, w.exit, "an action after Exit: %#v", a)
		switch a := a.(type) {
		case Exit:
			require.Equal(w.t, len(acts)-1, i, "Exit is not the last action")
			require.True(w.t, w.treeGone, "exit while the tree may run")
			w.exit = &a
		case Release:
			require.False(w.t, w.revoked, "a revoked tenure is released")
			require.True(w.t, w.treeGone, "released while the tree may run")
			w.pending = Released{}
		case ReleaseQuietly:
			require.False(w.t, w.revoked, "a revoked tenure is released")
			require.True(w.t, w.treeGone, "released while the tree may run")
		case FeedWatchdog:
			require.False(w.t, w.revoked || w.lostHere, "the watchdog fed after the tenure ended")
			w.dogDeadline = a.Deadline
		case WatchdogStopping:
			require.LessOrEqual(w.t, a.Deadline, w.dogDeadline, "the kill deadline moved later")
			w.dogDeadline = a.Deadline
		case ArmKill:
			require.False(w.t, w.armed, "the kill timer set twice")
			w.armed = true
		case Revoke:
			w.revoked = true
		case ReleaseForCommand:
			w.selfPending = true
		case Reply:
			replies++
		case RemoveCgroup:
			w.treeGone = true
		case AskWatchdog:
			w.pending = WatchdogAnswered{Fired: w.now%2 == 0}
		}
	}
	switch ev.(type) {
	case Control:
		if w.selfPending && slices.Contains(acts, Action(ReleaseForCommand{})) {
			require.Zero(w.t, replies, "the command's release answered before it was done")
		} else {
			require.Equal(w.t, 1, replies, "a control call answered %d times", replies)
		}
	case SelfReleased:
		require.Equal(w.t, 1, replies, "the command's release answered %d times", replies)
	}
	if w.exit != nil && (w.revoked || w.lostHere) {
		require.Equal(w.t, ExitLost, w.exit.Code, "a lost or revoked tenure exits %d", w.exit.Code)
		require.True(w.t, w.exit.Lost)
	}
}

// FuzzPolicy steps the policy through event sequences chosen by the
// fuzzer, as run's effect loop would deliver them, and checks that a
// revoked tenure is never released, nothing is released or exited while
// the tree may run, the watchdog is not fed once the tenure ended, the
// kill deadline only moves earlier, the kill timer is set once, every
// control call is answered once, and a lost tenure exits 79.
func FuzzPolicy(f *testing.F) {
	f.Add([]byte{0})
	f.Add([]byte{1, 9, 0, 0})
	f.Add([]byte{12, 3, 0})
	f.Add([]byte{4, 5, 0})
	f.Add([]byte{13, 4, 2, 6, 9, 18})
	f.Add([]byte{3, 30, 21, 1, 0})
	f.Add([]byte{22, 4, 14, 2, 6, 9, 1, 63})
	f.Fuzz(func(t *testing.T, script []byte) {
		w := &world{t: t, p: newTestPolicy(true), dogDeadline: fed}
		for _, b := range script {
			if w.exit != nil {
				return
			}
			w.check(w.next(b))
		}
		// The end: the tree goes, and the answers the policy asks for come.
		for i := 0; w.exit == nil && i < 4; i++ {
			var ev Event = TreeGone{}
			switch {
			case w.pending != nil:
				ev, w.pending = w.pending, nil
			case !w.exited:
				w.exited = true
				ev = CommandExited{Status: 1, TreeGone: true}
			}
			w.check(ev)
		}
		require.NotNil(t, w.exit, "the policy did not exit once the tree was gone")
	})
}
