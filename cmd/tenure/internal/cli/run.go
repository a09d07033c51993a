package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/tenure-dev/tenure/store"

	"github.com/tenure-dev/tenure"
	"github.com/tenure-dev/tenure/cmd/tenure/internal/storeurl"
)

// DefaultGrace is the default of run's --grace: how long the command has
// between SIGTERM and SIGKILL once the tenure is lost.
const DefaultGrace = 10 * time.Second

// releaseTimeout bounds releasing the lease after the command exited.
const releaseTimeout = 5 * time.Second

// forwarded are the signals run passes on to its command's process group.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP}

func runCommand() *command {
	return &command{
		summary:  "run a command under a lease",
		synopsis: "run --name NAME [--ttl 30s] [--wait [--wait-timeout D]] [--label L] [--grace 10s] [--store URL] -- CMD [ARGS...]",
		about: `Run acquires the lease NAME and runs CMD under it, in its own process
group, with TENURE_TOKEN (the fencing token), TENURE_LEASE (NAME) and
TENURE_HOLDER (label/instance) in its environment; --store, when given, is
passed on as TENURE_STORE. Standard input, output and error pass through,
and so does the exit status (128+N when signal N ended the command).
SIGINT, SIGTERM and SIGHUP sent to tenure are forwarded to the command's
process group.

When the lease is held by someone else, run exits 75 after one line naming
the holder, its token and its remaining time by the store's clock; with
--wait it waits for the lease instead (up to --wait-timeout, if given).

While the command runs the lease is renewed every TTL/3. When the tenure
is lost (renewals failing, superseded, released by an operator, clone or
suspension detected), run prints one line with the reason and the token,
sends SIGTERM to the command's process group and SIGKILL --grace later,
and exits 79. The loss is declared --grace before the local deadline,
which is itself a safety margin before the store can expire the lease, so
the command is dead before the store can give the lease to anyone else;
nor does run release the lease before the command is dead. When the
command exits the lease is released, so a waiter takes over at once.`,
		setup: func(fs *flag.FlagSet) action {
			var o runOptions
			fs.StringVar(&o.name, "name", "", "the lease `NAME` (required)")
			o.ttl = durationFlag(fs, "ttl", tenure.DefaultTTL, "the lease's lifetime at the store without renewal, a `duration` of at least 500ms (etcd: 2s; Consul: the servers' session_ttl_min, 10s by default)")
			fs.BoolVar(&o.wait, "wait", false, "wait for the lease when it is held, instead of exiting 75")
			o.waitTimeout = durationFlag(fs, "wait-timeout", 0, "with --wait, give up (exit 75) after this `duration`; 0 waits for ever")
			fs.StringVar(&o.label, "label", "", "the human part of the holder identity, shown by status (default the host name)")
			o.grace = durationFlag(fs, "grace", DefaultGrace, "time between SIGTERM and SIGKILL when the lease is lost, a `duration`; it must fit the TTL: TTL − TTL/10 − grace > TTL/3 (default 10s, or TTL/4 when 10s does not fit)")
			fs.StringVar(&o.store, "store", "", storeUsage)
			return func(ctx context.Context, e *env, args []string) error {
				o.graceSet = flagSet(fs, "grace")
				return o.run(ctx, e, args)
			}
		},
	}
}

type runOptions struct {
	name        string
	ttl         *time.Duration
	wait        bool
	waitTimeout *time.Duration
	label       string
	grace       *time.Duration
	graceSet    bool
	store       string
}

// config checks the flags and returns the client configuration they ask
// for, before anything is opened.
func (o *runOptions) config(args []string) (tenure.Config, error) {
	switch {
	case o.name == "":
		return tenure.Config{}, usagef("run", "--name is required")
	case len(args) == 0:
		return tenure.Config{}, usagef("run", "no command to run; put it after --, as in: tenure run --name nightly -- ./job.sh")
	case *o.ttl <= 0:
		return tenure.Config{}, usagef("run", "--ttl must be positive")
	case *o.waitTimeout > 0 && !o.wait:
		return tenure.Config{}, usagef("run", "--wait-timeout needs --wait")
	}
	if err := store.ValidateName(o.name); err != nil {
		return tenure.Config{}, usagef("run", "--name: %s", message(err))
	}
	label := o.label
	if label == "" {
		if h, err := os.Hostname(); err == nil && h != "" {
			label = h
		} else {
			label = "tenure"
		}
	}
	cfg := tenure.Config{Label: label, TTL: *o.ttl, Grace: *o.grace}
	if !o.graceSet && validate(cfg) != nil {
		cfg.Grace = *o.ttl / 4
	}
	if err := validate(cfg); err != nil {
		return tenure.Config{}, usagef("run", "--ttl %s, --grace %s, --label %q: %s", cfg.TTL, cfg.Grace, cfg.Label, message(err))
	}
	return cfg, nil
}

// unopened stands in for the store while [validate] checks a
// configuration: tenure.New validates and calls nothing.
type unopened struct{ store.Store }

func validate(cfg tenure.Config) error {
	_, err := tenure.New(unopened{}, cfg)
	return err
}

func (o *runOptions) run(ctx context.Context, e *env, args []string) error {
	cfg, err := o.config(args)
	if err != nil {
		return err
	}
	target, err := storeurl.Resolve(o.store, e.getenv)
	if err != nil {
		return err
	}
	opened, err := target.Open(ctx, storeurl.Options{})
	if err != nil {
		return err
	}
	defer func() { _ = opened.Close() }() // Nothing is left to do about a failed close.
	if err := checkTTL(opened, cfg.TTL); err != nil {
		return err
	}
	if target.Kind == storeurl.AlwaysLeader {
		e.errorf("always-leader store: %q runs here without mutual exclusion; reason: %s", o.name, target.Reason)
	}

	client, err := tenure.New(opened.Store, cfg)
	if err != nil {
		return usagef("run", "%s", message(err))
	}
	// The client outlives ctx: after a signal it keeps the lease until the
	// command has exited, then releases it.
	runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	var loop sync.WaitGroup
	loop.Go(func() { _ = client.Run(runCtx) }) // Run returns nil after its ctx ends.
	defer func() {
		stop()
		loop.Wait()
	}()

	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)

	lease, err := o.acquire(ctx, e, client, sigs, opened)
	if err != nil {
		return err
	}
	return o.supervise(ctx, e, lease, sigs, opened.Target, args)
}

// checkTTL refuses a TTL below the opened store's own floor
// ([store.MinTTLOf]) as a usage error, before the client is made.
func checkTTL(opened *storeurl.Opened, ttl time.Duration) error {
	floor := store.MinTTLOf(opened.Store)
	if ttl >= floor {
		return nil
	}
	hint := ""
	if opened.Target.Kind == storeurl.Consul {
		hint = fmt.Sprintf(" (the Consul servers' session_ttl_min; when theirs is lower, give it as %s in the store URL)", storeurl.ParamSessionTTLMin)
	}
	return usagef("run", "--ttl %s is below the %s store's minimum TTL of %s%s; use %s or more",
		ttl, opened.Target.Kind.Name(), floor, hint, floor)
}

// acquire takes the lease once, or waits for it with --wait, until a
// signal arrives.
func (o *runOptions) acquire(ctx context.Context, e *env, client *tenure.Client, sigs <-chan os.Signal, opened *storeurl.Opened) (*tenure.Lease, error) {
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	if o.wait && *o.waitTimeout > 0 {
		actx, cancel = context.WithTimeout(actx, *o.waitTimeout)
		defer cancel()
	}
	type result struct {
		lease *tenure.Lease
		err   error
	}
	results := make(chan result, 1)
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		var r result
		r.lease, r.err = client.Acquire(actx, o.name)
		var held *store.HeldError
		if o.wait && errors.As(r.err, &held) {
			e.errorf("lease %q is held by %s with token %d for another %s by the store's clock; waiting for it",
				o.name, held.Holder, held.Token, remaining(held.Remaining))
		}
		if o.wait && r.err != nil {
			r.lease, r.err = client.Campaign(actx, o.name)
		}
		results <- r
	})
	var r result
	select {
	case r = <-results:
	case s := <-sigs:
		cancel()
		if r = <-results; r.lease != nil {
			releaseQuietly(ctx, r.lease)
		}
		return nil, &exitError{code: ExitSignalBase + signum(s), err: fmt.Errorf("interrupted by %s while waiting for lease %q; nothing was run", s, o.name)}
	}
	var held *store.HeldError
	switch {
	case r.err == nil:
		return r.lease, nil
	case errors.As(r.err, &held):
		return nil, &exitError{code: ExitNotAcquired, err: fmt.Errorf("lease %q is held by %s with token %d for another %s by the store's clock; not acquired (use --wait to wait for it)",
			o.name, held.Holder, held.Token, remaining(held.Remaining))}
	case ctx.Err() != nil:
		return nil, fmt.Errorf("stopped while waiting for lease %q (%w); nothing was run", o.name, ctx.Err())
	case r.err != nil && errors.Is(actx.Err(), context.DeadlineExceeded):
		return nil, &exitError{code: ExitNotAcquired, err: o.gaveUp(ctx, opened)}
	}
	return nil, opened.Target.Wrap(r.err)
}

// gaveUp describes a --wait-timeout that ran out, naming the holder when
// the store says who it is.
func (o *runOptions) gaveUp(ctx context.Context, opened *storeurl.Opened) error {
	sctx, cancel := withStoreTimeout(ctx)
	defer cancel()
	rec, err := opened.Store.Get(sctx, o.name)
	if err != nil || rec.State != store.StateHeld {
		return fmt.Errorf("gave up waiting for lease %q after --wait-timeout %s; not acquired", o.name, *o.waitTimeout)
	}
	return fmt.Errorf("gave up waiting for lease %q after --wait-timeout %s: it is held by %s with token %d for another %s by the store's clock; not acquired",
		o.name, *o.waitTimeout, rec.Holder, rec.Token, remaining(rec.Remaining))
}

// supervise runs the command under lease and returns when it has exited.
func (o *runOptions) supervise(ctx context.Context, e *env, lease *tenure.Lease, sigs <-chan os.Signal, target storeurl.Target, args []string) error {
	token := lease.Token()
	if token == 0 {
		return &exitError{code: ExitLost, err: fmt.Errorf("lost lease %q before the command started: %s; nothing was run", o.name, lossReason(lease.Err()))}
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = e.stdout, e.stderr
	if e.stdin != nil {
		cmd.Stdin = e.stdin
	}
	cmd.Env = append(e.environ(),
		EnvToken+"="+token.String(),
		EnvLease+"="+o.name,
		EnvHolder+"="+lease.Holder().String(),
	)
	if o.store != "" {
		cmd.Env = append(cmd.Env, storeurl.EnvVar+"="+o.store)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// Only when stdout or stderr are not files does Wait copy them; do not
	// let a grandchild holding the pipe keep tenure waiting.
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		releaseQuietly(ctx, lease)
		code := ExitCannotExec
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
			code = ExitNotFound
		}
		return &exitError{code: code, err: fmt.Errorf("run: cannot start %q: %s; lease %q released", args[0], message(err), o.name)}
	}
	group := cmd.Process.Pid // Setpgid makes the command lead a group of its own id.

	exited := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		_ = cmd.Wait() // Its outcome is read from cmd.ProcessState.
		close(exited)
	})
	defer wg.Wait()

	var (
		lost      error
		done      = lease.Done()
		killTimer *time.Timer
		kill      <-chan time.Time
		ctxDone   = ctx.Done()
	)
	defer func() {
		if killTimer != nil {
			killTimer.Stop()
		}
	}()
wait:
	for {
		select {
		case <-exited:
			break wait
		case <-done:
			done = nil
			lost = lease.Err()
			signalGroup(group, syscall.SIGTERM)
			killTimer = time.NewTimer(*o.grace)
			kill = killTimer.C
			e.errorf("lost lease %q with token %d: %s; stopping the command (SIGTERM now, SIGKILL in %s)",
				o.name, token, target.Redact(lossReason(lost)), *o.grace)
		case <-kill:
			kill = nil
			signalGroup(group, syscall.SIGKILL)
		case s := <-sigs:
			signalGroup(group, s)
		case <-ctxDone:
			ctxDone = nil
			signalGroup(group, syscall.SIGTERM)
		}
	}
	status := exitStatus(cmd.ProcessState)
	if lost != nil {
		if storeReachable(lost) {
			// The command is dead: let the next holder in now rather than
			// at expiry, if the lease is still ours at the store.
			releaseQuietly(ctx, lease)
		}
		return &exitError{code: ExitLost}
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	if err := lease.Release(rctx); err != nil {
		if errors.Is(err, tenure.ErrLost) {
			e.errorf("lease %q with token %d ended (%s) as the command exited with status %d; passing that status on",
				o.name, token, target.Redact(lossReason(err)), status)
		} else {
			e.errorf("could not release lease %q: %s; it expires by its TTL", o.name, message(target.Wrap(err)))
		}
	}
	if status == 0 {
		return nil
	}
	return &exitError{code: status}
}

// lossReason says in a few words why a tenure ended.
func lossReason(err error) string {
	var lost *tenure.LostError
	if !errors.As(err, &lost) {
		if err == nil {
			return "unknown reason"
		}
		return message(err)
	}
	why := lost.Reason.String()
	if lost.Reason == tenure.LossExpiredAtStore {
		why += " (it expired there, or was released, e.g. by tenure release --force)"
	}
	if lost.Cause != nil {
		why += ": " + message(lost.Cause)
	}
	return why
}

// storeReachable reports whether a tenure lost this way may still be
// held at the store and the store answers: the loss was decided locally
// while renewals were succeeding. After a failed renewal or a local expiry
// the store is likely unreachable, and a release would only delay the
// exit; after a takeover the lease is not ours to release.
func storeReachable(err error) bool {
	var lost *tenure.LostError
	if !errors.As(err, &lost) {
		return false
	}
	switch lost.Reason {
	case tenure.LossSuspended, tenure.LossProgressStalled, tenure.LossRevoked:
		return true
	}
	return false
}

// releaseQuietly gives a lease back on a path that is already failing.
func releaseQuietly(ctx context.Context, l *tenure.Lease) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	_ = l.Release(rctx) // The lease expires by its TTL if this fails.
}

// signalGroup sends sig to the process group group. A group that is gone
// needs no signal.
func signalGroup(group int, sig os.Signal) {
	s, ok := sig.(syscall.Signal)
	if !ok {
		return
	}
	_ = syscall.Kill(-group, s)
}

func signum(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return int(s)
	}
	return 0
}

// exitStatus is the shell's view of how a process ended: its exit code, or
// 128+N when signal N killed it.
func exitStatus(ps *os.ProcessState) int {
	if ps == nil {
		return ExitFailure
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return ExitSignalBase + int(ws.Signal())
	}
	return ps.ExitCode()
}
