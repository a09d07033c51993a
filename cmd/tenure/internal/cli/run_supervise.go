package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tenure-dev/tenure"
	"github.com/tenure-dev/tenure/cmd/tenure/internal/storeurl"
	"github.com/tenure-dev/tenure/cmd/tenure/internal/supervise"
	"github.com/tenure-dev/tenure/store"
)

// supervise runs the command under lease and returns when it and every
// process of its tree have exited. What to do, and when, is
// [supervise.Policy]'s to decide; supervise sets up what it acts on: the
// command's cgroup (where the host allows one), the watchdog (run
// --watchdog, a separate process that kills the tree when tenure is
// stopped, starved or dead past the kill deadline), and the command with
// Pdeathsig SIGKILL.
func (o *runOptions) supervise(ctx context.Context, e *env, client *tenure.Client, lease *tenure.Lease, sigs <-chan os.Signal, target storeurl.Target, h *health, args []string) error {
	token := lease.Token()
	if token == 0 {
		return o.lostBeforeStart(lease)
	}
	s := &supervision{ctx: ctx, e: e, o: o, client: client, lease: lease, token: token, h: h, self: os.Getpid(), released: make(chan selfReleased, 1)}
	// One source of truth for the timing: the validated client config.
	cfg := client.Config()
	feedEvery := max(cfg.TTL/10/4, 5*time.Millisecond)
	deadline, err := s.startWatchdog(cfg.Grace)
	if err != nil {
		return err
	}
	// Orphans re-parented to run (a subreaper, or PID 1 in a container)
	// are reaped as they exit, not only once the command has: a long-lived
	// command that leaves daemons behind would fill the process table
	// with zombies.
	var reap <-chan os.Signal
	if wholeProcess {
		chld := make(chan os.Signal, 1)
		signal.Notify(chld, syscall.SIGCHLD)
		defer signal.Stop(chld)
		reap = chld
	}
	// The command's own channel back to us: `tenure release` run inside
	// it asks us to release, so that the end is its doing, not a loss;
	// `tenure progress` feeds the progress gate; `tenure revoke-inherited`
	// revokes.
	control := EnvControl + "=" // not an outer run's
	var calls <-chan controlCall
	if ctl, err := listenControl(); err == nil {
		defer ctl.close()
		calls = ctl.calls
		control += ctl.path()
	}
	s.tty = foregroundTTY(e.stdin)
	if s.tty >= 0 {
		defer takeTerminal(s.tty)
	}
	if err := s.start(args, control); err != nil {
		return err
	}
	defer func() { _, _ = s.dog.Disarm() }() // A watchdog that died has nothing left to do.
	p := supervise.NewPolicy(supervise.PolicyConfig{
		Lease: o.name, Holder: lease.Holder().String(), Token: s.token, Grace: cfg.Grace, Terminal: s.tty >= 0,
		Reason: lossReason, Redact: target.Redact, StoreError: func(err error) string { return message(target.Wrap(err)) },
	}, deadline)
	return s.loop(p, sigs, calls, reap, feedEvery)
}

// lostBeforeStart is run's end when the tenure was lost before the
// command started.
func (o *runOptions) lostBeforeStart(lease *tenure.Lease) error {
	o.out.Ended, o.out.Reason = endedLost, lossReason(lease.Err())
	return &exitError{code: ExitLost, err: fmt.Errorf("lost lease %q before the command started: %s; nothing was run", o.name, lossReason(lease.Err()))}
}

// supervision is one command running under a lease: the world that the
// actions of a [supervise.Policy] act on, and its effect loop.
type supervision struct {
	ctx    context.Context
	e      *env
	o      *runOptions
	client *tenure.Client
	lease  *tenure.Lease
	token  tenure.Token // the tenure's, as the command's environment has it
	h      *health
	self   int // tenure's own pid
	tty    int // the terminal whose foreground group the command leads, or -1

	cg     *supervise.Cgroup
	dog    *supervise.Dog
	cmd    *exec.Cmd
	group  int            // the command's pid, and its process group's id
	leader supervise.Proc // the command as itself: its pid may name a stranger once reaped

	wg        sync.WaitGroup
	released  chan selfReleased // the outcome of the release the command asked for
	killTimer *time.Timer
	kill      <-chan time.Time
	poll      *time.Ticker
}

// startWatchdog makes the command's cgroup where the host allows it and
// starts the watchdog, fed the deadline it returns: the tenure's local
// deadline plus the grace, still a margin before the store can hand the
// lease on.
func (s *supervision) startWatchdog(grace time.Duration) (int64, error) {
	mechanism := "the command's process group and subtree"
	if wholeProcess {
		// Orphans of the command come to us, not to init, so the sweep and
		// the watchdog still find them. Failing that (kernel before 3.4),
		// the process group and the command's subtree remain.
		if err := supervise.BecomeSubreaper(); err == nil {
			mechanism = "child subreaper and task scan: every descendant, setsid escapees too"
		}
		// Where the host allows it, the command is born in a cgroup of
		// its own, which no process of its tree can leave.
		var err error
		if s.cg, err = supervise.NewCgroup(fmt.Sprintf("tenure-run-%d", s.self)); err == nil {
			_, mechanism = supervise.Mode()
		} else {
			mechanism += " (no cgroup: " + err.Error() + ")"
		}
	}
	// The watchdog writes its one line straight to tenure's standard error
	// when that is a file: another copying goroutine would race with the
	// command's on a writer that is not.
	dogErr, ok := s.e.stderr.(*os.File)
	if !ok {
		dogErr = os.Stderr
	}
	var err error
	if s.dog, err = supervise.StartDog(watchdogExe, []string{"run", "--watchdog"}, s.cg, dogErr); err != nil {
		removeCgroup(s.e, s.cg)
		releaseQuietly(s.ctx, s.lease)
		return 0, fmt.Errorf("run: cannot start the watchdog (%s): %s; lease %q released, nothing was run", watchdogExe, message(err), s.o.name)
	}
	s.e.logger.Info("supervising the command", "lease", s.o.name, "tracked_by", mechanism, "watchdog_pid", s.dog.Pid())
	now := supervise.Now()
	if s.lease.Token() == 0 {
		_, _ = s.dog.Disarm() // Nothing was started.
		removeCgroup(s.e, s.cg)
		return 0, s.o.lostBeforeStart(s.lease)
	}
	deadline := now + int64(s.lease.Remaining()+grace)
	_ = s.dog.Deadline(deadline) // A watchdog that is gone is noticed by its exit.
	return deadline, nil
}

// start starts the command args in its own process group (in the
// cgroup, if any), with the tenure in its environment, and tells the
// watchdog about it.
func (s *supervision) start(args []string, control string) error {
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = s.e.stdout, s.e.stderr
	if s.e.stdin != nil {
		cmd.Stdin = s.e.stdin
	}
	cmd.Env = append(s.e.environ(),
		EnvToken+"="+s.token.String(),
		EnvLease+"="+s.o.name,
		EnvHolder+"="+s.lease.Holder().String(),
		control,
	)
	cmd.Env = append(cmd.Env, s.o.slotEnv(s.lease)...)
	if mark, err := supervise.TreeMark(); err == nil {
		cmd.Env = append(cmd.Env, mark)
	}
	if s.o.store != "" {
		cmd.Env = append(cmd.Env, storeurl.EnvVar+"="+s.o.store)
	}
	cmd.Env = append(cmd.Env, s.o.win.env()...)
	cmd.SysProcAttr = supervise.ProcAttr()
	if s.tty >= 0 {
		// Interactive: the command's group becomes the terminal's
		// foreground group (it reads the terminal and gets ^C, ^Z); run
		// takes the terminal back when the command is done.
		cmd.SysProcAttr.Foreground = true
		cmd.SysProcAttr.Ctty = 0 // the command's standard input
	}
	// Only when stdout or stderr are not files does Wait copy them; do not
	// let a grandchild holding the pipe keep tenure waiting.
	cmd.WaitDelay = time.Second
	var err error
	if s.cmd, s.cg, err = startInCgroup(s.e, cmd, s.cg); err != nil {
		_, _ = s.dog.Disarm() // Nothing was started.
		releaseQuietly(s.ctx, s.lease)
		code := ExitCannotExec
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
			code = ExitNotFound
		}
		return &exitError{code: code, err: fmt.Errorf("run: cannot start %q: %s; lease %q released", args[0], message(err), s.o.name)}
	}
	s.group = s.cmd.Process.Pid // Setpgid makes the command lead a group of its own id.
	s.leader, _ = supervise.Identify(s.group)
	if !wholeProcess {
		_ = s.dog.Root(s.group)
	}
	_ = s.dog.Group(s.leader)
	return nil
}

// loop is the effect loop: it turns what happens (the command's exit, a
// signal, a control call, the lease's end, a timer) into events for p,
// and carries out p's actions until p says to exit.
func (s *supervision) loop(p *supervise.Policy, sigs <-chan os.Signal, calls <-chan controlCall, reap <-chan os.Signal, feedEvery time.Duration) error {
	exited := make(chan struct{})
	s.wg.Go(func() {
		_ = s.cmd.Wait() // Its outcome is read from cmd.ProcessState.
		close(exited)
	})
	defer s.wg.Wait()
	feed := time.NewTicker(feedEvery)
	defer feed.Stop()
	defer s.stopTimers()
	done, ctxDone := s.lease.Done(), s.ctx.Done()
	var poll <-chan time.Time
	for {
		var ev supervise.Event
		var reply chan controlReply // the control call ev answers
		select {
		case <-exited:
			exited = nil
			feed.Reset(feedEvery)
			s.poll = time.NewTicker(20 * time.Millisecond)
			poll = s.poll.C
			ev = supervise.CommandExited{Status: exitStatus(s.cmd.ProcessState), TreeGone: s.treeGone(), Tenure: s.tenure()}
		case <-poll:
			if !s.treeGone() {
				continue
			}
			ev = supervise.TreeGone{Tenure: s.tenure()}
		case <-reap:
			supervise.Reap(s.group, s.dog.Pid())
			continue
		case <-feed.C:
			// commandStopped reads /proc: only at a terminal, where ^Z
			// stops the command, and while it runs.
			ev = supervise.FeedDue{Tenure: s.tenure(), Stopped: s.tty >= 0 && exited != nil && commandStopped(s.group)}
		case call := <-calls:
			r := call.req
			reply = call.reply
			ev = supervise.Control{Op: r.Op, Lease: r.Lease, Holder: r.Holder, Token: store.Token(r.Token), Tenure: s.tenure()}
		case r := <-s.released:
			reply = r.reply
			ev = supervise.SelfReleased{Err: r.err}
		case <-done:
			done = nil
			ev = supervise.LeaseEnded{Err: s.lease.Err()}
		case <-s.kill:
			s.kill = nil
			ev = supervise.GraceOver{}
		case sig := <-sigs:
			sg, ok := sig.(syscall.Signal)
			if !ok {
				continue
			}
			ev = supervise.Signal{Sig: sg}
		case <-ctxDone:
			ctxDone = nil
			ev = supervise.Cancelled{}
		}
		for ev != nil {
			var next supervise.Event
			for _, a := range p.Step(supervise.Now(), ev) {
				if x, ok := a.(supervise.Exit); ok {
					return s.exit(x)
				}
				if n := s.perform(a, reply); n != nil {
					next = n
				}
			}
			ev = next
		}
	}
}

// perform carries out one action of the policy; an action that the
// policy wants answered at once returns the answer.
func (s *supervision) perform(a supervise.Action, reply chan controlReply) supervise.Event {
	switch a := a.(type) {
	case supervise.SendTree:
		s.signalTree(a.Sig)
	case supervise.SendGroup:
		// While the group is still the command's (see supervise.SignalGroup).
		supervise.SignalGroup(s.leader, a.Sig)
	case supervise.FeedWatchdog:
		_ = s.dog.Deadline(a.Deadline) // A watchdog that is gone is noticed by its exit.
	case supervise.WatchdogStopping:
		s.dog.Stopping(a.Deadline)
	case supervise.ArmKill:
		s.killTimer = time.NewTimer(time.Duration(a.At - supervise.Now()))
		s.kill = s.killTimer.C
	case supervise.Revoke:
		s.client.Revoke()
	case supervise.RecordProgress:
		s.lease.Progress()
		s.h.progressed()
	case supervise.Reply:
		reply <- controlReply(a)
	case supervise.ReleaseForCommand:
		s.wg.Go(func() {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(s.ctx), releaseTimeout)
			defer cancel()
			s.released <- selfReleased{err: s.lease.Release(rctx), reply: reply}
		})
	case supervise.Say:
		s.e.errorf("%s", a.Line)
	case supervise.EndTenure:
		s.o.out.endedNow()
	case supervise.StopSelf:
		// Hand the terminal back to the shell and stop with the signal ^Z
		// sends, as a shell's job does (a pty wrapper such as script(1)
		// takes a child's SIGSTOP as a cue to stop itself).
		takeTerminal(s.tty)
		_ = syscall.Kill(s.self, syscall.SIGTSTP)
	case supervise.GiveTerminal:
		giveTerminal(s.tty, s.group)
	case supervise.RemoveCgroup:
		removeCgroup(s.e, s.cg)
	case supervise.AskWatchdog:
		return supervise.WatchdogAnswered{Fired: s.dog.Fired(time.Second)}
	case supervise.Release:
		s.finishWindow()
		rctx, cancel := context.WithTimeout(context.WithoutCancel(s.ctx), releaseTimeout)
		defer cancel()
		return supervise.Released{Err: s.lease.Release(rctx)}
	case supervise.ReleaseQuietly:
		releaseQuietly(s.ctx, s.lease)
	}
	return nil
}

// exit records the outcome the policy decided and returns run's result.
func (s *supervision) exit(x supervise.Exit) error {
	s.o.out.commandEnded(s.cmd.ProcessState)
	s.o.out.Ended = endedExited
	if x.Lost {
		s.o.out.Ended, s.o.out.Reason = endedLost, x.Reason
	}
	if x.Code == 0 {
		return nil
	}
	return &exitError{code: x.Code}
}

func (s *supervision) stopTimers() {
	if s.killTimer != nil {
		s.killTimer.Stop()
	}
	if s.poll != nil {
		s.poll.Stop()
	}
}

// tenure reads the lease for an event.
func (s *supervision) tenure() supervise.Tenure {
	return supervise.Tenure{Live: s.lease.Token() != 0, Remaining: s.lease.Remaining(), Err: s.lease.Err()}
}

// tree returns the pid whose descendants make the command's tree: run
// itself, a subreaper that every orphan of the tree comes to; or, when
// run is not the whole process, the command, and only while its pid
// still names it (0 after: a reaped pid may name a stranger, whose
// children are not ours).
func (s *supervision) tree() int {
	switch {
	case wholeProcess:
		return s.self
	case s.leader.Exists():
		return s.group
	}
	return 0
}

// signalTree sends sig to the command's group and to every descendant of
// the tree but the watchdog.
func (s *supervision) signalTree(sig syscall.Signal) {
	if s.cg != nil && sig == syscall.SIGKILL {
		s.cg.Kill()
	} else if s.cg != nil {
		s.cg.Signal(sig)
	}
	supervise.SignalTree(s.leader, s.tree(), sig, s.dog.Pid())
}

// treeGone reports whether no process of the tree is alive, and the
// cgroup, if any, is empty; it reaps orphans.
func (s *supervision) treeGone() bool {
	if wholeProcess {
		supervise.Reap(s.group, s.dog.Pid())
	}
	if s.leader.Alive() || (s.cg != nil && s.cg.Populated()) {
		return false
	}
	return len(supervise.Live(s.tree(), s.dog.Pid(), s.group)) == 0
}

// selfReleased is the outcome of a release the command asked for.
type selfReleased struct {
	err   error
	reply chan controlReply
}

// foregroundTTY returns the descriptor of in when it is a terminal whose
// foreground process group is ours, else -1.
func foregroundTTY(in *os.File) int {
	if in == nil {
		return -1
	}
	fd := int(in.Fd())
	pgrp, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP)
	if err != nil || pgrp != unix.Getpgrp() {
		return -1
	}
	return fd
}

// giveTerminal makes group the foreground process group of the terminal
// fd; takeTerminal makes ours it again. A background process that does
// this gets SIGTTOU, ignored for the call.
func giveTerminal(fd, group int) {
	signal.Ignore(syscall.SIGTTOU)
	defer signal.Reset(syscall.SIGTTOU)
	_ = unix.IoctlSetPointerInt(fd, unix.TIOCSPGRP, group) // A terminal that went away: nothing to give.
}

func takeTerminal(fd int) { giveTerminal(fd, unix.Getpgrp()) }

// commandStopped reports whether the process pid is stopped by a signal
// (state T in /proc/PID/stat).
func commandStopped(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i >= 0 && i+2 < len(b) && b[i+2] == 'T'
}

// startInCgroup starts cmd in the cgroup cg (born in it, so that it never
// runs outside; see supervise.Cgroup.Start). When that fails, it removes
// cg and starts the command again without one, to be supervised by the
// subreaper and the task scan, unless the command ran already; the
// returned cgroup is then nil.
func startInCgroup(e *env, cmd *exec.Cmd, cg *supervise.Cgroup) (*exec.Cmd, *supervise.Cgroup, error) {
	if cg == nil {
		return cmd, nil, cmd.Start()
	}
	err := cg.Start(cmd)
	if err == nil {
		return cmd, cg, nil
	}
	removeCgroup(e, cg)
	if cmd.Process != nil {
		return cmd, nil, err // It ran, in the cgroup, and was killed: not again.
	}
	again := exec.Command(cmd.Path, cmd.Args[1:]...)
	again.Args, again.Env, again.Dir = cmd.Args, cmd.Env, cmd.Dir
	again.Stdin, again.Stdout, again.Stderr = cmd.Stdin, cmd.Stdout, cmd.Stderr
	again.WaitDelay = cmd.WaitDelay
	attr := *cmd.SysProcAttr
	supervise.OutOfCgroup(&attr)
	again.SysProcAttr = &attr
	if err2 := again.Start(); err2 != nil {
		return again, nil, err2
	}
	e.errorf("could not start the command in cgroup %s (%s); supervising it by child subreaper and task scan instead", cg.Dir, message(err))
	return again, nil, nil
}

// removeCgroup removes the command's cgroup cg, if any, once it is
// empty, saying so when it cannot.
func removeCgroup(e *env, cg *supervise.Cgroup) {
	if cg == nil {
		return
	}
	if err := cg.Remove(time.Second); err != nil {
		e.errorf("%s; remove it by hand once empty (rmdir)", message(err))
	}
}
