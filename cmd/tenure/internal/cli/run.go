package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

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
const RevokeSignal = supervise.RevokeSignal

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
		synopsis: "run --name NAME [--slots N] [--ttl 30s] [--wait [--wait-timeout D] | --held-exit-code N] [--label L] [--payload TEXT] [--grace 10s] [--progress-timeout D] [--once-per D] [--window-key K] [--retry-failed] [--health ADDR] [--metrics ADDR] [--json FILE|-] [--store URL] -- CMD [ARGS...]",
		about:    runAbout,
		files:    true, // its positional arguments are a command line
		setup: func(fs *flag.FlagSet) action {
			var o runOptions
			fs.StringVar(&o.name, "name", "", "the lease `NAME` (required)")
			o.ttl = durationFlag(fs, "ttl", tenure.DefaultTTL, "the lease's lifetime at the store without renewal, a `duration` of at least 500ms (etcd: 2s; Consul: the servers' session_ttl_min, 10s by default), in whole seconds on etcd and NATS, whole milliseconds on Redis, Consul and Kubernetes")
			fs.BoolVar(&o.wait, "wait", false, "wait for the lease when it is held, instead of exiting 75")
			fs.IntVar(&o.slots, "slots", 0, "take one of `N` slots of NAME, the leases NAME#0 … NAME#N-1, whichever is free (with --wait, whichever frees first); the command gets TENURE_SLOT")
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
			o.win.register(fs)
			fs.BoolVar(&o.watchdog, "watchdog", false, hiddenFlag+"run as the watchdog of a tenure run, reading kill deadlines from descriptor 3")
			return func(ctx context.Context, e *env, args []string) error {
				if err := supervise.Supported(); err != nil {
					return usagef("run", "%v", err)
				}
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
	slots       int
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
	// win runs the command once per window (once.go).
	win windowOptions
}

// config checks the flags and returns the client configuration they ask
// for, before anything is opened.
func (o *runOptions) config(args []string) (tenure.Config, error) {
	if err := o.win.check(o); err != nil {
		return tenure.Config{}, err
	}
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
	if err := o.checkSlots(); err != nil {
		return tenure.Config{}, err
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

	if err := o.windowDone(ctx, opened); err != nil {
		return err
	}
	lease, err := o.acquire(ctx, e, client, sigs, opened)
	if err != nil {
		return err
	}
	o.slotTaken(lease)
	o.out.acquiredNow(lease.Holder().String(), lease.Token())
	if o.win.on() {
		if err := o.beginWindow(ctx, e, opened, lease); err != nil {
			return err
		}
	}
	h.held(lease)
	return o.win.after(o.supervise(ctx, e, client, lease, sigs, opened.Target, h, args))
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
