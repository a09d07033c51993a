package supervise

import (
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/tenure-dev/tenure"
)

// Policy decides what tenure run does while its command runs under a
// lease, from the events its effect loop reports, as the library's engine
// does for a lease: [Policy.Step] takes no locks, starts no goroutine,
// reads no clock and makes no system call. Who kills what, and when:
//
//   - on loss: SIGTERM to the command's group and tree, SIGKILL the grace
//     later; at once when the loss was declared at or after the local
//     deadline or after the store let the lease go ([noGraceLeft]). The
//     watchdog is told the kill deadline ([WatchdogStopping]), so that its
//     backstop kill is tenure's decision, which tenure reports.
//   - while the tenure is trusted, each [FeedDue] feeds the watchdog the
//     tenure's local deadline plus the grace, still a safety margin before
//     the store can hand the lease on.
//   - on [RevokeSignal] or the command's "tenure revoke-inherited": revoke,
//     SIGKILL at once, no release, exit 79.
//   - after the command's normal exit: leftovers get SIGTERM, SIGKILL the
//     grace later, and the lease is released only once the tree is gone.
//   - on SIGTERM to tenure: forwarded, SIGKILL to the tree the grace later.
//   - on the command's own release: not a loss; the tree has the grace to
//     finish, and the command's status passes on.
//
// Times are CLOCK_MONOTONIC nanoseconds ([Now]).
type Policy struct {
	cfg PolicyConfig

	lost        error // why the tenure ended here, once it has (not by the command's release)
	revoked     bool
	revokedBy   string // who revoked, or on what: "by ...", "on ..."
	exited      bool   // the command's process (the group's leader) exited
	status      int    // the command's exit status, once exited
	stopping    bool   // SIGTERM was sent to the tree
	killed      bool   // SIGKILL was sent to the tree
	killArmed   bool   // a kill timer was set (it is set once)
	killPending bool   // that timer has not fired yet
	killAt      int64  // the kill deadline the watchdog was told last
	dogLast     int64  // the last deadline the watchdog was sent
	terminated  bool   // SIGTERM came to tenure and was forwarded: kill follows
	stoppedSelf bool   // tenure stopped itself with the command (^Z)
	selfRelease bool   // the command asked for the release
	selfDone    bool   // and it was released

	out []Action
}

// PolicyConfig is what a [Policy] knows of its tenure before the command
// starts.
type PolicyConfig struct {
	Lease  string
	Holder string // this run's holder, as the command's environment names it
	Token  tenure.Token
	// Grace is the time between SIGTERM and SIGKILL.
	Grace time.Duration
	// Terminal: the command's group is a terminal's foreground group.
	Terminal bool
	// The renderings below must be pure functions, as Step is.
	//
	// Reason says in a few words why a tenure ended.
	Reason func(error) string
	// Redact removes secrets (the store URL's) from a line.
	Redact func(string) string
	// StoreError renders an error of the store with what to do about it.
	StoreError func(error) string
}

// NewPolicy returns the policy for a command about to start under the
// tenure cfg describes; deadline is the watchdog deadline fed before the
// start.
func NewPolicy(cfg PolicyConfig, deadline int64) *Policy {
	return &Policy{cfg: cfg, dogLast: deadline}
}

// Tenure is what the effect loop reads of the lease as an event happens.
type Tenure struct {
	Live      bool          // the tenure is still held here (its token is not 0)
	Remaining time.Duration // until its local deadline
	Err       error         // why it ended, once it has
}

// Event is an input to [Policy.Step].
type Event interface{ event() }

// CommandExited: the command's process exited with Status; TreeGone says
// whether its whole tree is gone too.
type CommandExited struct {
	Status   int
	TreeGone bool
	Tenure   Tenure
}

// TreeGone: no process of the command's tree is left (polled after the
// command exited).
type TreeGone struct{ Tenure Tenure }

// LeaseEnded: the tenure ended (the lease's Done closed) with Err.
type LeaseEnded struct{ Err error }

// FeedDue: time to feed the watchdog. Stopped: at a terminal, the command
// (still running) is stopped by a signal.
type FeedDue struct {
	Tenure  Tenure
	Stopped bool
}

// Signal: tenure received Sig.
type Signal struct{ Sig syscall.Signal }

// Control: a call on the control socket (tenure release, progress or
// revoke-inherited run by the command). Answer it with one [Reply].
type Control struct {
	Op     string // "release", "progress" or "revoke"
	Lease  string
	Holder string
	Token  tenure.Token
	Tenure Tenure
}

// Control operations.
const (
	OpRelease  = "release"
	OpProgress = "progress"
	OpRevoke   = "revoke"
)

// SelfReleased answers [ReleaseForCommand]; its [Reply] goes to the call
// that asked.
type SelfReleased struct{ Err error }

// GraceOver: the kill timer set by [ArmKill] fired.
type GraceOver struct{}

// Cancelled: tenure run's context ended.
type Cancelled struct{}

// WatchdogAnswered answers [AskWatchdog].
type WatchdogAnswered struct{ Fired bool }

// Released answers [Release].
type Released struct{ Err error }

func (CommandExited) event()    {}
func (TreeGone) event()         {}
func (LeaseEnded) event()       {}
func (FeedDue) event()          {}
func (Signal) event()           {}
func (Control) event()          {}
func (SelfReleased) event()     {}
func (GraceOver) event()        {}
func (Cancelled) event()        {}
func (WatchdogAnswered) event() {}
func (Released) event()         {}

// Action is an output of [Policy.Step], to be carried out in order.
type Action interface{ action() }

// SendTree sends Sig to the command's group, cgroup and every
// descendant but the watchdog.
type SendTree struct{ Sig syscall.Signal }

// SendGroup forwards Sig to the command's process group.
type SendGroup struct{ Sig syscall.Signal }

// FeedWatchdog sends the watchdog a fresh kill deadline ([Dog.Deadline]).
type FeedWatchdog struct{ Deadline int64 }

// WatchdogStopping tells the watchdog that tenure kills the tree itself by
// Deadline ([Dog.Stopping]; the policy keeps the deadline in force).
type WatchdogStopping struct{ Deadline int64 }

// ArmKill sets the kill timer to fire at At; answer with [GraceOver].
type ArmKill struct{ At int64 }

// Revoke revokes the tenure locally (no release at the store).
type Revoke struct{}

// RecordProgress records the command's progress report.
type RecordProgress struct{}

// Reply answers the control call of the event being stepped.
type Reply struct {
	Released bool
	NotHeld  bool
	Revoked  bool
	Token    int64
	Fallback bool
	Error    string
}

// ReleaseForCommand releases the lease at the command's request, without
// blocking the loop; answer with [SelfReleased].
type ReleaseForCommand struct{}

// Say prints Line on standard error.
type Say struct{ Line string }

// EndTenure records that the tenure ended here, now (released or lost).
type EndTenure struct{}

// StopSelf takes the terminal back and stops tenure with SIGTSTP, as a
// shell's job does when ^Z stops its command.
type StopSelf struct{}

// GiveTerminal makes the command's group the terminal's foreground group.
type GiveTerminal struct{}

// RemoveCgroup removes the command's cgroup, if any.
type RemoveCgroup struct{}

// AskWatchdog asks whether the watchdog killed the tree; answer with
// [WatchdogAnswered].
type AskWatchdog struct{}

// Release releases the lease at the store; answer with [Released].
type Release struct{}

// ReleaseQuietly releases the lease at the store, best effort.
type ReleaseQuietly struct{}

// Exit ends tenure run with Code. Lost: the tenure was lost, for Reason;
// otherwise the command ran and exited.
type Exit struct {
	Code   int
	Lost   bool
	Reason string
}

func (SendTree) action()          {}
func (SendGroup) action()         {}
func (FeedWatchdog) action()      {}
func (WatchdogStopping) action()  {}
func (ArmKill) action()           {}
func (Revoke) action()            {}
func (RecordProgress) action()    {}
func (Reply) action()             {}
func (ReleaseForCommand) action() {}
func (Say) action()               {}
func (EndTenure) action()         {}
func (StopSelf) action()          {}
func (GiveTerminal) action()      {}
func (RemoveCgroup) action()      {}
func (AskWatchdog) action()       {}
func (Release) action()           {}
func (ReleaseQuietly) action()    {}
func (Exit) action()              {}

// ExitLost is tenure run's exit code when the tenure was lost or revoked
// while the command ran.
const ExitLost = 79

// Step takes one event at now and returns what to do, in order.
func (p *Policy) Step(now int64, ev Event) []Action {
	p.out = nil
	switch ev := ev.(type) {
	case CommandExited:
		p.commandExited(now, ev)
	case TreeGone:
		p.treeGone(ev.Tenure)
	case LeaseEnded:
		p.leaseEnded(now, ev.Err)
	case FeedDue:
		p.feedDue(now, ev)
	case Signal:
		p.signal(now, ev.Sig)
	case Control:
		p.control(now, ev)
	case SelfReleased:
		p.selfReleased(now, ev.Err)
	case GraceOver:
		p.graceOver()
	case Cancelled:
		p.do(SendGroup{syscall.SIGTERM})
	case WatchdogAnswered:
		p.watchdogAnswered(ev.Fired)
	case Released:
		p.released(ev.Err)
	}
	return p.out
}

func (p *Policy) do(a ...Action) { p.out = append(p.out, a...) }

func (p *Policy) say(format string, args ...any) { p.do(Say{fmt.Sprintf(format, args...)}) }

// watchdogStopping tells the watchdog that tenure kills the tree by at, moving
// its deadline earlier only, as [Dog.Stopping] does, and returns the
// deadline in force.
func (p *Policy) watchdogStopping(at int64) int64 {
	if p.dogLast == 0 || at < p.dogLast {
		p.dogLast = at
	}
	p.do(WatchdogStopping{p.dogLast})
	return p.dogLast
}

// stopTree sends SIGTERM now and SIGKILL at at, or SIGKILL at once when
// the deadline in force is now or past.
func (p *Policy) stopTree(now, at int64) {
	p.killAt = p.watchdogStopping(at)
	if p.killAt <= now {
		p.killed = true
		p.do(SendTree{syscall.SIGKILL})
		return
	}
	if !p.stopping {
		p.stopping = true
		p.do(SendTree{syscall.SIGTERM})
	}
	p.armKill(p.killAt)
}

// armKill sets the kill timer, unless one was set before.
func (p *Policy) armKill(at int64) {
	if p.killArmed {
		return
	}
	p.killArmed, p.killPending = true, true
	p.do(ArmKill{at})
}

// live reports whether the tenure is still this run's to use.
func (p *Policy) live(t Tenure) bool {
	return !p.selfRelease && p.lost == nil && !p.revoked && t.Live
}

func (p *Policy) revoke(now int64, by string) {
	p.revoked, p.revokedBy, p.killed = true, by, true
	p.do(Revoke{})
	p.watchdogStopping(now)
	p.do(SendTree{syscall.SIGKILL})
}

func (p *Policy) commandExited(now int64, ev CommandExited) {
	p.exited, p.status = true, ev.Status
	if ev.TreeGone {
		p.treeGone(ev.Tenure)
		return
	}
	if p.lost == nil && !p.stopping {
		// A normal exit with leftovers: they get SIGTERM, then SIGKILL
		// after the grace, before the release.
		p.stopTree(now, now+int64(p.cfg.Grace))
	}
}

// noGraceLeft reports whether a loss for err leaves no grace: declared at
// or after the local deadline (or revoked), or after the store let the
// lease go (released with --force, expired, taken over), when the next
// holder may be running.
func noGraceLeft(err error) bool {
	var le *tenure.LostError
	if !errors.As(err, &le) {
		return false
	}
	switch le.Reason {
	case tenure.LossSuspended, tenure.LossExpiredLocally, tenure.LossRevoked,
		tenure.LossExpiredAtStore, tenure.LossSuperseded:
		return true
	}
	return false
}

func (p *Policy) leaseEnded(now int64, err error) {
	var le *tenure.LostError
	if p.selfRelease && errors.As(err, &le) && le.Reason == tenure.LossReleased {
		return // The command's own release: see selfReleased.
	}
	p.lost = err
	p.do(EndTenure{})
	at := now + int64(p.cfg.Grace)
	if noGraceLeft(err) {
		at = now
	}
	p.stopTree(now, at)
	if p.revoked {
		return // Revoked here: its line, once the tree is gone, says why.
	}
	how := fmt.Sprintf("SIGTERM now, SIGKILL in %s", time.Duration(p.killAt-now).Round(time.Millisecond))
	if p.killed {
		how = "SIGKILL now: no grace is left"
	}
	p.say("lost lease %q with token %d: %s; stopping the command (%s)",
		p.cfg.Lease, p.cfg.Token, p.cfg.Redact(p.cfg.Reason(err)), how)
}

func (p *Policy) feedDue(now int64, ev FeedDue) {
	if p.lost == nil && !p.revoked && ev.Tenure.Live {
		p.dogLast = now + int64(ev.Tenure.Remaining+p.cfg.Grace)
		p.do(FeedWatchdog{p.dogLast})
	}
	if p.cfg.Terminal && !p.exited && ev.Stopped {
		// ^Z stopped the command: tenure stops too. The lease is not
		// renewed meanwhile: the watchdog kills the command at its
		// deadline. fg sends SIGCONT, forwarded by signal.
		p.stoppedSelf = true
		p.do(StopSelf{})
	}
}

func (p *Policy) signal(now int64, sig syscall.Signal) {
	switch {
	case sig == RevokeSignal:
		if !p.revoked {
			p.revoke(now, "on wake or restore (SIGPWR, which a resume or restore hook sends)")
		}
	case sig == syscall.SIGCONT && p.stoppedSelf:
		p.stoppedSelf = false
		if p.cfg.Terminal {
			p.do(GiveTerminal{})
		}
		p.do(SendGroup{sig})
	default:
		p.do(SendGroup{sig})
		if sig == syscall.SIGTERM && !p.terminated && !p.exited && !p.killArmed {
			// A stop request (docker stop, a pod's deletion, systemctl
			// stop): the command has the grace to exit, then its tree is
			// killed, so that the release comes before whoever asked
			// loses patience.
			p.terminated = true
			p.armKill(now + int64(p.cfg.Grace))
		}
	}
	if p.killed && !p.killPending && (p.stopping || p.revoked) {
		p.do(SendTree{syscall.SIGKILL})
	}
}

func (p *Policy) control(now int64, ev Control) {
	ours := ev.Lease == p.cfg.Lease && ev.Holder == p.cfg.Holder && ev.Token == p.cfg.Token
	live := p.live(ev.Tenure)
	switch {
	case ev.Op == OpProgress && ours && live:
		p.do(RecordProgress{}, Reply{Token: int64(p.cfg.Token)})
	case ev.Op == OpProgress:
		p.do(Reply{NotHeld: true, Error: fmt.Sprintf("tenure run no longer holds lease %q with token %d (%s); progress not recorded",
			p.cfg.Lease, p.cfg.Token, p.endedWhy(ev.Tenure))})
	case ev.Op == OpRevoke:
		// Any caller in the command's tree may ask: after a fork or a
		// restore, the environment is all a copy has.
		p.do(Reply{Revoked: !p.revoked, Token: int64(p.cfg.Token)})
		if !p.revoked {
			p.revoke(now, "by tenure revoke-inherited")
		}
	case ev.Op == OpRelease && ours && live:
		p.selfRelease = true
		p.do(ReleaseForCommand{})
	default:
		// Not this live tenure: let release ask the store.
		p.do(Reply{Fallback: true})
	}
}

// endedWhy says in a few words why the tenure is no longer live, for a
// progress report that came too late.
func (p *Policy) endedWhy(t Tenure) string {
	switch {
	case p.revoked:
		return "revoked"
	case p.selfRelease:
		return "the command released it"
	case p.lost != nil:
		return "lost: " + p.cfg.Reason(p.lost)
	case t.Err != nil:
		return "lost: " + p.cfg.Reason(t.Err)
	}
	return "no renewal was seen in time"
}

func (p *Policy) selfReleased(now int64, err error) {
	if err != nil {
		p.do(Reply{Error: fmt.Sprintf("tenure run could not release lease %q: %s", p.cfg.Lease, p.cfg.StoreError(err))})
		if p.lost == nil {
			// Lost before the release, or the release failed after the
			// tenure ended here: a loss either way.
			p.lost = err
			p.stopTree(now, now+int64(p.cfg.Grace))
			p.say("lost lease %q with token %d: %s; stopping the command (SIGTERM now, SIGKILL in %s)",
				p.cfg.Lease, p.cfg.Token, p.cfg.Redact(p.cfg.Reason(err)), time.Duration(p.killAt-now).Round(time.Millisecond))
		}
		return
	}
	p.selfDone = true
	p.do(EndTenure{}, Reply{Released: true, Token: int64(p.cfg.Token)})
	// The next holder may start now: the command's tree has the grace to
	// finish, then is killed (by tenure and the watchdog).
	p.killAt = p.watchdogStopping(now + int64(p.cfg.Grace))
	if !p.exited {
		p.armKill(p.killAt)
	}
}

func (p *Policy) graceOver() {
	p.killPending, p.killed = false, true
	switch {
	case p.selfDone && p.lost == nil:
		p.say("the command released lease %q (token %d) but its tree was still running %s later; killing it", p.cfg.Lease, p.cfg.Token, p.cfg.Grace)
	case p.terminated && p.lost == nil:
		p.say("the command's tree was still running %s (--grace) after SIGTERM; killing it", p.cfg.Grace)
	}
	p.do(SendTree{syscall.SIGKILL})
}

// treeGone decides the end once the command's tree is gone: revoked,
// lost (the watchdog's firing counts), released at the command's request,
// or released now.
func (p *Policy) treeGone(t Tenure) {
	p.do(RemoveCgroup{})
	switch {
	case p.revoked:
		p.do(EndTenure{})
		p.say("lease %q with token %d revoked %s; the command was killed and the lease is left to expire", p.cfg.Lease, p.cfg.Token, p.revokedBy)
		p.do(Exit{Code: ExitLost, Lost: true, Reason: tenure.LossRevoked.String()})
	case p.lost == nil && !p.selfRelease && !t.Live:
		// The watchdog fires only when tenure was not scheduled past the
		// kill deadline, so the tenure is no longer trusted either.
		p.do(AskWatchdog{})
	default:
		p.watchdogAnswered(false)
	}
}

func (p *Policy) watchdogAnswered(fired bool) {
	if fired {
		p.lost = errors.New("the watchdog killed the command")
		p.say("lost lease %q with token %d: the watchdog killed the command while tenure was stopped or not scheduled", p.cfg.Lease, p.cfg.Token)
	}
	switch {
	case p.lost != nil:
		if storeReachable(p.lost) {
			// The command is dead: let the next holder in now rather
			// than at expiry, if the lease is still ours at the store.
			p.do(ReleaseQuietly{})
		}
		p.do(Exit{Code: ExitLost, Lost: true, Reason: p.cfg.Reason(p.lost)})
	case p.selfRelease:
		// Released at the command's request (or that release failed
		// and the lease expires by its TTL): the command's status stands.
		p.do(Exit{Code: p.status})
	default:
		p.do(Release{})
	}
}

func (p *Policy) released(err error) {
	p.do(EndTenure{})
	switch {
	case errors.Is(err, tenure.ErrLost):
		p.say("lease %q with token %d ended (%s) as the command exited with status %d; passing that status on",
			p.cfg.Lease, p.cfg.Token, p.cfg.Redact(p.cfg.Reason(err)), p.status)
	case err != nil:
		p.say("could not release lease %q: %s; it expires by its TTL", p.cfg.Lease, p.cfg.StoreError(err))
	}
	p.do(Exit{Code: p.status})
}

// storeReachable reports whether a tenure lost for err may still be held
// at the store and the store answers: the loss was decided locally while
// renewals were succeeding. After a failed renewal or a local expiry the
// store is likely unreachable, and a release would only delay the exit;
// after a takeover the lease is not ours to release.
func storeReachable(err error) bool {
	var lost *tenure.LostError
	if !errors.As(err, &lost) {
		return false
	}
	switch lost.Reason {
	case tenure.LossSuspended, tenure.LossProgressStalled:
		// Not LossRevoked: run revokes on RevokeSignal, when this may be
		// a restored copy whose lease is the original's to release.
		return true
	}
	return false
}
