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
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tenure-dev/tenure/store"

	"github.com/tenure-dev/tenure"
	"github.com/tenure-dev/tenure/cmd/tenure/internal/storeopen"
	"github.com/tenure-dev/tenure/cmd/tenure/internal/storeurl"
	"github.com/tenure-dev/tenure/cmd/tenure/internal/supervise"
)

// DefaultGrace is the default of run's --grace: how long the command has
// between SIGTERM and SIGKILL once the tenure is lost.
const DefaultGrace = 10 * time.Second

// releaseTimeout bounds releasing the lease after the command exited.
const releaseTimeout = 5 * time.Second

// forwarded are the signals run passes on to its command's process group.
// Catching SIGQUIT also keeps the Go runtime from dumping its goroutines
// and dying with the command orphaned.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT,
	syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGWINCH, syscall.SIGCONT}

// interrupting are the forwarded signals that end a wait for the lease.
var interrupting = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}

// RevokeSignal makes a running `tenure run` stand down at once, for a
// platform's resume or restore hook (kill -PWR PID): the command's tree is
// killed (SIGKILL, no grace: after a pause the window is already gone),
// the tenure is revoked and not released (a restored copy cannot know
// whether it is the one that still does the work; the lease expires by its
// TTL), and run exits 79.
const RevokeSignal = syscall.SIGPWR

// wholeProcess says that this process is tenure itself, running one
// command: run makes it a child subreaper and sweeps every descendant but
// the watchdog. The cli package's in-process tests set it to false: there
// run watches only the command's own subtree and process group, and the
// watchdog is the test binary (watchdogExe).
var wholeProcess = true

// watchdogExe is the program run re-executes as its watchdog, with the
// arguments run --watchdog.
var watchdogExe = "/proc/self/exe"

func runCommand() *command {
	return &command{
		summary:  "run a command under a lease",
		onHost:   func() string { _, how := supervise.Mode(); return "supervision: " + how },
		synopsis: "run --name NAME [--ttl 30s] [--wait [--wait-timeout D] | --held-exit-code N] [--label L] [--payload TEXT] [--grace 10s] [--progress-timeout D] [--health ADDR] [--metrics ADDR] [--json FILE|-] [--store URL] -- CMD [ARGS...]",
		about: `Run acquires the lease NAME and runs CMD under it, in its own process
group, with TENURE_TOKEN (the fencing token), TENURE_LEASE (NAME) and
TENURE_HOLDER (label/instance) in its environment; --store, when given, is
passed on as TENURE_STORE. Standard input, output and error pass through,
and so does the exit status (128+N when signal N ended the command).
SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH and SIGCONT
sent to tenure are forwarded to the command's process group; after
SIGTERM, the command's tree is killed if it still runs the grace later
(then run releases the lease and exits 137). At a terminal, the command's
group is the foreground group; when ^Z stops it, run takes the terminal
back and stops too (the lease is not renewed while stopped, so a stop
longer than the grace costs the lease: see below).

Run can be a container's entrypoint, PID 1: it reaps the orphans that
come to it as they exit, and forwards SIGTERM. On a pod's deletion the
kubelet sends SIGTERM and SIGKILLs terminationGracePeriodSeconds (30s by
default) later: keep it at least the grace plus a few seconds for the
release, or the lease is left to expire.

Without --store and TENURE_STORE, run uses this host's SQLite file and
says so on standard error when it creates the file (once per host and
user, not on every run); an empty --store or TENURE_STORE is refused
(exit 64), so a misconfigured host does not silently run alone.

When the lease is held by someone else, run exits 75 after one line naming
the holder, its token and its remaining time by the store's clock
(--held-exit-code N exits N instead, so that cron or systemd can count
"someone else runs it" as success); with --wait it waits for the lease
instead (up to --wait-timeout, if given), with one line on standard error
each time the holder changes while it waits (with -v or --log-format
json, one log record each: msg "lease holder changed", keys lease,
holder, token, remaining).

--json FILE writes one JSON object describing the outcome when run ends
(- writes it to standard error; a file is replaced whole, so a reader never
sees half of one):
  lease, store           the lease name and the store (secrets removed)
  holder, token          this run's identity and fencing token, once acquired
  acquired_at, held_ms   when the lease was acquired (this host's clock, UTC)
                         and how long it was held until released or lost
  ended                  exited: the command ran and exited; lost: the lease
                         was lost while it ran (reason says why, e.g.
                         "progress stalled", "revoked"); held: held elsewhere,
                         not acquired (held_by names the holder);
                         wait_timeout: --wait-timeout ran out (held_by, when
                         known); interrupted: a signal ended the wait
                         (signal); error: anything else (error)
  command                when the command ran: exit_code, or signal (e.g.
                         "SIGKILL") when a signal ended it
  exit_code              tenure's own exit status
  error                  the line tenure printed on standard error, if any

--progress-timeout D turns on the progress gate: the command must report
progress at least every D with "tenure progress" (it reaches this run
over TENURE_RUN_CONTROL), or the lease is given up as lost ("progress
stalled", exit 79) so that a healthy holder can take over. --health ADDR
serves three probes on ADDR, each 200 or 503 with one line saying why:
  /livez    liveness: 503 only while this run holds the lease and the
            command has not reported progress for --progress-timeout (a
            wedged holder); a standby waiting with --wait is alive
  /readyz   readiness: 200 while waiting or holding, 503 once the tenure
            ended and the run is on its way out; a standby is ready, so a
            rolling update's new pod becomes ready beside the holder
  /leaderz  the holder-only check (/healthz is its older name): 200 only
            while the lease is held and progress is fresh; every standby
            answers 503, so never use it as a Deployment's readiness or
            liveness probe
--metrics ADDR serves GET /metrics on ADDR: the lease client's Prometheus
metrics (tenure_lease_held, tenure_lease_holder_info,
tenure_lease_transitions_total, tenure_losses_total by reason, renewal
latency, tenure_build_info; go doc github.com/tenure-dev/tenure/metrics
lists them) and the Go runtime's and the process's, so that a job under a
lease is observable without tenure serve.

--payload publishes TEXT with the tenure (the address where the command
serves, say: up to 1024 bytes, no control characters); followers read it
with tenure status, or in their program with Client.Observe. It is not
secret: whoever can read the store can read it.

While the command runs the lease is renewed every TTL/3. What is killed,
when, and by whom:
  - the whole tree: the command's process group and every descendant (run
    is a child subreaper, so background jobs and setsid escapees stay
    under it). Where cgroup v2 can be written (root, or a delegated
    subtree such as a systemd unit's with Delegate=yes), the command is
    also born in a cgroup of its own under run's, which no process of the
    tree can leave; it is killed by the cgroup (frozen, cgroup.kill, and
    SIGKILL to each process listed) and waited for until empty, then
    removed. Where cgroup v2 cannot be used but the cgroup v1 freezer is
    mounted (as root), a freezer cgroup of its own serves the same way
    (frozen, SIGKILL to each process in it, thawed; gone when its tasks
    are); TENURE_RUN_NO_CGROUP_V2=1 passes over cgroup v2, for tests.
    Elsewhere, or with TENURE_RUN_NO_CGROUP=1 (for tests, and
    hosts where tenure must not make cgroups), run finds the tree by the
    subreaper and /proc alone. Either way a process counts as gone only
    when no thread of it runs: one whose main thread exited while others
    go on (it reads as a zombie) is still waited for and killed. The
    "On this host" line below, and tenure doctor, say which mode is in
    force here;
  - by run, on loss (renewals failing, superseded, released by an
    operator, clone or suspension detected): one line with the reason and
    the token, SIGTERM, SIGKILL after the grace (--grace, else 10s or TTL/4
    when 10s does not fit); at once when the loss was found at or after
    the local deadline or after the store let the lease go (released with
    --force, expired, taken over: heard at once from a store that
    notifies); exit 79. The loss is otherwise declared the grace before
    the local deadline, itself a safety margin before the store's expiry;
  - by a watchdog (tenure run re-executed, a process of its own, fed each
    kill deadline over a pipe): SIGKILL when tenure is stopped, starved or
    killed past the deadline, by the cgroup too when there is one, which
    it then removes; the command also has Pdeathsig SIGKILL;
  - on SIGPWR (kill -PWR PID, for resume and restore hooks), or when the
    command runs "tenure revoke-inherited": SIGKILL at once, the tenure
    is revoked and not released (it expires by its TTL), exit 79;
  - after a normal exit: leftover descendants get SIGTERM, then SIGKILL
    after the grace. The lease is released only when none is left, so a
    waiter takes over at once and alone;
  - by run, on SIGTERM to tenure (docker stop, a pod's deletion,
    systemctl stop): forwarded to the command's group, SIGKILL to the
    tree the grace later; then the release.
The command's own "tenure release $TENURE_LEASE" asks run to release (over
the unix socket named by TENURE_RUN_CONTROL): that is not a loss; run
passes the command's status on, and kills the tree if it still runs the
grace later (the next holder may already have started).
What only the fence covers: a pause of the whole machine (VM suspend,
snapshot restore) freezes the watchdog and the monotonic clock with
everything else; a write in flight when it resumes is refused only by the
resource's token check.`,
		setup: func(fs *flag.FlagSet) action {
			var o runOptions
			fs.StringVar(&o.name, "name", "", "the lease `NAME` (required)")
			o.ttl = durationFlag(fs, "ttl", tenure.DefaultTTL, "the lease's lifetime at the store without renewal, a `duration` of at least 500ms (etcd: 2s; Consul: the servers' session_ttl_min, 10s by default), in whole seconds on etcd and NATS, whole milliseconds on Redis, Consul and Kubernetes")
			fs.BoolVar(&o.wait, "wait", false, "wait for the lease when it is held, instead of exiting 75")
			o.waitTimeout = durationFlag(fs, "wait-timeout", 0, "with --wait, give up (exit 75) after this `duration`; 0 waits for ever")
			fs.StringVar(&o.label, "label", "", "the human part of the holder identity, shown by status (default the host name)")
			fs.StringVar(&o.payload, "payload", "", "`TEXT` published with the tenure for followers, such as this leader's address, shown by status")
			o.grace = durationFlag(fs, "grace", DefaultGrace, "time between SIGTERM and SIGKILL when the lease is lost or tenure gets SIGTERM, a `duration`; it must fit the TTL: TTL − TTL/10 − grace > TTL/3 (default 10s, or TTL/4 when 10s does not fit)")
			fs.StringVar(&o.store, "store", "", storeUsage)
			fs.Var(&o.heldExit, "held-exit-code", "without --wait, exit `N` (0 to 125) instead of 75 when the lease is held elsewhere")
			o.progressTimeout = durationFlag(fs, "progress-timeout", 0, "give the lease up when the command reports no progress (tenure progress) for this `duration`; 0 turns the progress gate off")
			fs.StringVar(&o.health, "health", "", "serve the probes /livez, /readyz and /leaderz on `ADDR` (host:port)")
			fs.StringVar(&o.metrics, "metrics", "", "serve the lease client's Prometheus metrics at /metrics on `ADDR` (host:port)")
			fs.StringVar(&o.jsonPath, "json", "", "write the outcome as one JSON object to `FILE` when run ends (- for standard error)")
			fs.BoolVar(&o.watchdog, "watchdog", false, hiddenFlag+"run as the watchdog of a tenure run, reading kill deadlines from descriptor 3")
			return func(ctx context.Context, e *env, args []string) error {
				if o.watchdog {
					return &exitError{code: supervise.RunWatchdog(e.stderr)}
				}
				o.graceSet = flagSet(fs, "grace")
				if flagSet(fs, "store") && strings.TrimSpace(o.store) == "" {
					return usagef("run", "--store is empty; give a store URL, or leave --store out for $%s or the default SQLite file", storeurl.EnvVar)
				}
				if o.jsonPath != "" {
					if err := checkOutcomePath(o.jsonPath); err != nil {
						return usagef("run", "--json %s: %s", o.jsonPath, message(err))
					}
					o.jsonChecked = true
				}
				o.out = runOutcome{Lease: o.name}
				err := o.run(ctx, e, args)
				if !o.jsonChecked {
					return err
				}
				// The outcome comes last: print run's line now, then write
				// it, and leave only the exit code to main.
				o.out.record(err)
				code := e.exit(err)
				if werr := o.out.write(e, o.jsonPath); werr != nil {
					e.errorf("could not write the outcome to --json %s: %s", o.jsonPath, message(werr))
				}
				return &exitError{code: code}
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
	payload     string
	grace       *time.Duration
	graceSet    bool
	store       string
	watchdog    bool
	// heldExit replaces exit 75 when the lease is held elsewhere.
	heldExit        exitCodeValue
	progressTimeout *time.Duration
	health          string
	metrics         string
	jsonPath        string
	// jsonChecked: jsonPath was found writable, so the outcome is written.
	jsonChecked bool
	out         runOutcome
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
	case o.heldExit.set && o.wait:
		return tenure.Config{}, usagef("run", "--held-exit-code applies only without --wait: a wait ends with the lease, or with exit 75 after --wait-timeout")
	}
	if err := store.ValidateName(o.name); err != nil {
		return tenure.Config{}, usagef("run", "--name: %s", message(err))
	}
	if err := store.ValidatePayload(o.payload); err != nil {
		return tenure.Config{}, usagef("run", "--payload: %s", message(err))
	}
	for flagName, addr := range map[string]string{"--health": o.health, "--metrics": o.metrics} {
		if addr == "" {
			continue
		}
		if err := checkListenAddr(flagName, addr); err != nil {
			return tenure.Config{}, usagef("run", "%v", err)
		}
	}
	label := o.label
	if label == "" {
		if h, err := os.Hostname(); err == nil && h != "" {
			label = h
		} else {
			label = "tenure"
		}
	}
	cfg := tenure.Config{Label: label, TTL: *o.ttl, Grace: *o.grace, ProgressTimeout: *o.progressTimeout, Payload: o.payload}
	if !o.graceSet && validate(cfg) != nil {
		cfg.Grace = *o.ttl / 4
	}
	if err := validate(cfg); err != nil {
		return tenure.Config{}, usagef("run", "%s", configMessage(err))
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

// configMessage renders an error of [tenure.Config.Validate] in the terms
// of run's flags: --grace where the library says Grace.
func configMessage(err error) string {
	msg := message(err)
	var b strings.Builder
	prev := 0
	for _, q := range append(quoted.FindAllStringIndex(msg, -1), []int{len(msg), len(msg)}) {
		// Outside the quoted values (a --label as typed) only.
		b.WriteString(configField.ReplaceAllStringFunc(msg[prev:q[0]], func(f string) string {
			name, value, ok := strings.Cut(f, " (")
			flagged := configFlags[name]
			if ok && strings.HasPrefix(flagged, "--") {
				return flagged + " " + strings.TrimSuffix(value, ")")
			}
			return flagged + f[len(name):]
		}))
		b.WriteString(msg[q[0]:q[1]])
		prev = q[1]
	}
	return b.String()
}

// configFlags names the run flag of each Config field a message may name;
// the others (the renew interval, TTL/3) run sets itself.
var configFlags = map[string]string{
	"TTL":             "--ttl",
	"Grace":           "--grace",
	"Label":           "--label",
	"ProgressTimeout": "--progress-timeout",
	"RenewInterval":   "the renew interval",
}

// quoted matches a %q-quoted value in a message.
var quoted = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)

var configField = regexp.MustCompile(`\b(?:TTL|Grace|Label|ProgressTimeout|RenewInterval)\b(?: \([^)]*\))?`)

func (o *runOptions) run(ctx context.Context, e *env, args []string) error {
	cfg, err := o.config(args)
	if err != nil {
		return err
	}
	if o.store == "" && envSetEmpty(e, storeurl.EnvVar) {
		return usagef("run", "%s is set but empty; set it to a store URL, or unset it to use the default SQLite file of this host", storeurl.EnvVar)
	}
	target, err := storeurl.Resolve(o.store, e.getenv)
	if err != nil {
		return err
	}
	o.out.Store = target.Display
	var h *health
	if o.health != "" {
		if h, err = listenHealth(o.health, o.name, cfg.ProgressTimeout); err != nil {
			return fmt.Errorf("run: cannot listen on --health %s: %s; choose another address or port", o.health, message(err))
		}
		h.serve()
		defer h.close()
		e.logger.Info("serving /livez, /readyz and /leaderz", "lease", o.name, "addr", h.ln.Addr().String())
	}
	if o.metrics != "" {
		m, err := listenMetrics(o.metrics)
		if err != nil {
			return usagef("run", "cannot listen on --metrics %s: %s; choose another address or port", o.metrics, message(err))
		}
		m.serve()
		defer m.close()
		cfg.Observer = m.obs
		e.logger.Info("serving /metrics", "lease", o.name, "addr", m.ln.Addr().String())
	}
	e.announceDefault(target, fmt.Sprintf("to share lease %q with other hosts", o.name))
	opened, err := storeopen.Open(ctx, target, storeopen.Options{})
	if err != nil {
		return err
	}
	defer func() { _ = opened.Close() }() // Nothing is left to do about a failed close.
	if err := checkTTL(opened, cfg.TTL); err != nil {
		return err
	}
	if reason := target.Backend.Traits().Reason; reason != "" {
		e.errorf("always-leader store: %q runs here without mutual exclusion; reason: %s", o.name, reason)
	}

	cfg.Logger = e.logger
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
	signal.Notify(sigs, append(forwarded, RevokeSignal)...)
	defer signal.Stop(sigs)

	lease, err := o.acquire(ctx, e, client, sigs, opened)
	if err != nil {
		return err
	}
	o.out.acquiredNow(lease.Holder().String(), lease.Token())
	h.held(lease)
	return o.supervise(ctx, e, client, lease, sigs, opened.Target, h, args)
}

// envSetEmpty reports whether the environment variable name is set, to
// nothing but blanks.
func envSetEmpty(e *env, name string) bool {
	for _, kv := range e.environ() {
		if v, ok := strings.CutPrefix(kv, name+"="); ok && strings.TrimSpace(v) == "" {
			return true
		}
	}
	return false
}

// checkTTL refuses a TTL below the opened store's own floor
// ([store.MinTTLOf]), or one that is no whole number of the unit it keeps
// TTLs in ([store.CheckTTLUnit]: the store would round it, and no grant
// would ever be the TTL asked for), as a usage error, before the client is
// made.
func checkTTL(opened *storeopen.Opened, ttl time.Duration) error {
	floor := store.MinTTLOf(opened.Store)
	if ttl >= floor {
		var ue *store.TTLUnitError
		if errors.As(store.CheckTTLUnit(opened.Store, ttl), &ue) {
			return usagef("run", "--ttl %s: the %s store %s", ttl, opened.Target.Backend.Name(), ue.Advice())
		}
		return nil
	}
	hint := opened.Target.Backend.Traits().TTLFloorHint
	return usagef("run", "--ttl %s is below the %s store's minimum TTL of %s%s; use %s or more",
		ttl, opened.Target.Backend.Name(), floor, hint, floor)
}

// acquire takes the lease once, or waits for it with --wait, until a
// signal arrives.
func (o *runOptions) acquire(ctx context.Context, e *env, client *tenure.Client, sigs <-chan os.Signal, opened *storeopen.Opened) (*tenure.Lease, error) {
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
			e.errorf("%s; waiting for it", heldLine(o.name, held))
		}
		if o.wait && r.err != nil {
			octx, stopObserving := context.WithCancel(actx)
			var observer sync.WaitGroup
			observer.Go(func() { o.reportHolders(octx, e, client, held) })
			r.lease, r.err = client.Campaign(actx, o.name)
			stopObserving()
			observer.Wait()
		}
		results <- r
	})
	var r result
	var s os.Signal
wait:
	for {
		select {
		case r = <-results:
			break wait
		case got := <-sigs:
			// WINCH, CONT, USR1 and USR2 have no command to go to yet.
			if got == RevokeSignal || slices.Contains(interrupting, got) {
				s = got
				break wait
			}
		}
	}
	if s != nil {
		cancel()
		if r = <-results; r.lease != nil {
			releaseQuietly(ctx, r.lease)
		}
		o.out.Ended = endedInterrupted
		if sig, ok := s.(syscall.Signal); ok {
			o.out.Signal = unix.SignalName(sig)
		}
		return nil, &exitError{code: ExitSignalBase + signum(s), err: fmt.Errorf("interrupted by %s while waiting for lease %q; nothing was run", s, o.name)}
	}
	var held *store.HeldError
	switch {
	case r.err == nil:
		return r.lease, nil
	case errors.As(r.err, &held):
		o.out.heldElsewhere(endedHeld, held.Holder, held.Token, held.Remaining)
		code := ExitNotAcquired
		if o.heldExit.set {
			code = o.heldExit.code
		}
		return nil, &exitError{code: code, err: fmt.Errorf("%s; not acquired (use --wait to wait for it)", heldLine(o.name, held))}
	case ctx.Err() != nil:
		o.out.Ended = endedInterrupted
		return nil, fmt.Errorf("stopped while waiting for lease %q (%w); nothing was run", o.name, ctx.Err())
	case r.err != nil && errors.Is(actx.Err(), context.DeadlineExceeded):
		o.out.Ended = endedWaitTimeout
		return nil, &exitError{code: ExitNotAcquired, err: o.gaveUp(ctx, opened)}
	}
	return nil, opened.Target.Wrap(r.err)
}

// gaveUp describes a --wait-timeout that ran out, naming the holder when
// the store says who it is.
func (o *runOptions) gaveUp(ctx context.Context, opened *storeopen.Opened) error {
	sctx, cancel := withStoreTimeout(ctx)
	defer cancel()
	rec, err := opened.Store.Get(sctx, o.name)
	if err != nil || rec.State != store.StateHeld {
		return fmt.Errorf("gave up waiting for lease %q after --wait-timeout %s; not acquired", o.name, *o.waitTimeout)
	}
	o.out.heldElsewhere(endedWaitTimeout, rec.Holder, rec.Token, rec.Remaining)
	return fmt.Errorf("gave up waiting for lease %q after --wait-timeout %s: it is held by %s with token %d for another %s by the store's clock; not acquired",
		o.name, *o.waitTimeout, rec.Holder, rec.Token, remaining(rec.Remaining))
}

// supervise runs the command under lease and returns when it and every
// process of its tree have exited.
//
// Who kills what, and when:
//   - run itself: on loss, SIGTERM to the command's process group and to
//     every descendant, SIGKILL --grace later (at once when the loss was
//     declared at or after the local deadline: suspension detected, late
//     timer). After a normal exit, leftover descendants get the same,
//     before the release.
//   - the watchdog (run --watchdog, a separate process): while the tenure
//     is trusted, run feeds it a kill deadline of the tenure's local
//     deadline plus the grace (still a safety margin before the store's
//     expiry) every margin/4 (margin = TTL/10); on loss, the moment run
//     would SIGKILL. When the deadline passes without a
//     fresh one (run stopped or not scheduled) or run dies, the watchdog
//     SIGKILLs the tree.
//   - the kernel: the command has Pdeathsig SIGKILL.
func (o *runOptions) supervise(ctx context.Context, e *env, client *tenure.Client, lease *tenure.Lease, sigs <-chan os.Signal, target storeurl.Target, h *health, args []string) error {
	token := lease.Token()
	if token == 0 {
		o.out.Ended, o.out.Reason = endedLost, lossReason(lease.Err())
		return &exitError{code: ExitLost, err: fmt.Errorf("lost lease %q before the command started: %s; nothing was run", o.name, lossReason(lease.Err()))}
	}
	// One source of truth for the timing: the validated client config.
	cfg := client.Config()
	grace := cfg.Grace
	margin := cfg.TTL / 10
	feedEvery := max(margin/4, 5*time.Millisecond)
	// trusted is the watchdog deadline while the tenure is trusted at now:
	// the tenure's local deadline plus the grace, which is still a margin
	// before the store can hand the lease on. A tenure that stops being fed
	// (tenure stopped, or not scheduled) is killed by then, and a stall
	// shorter than that costs nothing.
	trusted := func(now int64) int64 { return now + int64(lease.Remaining()+grace) }

	self := os.Getpid()
	mechanism := "the command's process group and subtree"
	var cg *supervise.Cgroup
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
		if cg, err = supervise.NewCgroup(fmt.Sprintf("tenure-run-%d", self)); err == nil {
			_, mechanism = supervise.Mode()
		} else {
			mechanism += " (no cgroup: " + err.Error() + ")"
		}
	}
	// The watchdog writes its one line straight to tenure's standard error
	// when that is a file: another copying goroutine would race with the
	// command's on a writer that is not.
	dogErr, ok := e.stderr.(*os.File)
	if !ok {
		dogErr = os.Stderr
	}
	dog, err := supervise.StartDog(watchdogExe, []string{"run", "--watchdog"}, cg, dogErr)
	if err != nil {
		removeCgroup(e, cg)
		releaseQuietly(ctx, lease)
		return fmt.Errorf("run: cannot start the watchdog (%s): %s; lease %q released, nothing was run", watchdogExe, message(err), o.name)
	}
	e.logger.Info("supervising the command", "lease", o.name, "tracked_by", mechanism, "watchdog_pid", dog.Pid())
	now := supervise.Now()
	if lease.Token() == 0 {
		_, _ = dog.Disarm() // Nothing was started.
		removeCgroup(e, cg)
		o.out.Ended, o.out.Reason = endedLost, lossReason(lease.Err())
		return &exitError{code: ExitLost, err: fmt.Errorf("lost lease %q before the command started: %s; nothing was run", o.name, lossReason(lease.Err()))}
	}
	_ = dog.Deadline(trusted(now)) // A watchdog that is gone is noticed by its exit.

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
	if mark, err := supervise.TreeMark(); err == nil {
		cmd.Env = append(cmd.Env, mark)
	}
	if o.store != "" {
		cmd.Env = append(cmd.Env, storeurl.EnvVar+"="+o.store)
	}
	// The command's own channel back to us: `tenure release` run inside
	// it asks us to release, so that the end is its doing, not a loss;
	// `tenure progress` feeds the progress gate; `tenure revoke-inherited`
	// revokes.
	var ctlCalls <-chan controlCall
	if ctl, err := listenControl(); err == nil {
		defer ctl.close()
		ctlCalls = ctl.calls
		cmd.Env = append(cmd.Env, EnvControl+"="+ctl.path())
	} else {
		cmd.Env = append(cmd.Env, EnvControl+"=") // not an outer run's
	}
	// Pdeathsig: the kernel kills the command when run's thread that
	// started it dies (Go ends threads only with a locked goroutine).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	tty := foregroundTTY(e.stdin)
	if tty >= 0 {
		// Interactive: the command's group becomes the terminal's
		// foreground group (it reads the terminal and gets ^C, ^Z); run
		// takes the terminal back when the command is done.
		cmd.SysProcAttr.Foreground = true
		cmd.SysProcAttr.Ctty = 0 // the command's standard input
		defer takeTerminal(tty)
	}
	// Only when stdout or stderr are not files does Wait copy them; do not
	// let a grandchild holding the pipe keep tenure waiting.
	cmd.WaitDelay = time.Second
	if cmd, cg, err = startInCgroup(e, cmd, cg); err != nil {
		_, _ = dog.Disarm() // Nothing was started.
		releaseQuietly(ctx, lease)
		code := ExitCannotExec
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
			code = ExitNotFound
		}
		return &exitError{code: code, err: fmt.Errorf("run: cannot start %q: %s; lease %q released", args[0], message(err), o.name)}
	}
	group := cmd.Process.Pid // Setpgid makes the command lead a group of its own id.
	// The leader as itself: once reaped, its pid (and so the group's id) may
	// name a stranger.
	leader, _ := supervise.Identify(group)
	// tree returns the pid whose descendants make the command's tree: run
	// itself, a subreaper that every orphan of the tree comes to; or, when
	// run is not the whole process, the command, and only while its pid
	// still names it (0 after: a reaped pid may name a stranger, whose
	// children are not ours).
	tree := func() int {
		switch {
		case wholeProcess:
			return self
		case leader.Exists():
			return group
		}
		return 0
	}
	if !wholeProcess {
		_ = dog.Root(group)
	}
	_ = dog.Group(leader)

	exited := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		_ = cmd.Wait() // Its outcome is read from cmd.ProcessState.
		close(exited)
	})
	defer wg.Wait()

	// signalTree sends sig to the command's group and to every descendant
	// of the tree but the watchdog.
	signalTree := func(sig syscall.Signal) {
		if cg != nil && sig == syscall.SIGKILL {
			cg.Kill()
		} else if cg != nil {
			cg.Signal(sig)
		}
		supervise.SignalTree(leader, tree(), sig, dog.Pid())
	}
	// signalGroup forwards sig to the command's process group while the
	// group is still the command's (see supervise.SignalGroup).
	signalGroup := func(sig os.Signal) {
		s, ok := sig.(syscall.Signal)
		if !ok {
			return
		}
		supervise.SignalGroup(leader, s)
	}
	// treeGone reports whether no process of the tree is alive, and the
	// cgroup, if any, is empty; it reaps orphans.
	treeGone := func() bool {
		if wholeProcess {
			supervise.Reap(group, dog.Pid())
		}
		if leader.Alive() || (cg != nil && cg.Populated()) {
			return false
		}
		return len(supervise.Live(tree(), dog.Pid(), group)) == 0
	}

	var (
		lost        error
		revoked     bool
		revokedBy   string // who revoked, or on what: "by ...", "on ..."
		done        = lease.Done()
		feed        = time.NewTicker(feedEvery)
		killTimer   *time.Timer
		kill        <-chan time.Time
		ctxDone     = ctx.Done()
		leaderGone  = exited
		poll        <-chan time.Time
		pollTicker  *time.Ticker
		stopping    bool // SIGTERM was sent to the tree
		killed      bool // SIGKILL was sent to the tree
		killAt      int64
		stoppedSelf bool
		terminated  bool // SIGTERM came to run and was forwarded: kill follows
		// selfRelease: the command asked for the release (tenure
		// release on the control socket); the tenure's end is then not a
		// loss. released reports the release's outcome.
		selfRelease bool
		selfDone    bool // released at the command's request
		released    = make(chan selfReleased, 1)
	)
	defer feed.Stop()
	defer func() {
		if killTimer != nil {
			killTimer.Stop()
		}
		if pollTicker != nil {
			pollTicker.Stop()
		}
	}()
	// stopTree sends SIGTERM now and SIGKILL at the CLOCK_MONOTONIC time
	// at, or SIGKILL at once when at is now or past.
	stopTree := func(at int64) {
		killAt = dog.Stopping(at)
		wait := time.Duration(killAt - supervise.Now())
		if wait <= 0 {
			killed = true
			signalTree(syscall.SIGKILL)
			return
		}
		if !stopping {
			stopping = true
			signalTree(syscall.SIGTERM)
		}
		if killTimer == nil {
			killTimer = time.NewTimer(wait)
			kill = killTimer.C
		}
	}
wait:
	for {
		select {
		case <-leaderGone:
			leaderGone = nil
			feed.Reset(feedEvery)
			pollTicker = time.NewTicker(20 * time.Millisecond)
			poll = pollTicker.C
			if treeGone() {
				break wait
			}
			if lost == nil && !stopping {
				// A normal exit with leftovers: they get the same
				// SIGTERM, then SIGKILL after the grace, before the release.
				stopTree(supervise.Now() + int64(grace))
			}
		case <-poll:
			if treeGone() {
				break wait
			}
		case <-reap:
			supervise.Reap(group, dog.Pid())
		case <-feed.C:
			now := supervise.Now()
			if lost == nil && !revoked && lease.Token() != 0 {
				_ = dog.Deadline(trusted(now))
			}
			if tty >= 0 && leaderGone != nil && commandStopped(group) {
				// ^Z stopped the command: hand the terminal back to the
				// shell and stop ourselves with the signal ^Z sends, as
				// a shell's job does (a pty wrapper such as script(1)
				// takes a child's SIGSTOP as a cue to stop itself). The
				// lease is not renewed while run is stopped: the
				// watchdog kills the command at its deadline. fg sends
				// SIGCONT, which is forwarded below.
				takeTerminal(tty)
				stoppedSelf = true
				_ = syscall.Kill(self, syscall.SIGTSTP)
			}
		case call := <-ctlCalls:
			r := call.req
			ours := r.Lease == o.name && r.Holder == lease.Holder().String() && store.Token(r.Token) == token
			live := !selfRelease && lost == nil && !revoked && lease.Token() != 0
			switch {
			case r.Op == opProgress && ours && live:
				lease.Progress()
				h.progressed()
				call.reply <- controlReply{Token: int64(token)}
				continue
			case r.Op == opProgress:
				call.reply <- controlReply{NotHeld: true, Error: fmt.Sprintf("tenure run no longer holds lease %q with token %d (%s); progress not recorded", o.name, token, o.endedWhy(lease, lost, revoked, selfRelease))}
				continue
			case r.Op == opRevoke:
				// Any caller in the command's tree may ask: after a fork or
				// a restore, the environment is all a copy has.
				call.reply <- controlReply{Revoked: !revoked, Token: int64(token)}
				if !revoked {
					revoked, revokedBy = true, "by tenure revoke-inherited"
					client.Revoke()
					killed = true
					dog.Stopping(supervise.Now())
					signalTree(syscall.SIGKILL)
				}
				continue
			}
			if r.Op != "release" || !ours || !live {
				// Not this live tenure: let release ask the store.
				call.reply <- controlReply{Fallback: true}
				break
			}
			selfRelease = true
			wg.Go(func() {
				rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
				defer cancel()
				released <- selfReleased{err: lease.Release(rctx), reply: call.reply}
			})
		case r := <-released:
			if r.err != nil {
				r.reply <- controlReply{Error: fmt.Sprintf("tenure run could not release lease %q: %s", o.name, message(target.Wrap(r.err)))}
				if lost == nil {
					// Lost before the release, or the release failed
					// after the tenure ended here: a loss either way.
					lost = r.err
					stopTree(supervise.Now() + int64(grace))
					e.errorf("lost lease %q with token %d: %s; stopping the command (SIGTERM now, SIGKILL in %s)",
						o.name, token, target.Redact(lossReason(lost)), time.Duration(killAt-supervise.Now()).Round(time.Millisecond))
				}
				break
			}
			selfDone = true
			o.out.endedNow()
			r.reply <- controlReply{Released: true, Token: int64(token)}
			// The next holder may start now: the command's tree has the
			// grace to finish, then is killed (by us and the watchdog).
			killAt = dog.Stopping(supervise.Now() + int64(grace))
			if killTimer == nil && leaderGone != nil {
				killTimer = time.NewTimer(time.Duration(killAt - supervise.Now()))
				kill = killTimer.C
			}
		case <-done:
			done = nil
			if selfRelease {
				var le *tenure.LostError
				if errors.As(lease.Err(), &le) && le.Reason == tenure.LossReleased {
					break // The command's own release: see released.
				}
			}
			lost = lease.Err()
			o.out.endedNow()
			now := supervise.Now()
			at := now + int64(grace)
			var le *tenure.LostError
			if errors.As(lost, &le) && (le.Reason == tenure.LossSuspended || le.Reason == tenure.LossExpiredLocally || le.Reason == tenure.LossRevoked ||
				le.Reason == tenure.LossExpiredAtStore || le.Reason == tenure.LossSuperseded) {
				// Declared at or after the local deadline (or revoked),
				// or the store already let the lease go (released with
				// --force, expired, taken over: the next holder may be
				// running): there is no grace left to give.
				at = now
			}
			stopTree(at)
			if revoked {
				break // Run revoked it itself: its line, once the tree is gone, says why.
			}
			how := fmt.Sprintf("SIGTERM now, SIGKILL in %s", time.Duration(killAt-now).Round(time.Millisecond))
			if killed {
				how = "SIGKILL now: no grace is left"
			}
			e.errorf("lost lease %q with token %d: %s; stopping the command (%s)",
				o.name, token, target.Redact(lossReason(lost)), how)
		case <-kill:
			kill = nil
			killed = true
			switch {
			case selfDone && lost == nil:
				e.errorf("the command released lease %q (token %d) but its tree was still running %s later; killing it", o.name, token, grace)
			case terminated && lost == nil:
				e.errorf("the command's tree was still running %s (--grace) after SIGTERM; killing it", grace)
			}
			signalTree(syscall.SIGKILL)
		case s := <-sigs:
			switch {
			case s == RevokeSignal:
				if !revoked {
					revoked, revokedBy = true, "on wake or restore (SIGPWR, which a resume or restore hook sends)"
					client.Revoke()
					killed = true
					dog.Stopping(supervise.Now())
					signalTree(syscall.SIGKILL)
				}
			case s == syscall.SIGCONT && stoppedSelf:
				stoppedSelf = false
				if tty >= 0 {
					giveTerminal(tty, group)
				}
				signalGroup(s)
			default:
				signalGroup(s)
				if s == syscall.SIGTERM && !terminated && leaderGone != nil && killTimer == nil {
					// A stop request (docker stop, a pod's deletion,
					// systemctl stop): the command has the grace to
					// exit, then its tree is killed, so that the release
					// comes before whoever asked loses patience.
					terminated = true
					killTimer = time.NewTimer(grace)
					kill = killTimer.C
				}
			}
			if killed && kill == nil && (stopping || revoked) {
				signalTree(syscall.SIGKILL)
			}
		case <-ctxDone:
			ctxDone = nil
			signalGroup(syscall.SIGTERM)
		}
	}
	removeCgroup(e, cg)
	status := exitStatus(cmd.ProcessState)
	o.out.commandEnded(cmd.ProcessState)
	o.out.Ended = endedExited
	// The tree is gone. Release first, then disarm: the watchdog's exit
	// need not delay the next holder. fired tells whether the watchdog
	// killed the tree (its line is on stderr): then the tenure is lost,
	// whatever the store says.
	defer func() { _, _ = dog.Disarm() }() // A watchdog that died has nothing left to do.
	if revoked {
		o.out.endedNow()
		o.out.Ended, o.out.Reason = endedLost, tenure.LossRevoked.String()
		e.errorf("lease %q with token %d revoked %s; the command was killed and the lease is left to expire", o.name, token, revokedBy)
		return &exitError{code: ExitLost}
	}
	if lost == nil && !selfRelease && lease.Token() == 0 && dog.Fired(time.Second) {
		// The watchdog fires only when run was not scheduled past the
		// kill deadline, so the tenure is no longer trusted either.
		lost = errors.New("the watchdog killed the command")
		e.errorf("lost lease %q with token %d: the watchdog killed the command while tenure was stopped or not scheduled", o.name, token)
	}
	if lost != nil {
		o.out.Ended, o.out.Reason = endedLost, lossReason(lost)
		if storeReachable(lost) {
			// The command is dead: let the next holder in now rather than
			// at expiry, if the lease is still ours at the store.
			releaseQuietly(ctx, lease)
		}
		return &exitError{code: ExitLost}
	}
	if selfRelease {
		// Released at the command's request (or that release failed and
		// the lease expires by its TTL): the command's status stands.
		if status == 0 {
			return nil
		}
		return &exitError{code: status}
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	err = lease.Release(rctx)
	o.out.endedNow()
	if err != nil {
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
	switch lost.Reason {
	case tenure.LossExpiredAtStore:
		why += " (it expired there, or was released, e.g. by tenure release --force)"
	case tenure.LossSeqMismatch:
		why += " (the chain moved on: a clone, or an operator's release --force)"
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
	case tenure.LossSuspended, tenure.LossProgressStalled:
		// Not LossRevoked: run revokes on RevokeSignal, when this may be a
		// restored copy whose lease is the original's to release.
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

// reportHolders reports each change of the lease's holder while run waits
// for it, until ctx ends: one line on standard error, or one log record
// with -v or --log-format json. first is the holder the first attempt met
// (already reported), nil when it failed otherwise; run's own grant is
// not a change worth reporting (the command's start says it).
func (o *runOptions) reportHolders(ctx context.Context, e *env, client *tenure.Client, first *store.HeldError) {
	var last tenure.Observation
	if first != nil {
		last = tenure.Observation{Name: o.name, Held: true, Holder: first.Holder, Token: first.Token}
	}
	// Observe ends with ctx, or with a store that is closed or not set
	// up, which the campaign reports.
	_ = client.Observe(ctx, o.name, func(ob tenure.Observation) {
		same := ob.Held == last.Held && ob.Holder == last.Holder && ob.Token == last.Token
		if same || (ob.Held && ob.Holder == client.Holder()) || ctx.Err() != nil {
			return
		}
		last = ob
		if e.reports != nil {
			attrs := []any{"lease", o.name, "held", ob.Held}
			if ob.Held {
				attrs = append(attrs, "holder", ob.Holder.String(), "token", int64(ob.Token), "remaining", ob.Remaining)
			}
			e.reports.Info("lease holder changed", attrs...)
			return
		}
		if !ob.Held {
			e.errorf("lease %q is not held now by the store's clock; still waiting to take it", o.name)
			return
		}
		e.errorf("lease %q is now held by %s with token %d for another %s by the store's clock; still waiting for it",
			o.name, ob.Holder, ob.Token, remaining(ob.Remaining))
	})
}

// endedWhy says in a few words why the tenure is no longer live, for a
// progress report that came too late.
func (o *runOptions) endedWhy(lease *tenure.Lease, lost error, revoked, selfRelease bool) string {
	switch {
	case revoked:
		return "revoked"
	case selfRelease:
		return "the command released it"
	case lost != nil:
		return "lost: " + lossReason(lost)
	case lease.Err() != nil:
		return "lost: " + lossReason(lease.Err())
	}
	return "no renewal was seen in time"
}

// heldLine says who holds lease name, as the store refused it: a holder,
// or, just after a release, the follower in line the store keeps it for.
func heldLine(name string, held *store.HeldError) string {
	if held.Holder == (store.Holder{}) && held.Next != (store.Holder{}) {
		return fmt.Sprintf("lease %q was just released and is kept for the next follower in line, %s, for another %s by the store's clock",
			name, held.Next, remaining(held.Remaining))
	}
	return fmt.Sprintf("lease %q is held by %s with token %d for another %s by the store's clock",
		name, held.Holder, held.Token, remaining(held.Remaining))
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
	attr.UseCgroupFD, attr.CgroupFD = false, 0
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
