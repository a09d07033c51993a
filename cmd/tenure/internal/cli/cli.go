package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"regexp"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tenure-dev/tenure/store"

	"github.com/tenure-dev/tenure"
	"github.com/tenure-dev/tenure/cmd/tenure/internal/registrycli"
	"github.com/tenure-dev/tenure/cmd/tenure/internal/storeopen"
	"github.com/tenure-dev/tenure/cmd/tenure/internal/storeurl"
)

// Exit codes of the tenure command (see the package documentation).
const (
	ExitOK          = 0
	ExitFailure     = 1
	ExitNoOwner     = registrycli.ExitNoOwner   // owner: the resource has no owner
	ExitOwnerDead   = registrycli.ExitOwnerDead // owner: the resource's owner is dead
	ExitUsage       = 64                        // EX_USAGE
	ExitUnavailable = 69                        // EX_UNAVAILABLE
	ExitNotAcquired = 75                        // EX_TEMPFAIL
	ExitNotMigrated = 78                        // EX_CONFIG
	ExitLost        = 79
	ExitCannotExec  = 126
	ExitNotFound    = 127
	ExitSignalBase  = 128
)

// Environment variables set for the command run under a lease.
const (
	EnvToken  = "TENURE_TOKEN"
	EnvLease  = "TENURE_LEASE"
	EnvHolder = "TENURE_HOLDER"
)

// Main runs the tenure command with args (without the program name),
// writing to stdout and stderr, and returns the exit code. It handles the
// signals its subcommands need itself: run forwards SIGINT, SIGTERM and
// SIGHUP to its command, status --watch stops on them. ctx ending stops
// the subcommand as SIGTERM would.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	e := &env{
		stdin:   os.Stdin,
		stdout:  stdout,
		stderr:  stderr,
		getenv:  os.Getenv,
		environ: os.Environ,
	}
	return e.main(ctx, args)
}

// env is what a subcommand may touch of the outside world.
type env struct {
	stdin          *os.File
	stdout, stderr io.Writer
	getenv         func(string) string
	environ        func() []string
	// logger is the lease client's, as the global flags -v and
	// --log-format ask; main sets it.
	logger *slog.Logger
	// reports, when -v or --log-format json is given, takes the command's
	// own progress reports as log records instead of plain lines.
	reports *slog.Logger
}

// action runs a subcommand with its positional arguments, after its flags
// were parsed.
type action func(ctx context.Context, e *env, args []string) error

// command describes one subcommand.
type command struct {
	summary  string // one line for the command list
	synopsis string // the usage line, after "tenure "
	about    string // what it does, for `tenure help NAME`
	// onHost, when set, says how the command works on this host; help
	// shows it after about (the generated docs, for every host, do not).
	onHost func() string
	// interspersed lets flags follow positional arguments.
	interspersed bool
	// raw passes the arguments to the action unparsed: the command parses
	// its own flags.
	raw bool
	// hidden leaves the command out of the overview and the command list
	// of messages; `tenure help NAME` still describes it.
	hidden bool
	// words are the fixed words the first positional argument may be,
	// which shell completion offers (nil: none).
	words func() []string
	// files has shell completion offer file names for the positional
	// arguments (run's command line).
	files bool
	// setup defines the flags on fs and returns the action that uses them.
	setup func(fs *flag.FlagSet) action
}

// commandTable lists the subcommands. To add one, add an entry here.
func commandTable() map[string]*command {
	return map[string]*command{
		"run":         runCommand(),
		"status":      statusCommand(),
		"history":     historyCommand(),
		"serve":       serveCommand(),
		"release":     releaseCommand(),
		"migrate":     migrateCommand(),
		"doctor":      doctorCommand(),
		"fence":       fenceCommand(),
		"agents":      agentsCommand(),
		"owner":       ownerCommand(),
		"demo":        demoCommand(),
		"demo-worker": demoWorkerCommand(),
		"version":     versionCommand(),
		"help":        helpCommand(),
		"completion":  completionCommand(),
		"docs":        docsCommand(),

		completeRequest: completeRequestCommand(),

		// Called by tenure run's command and by its hooks.
		"progress":         progressCommand(),
		"revoke-inherited": revokeInheritedCommand(),
	}
}

func (e *env) main(ctx context.Context, args []string) int {
	if _, ok := e.stderr.(*os.File); !ok {
		// Log lines and messages come from several goroutines; a file
		// takes concurrent writes as it is (and run's command and
		// watchdog must get the file itself).
		e.stderr = &syncWriter{w: e.stderr}
	}
	var global globalFlags
	args, err := global.parseGlobal(args)
	if err != nil {
		return e.exit(err)
	}
	if len(args) == 0 {
		fmt.Fprint(e.stderr, overview())
		return e.exit(usagef("", "no command given"))
	}
	name := args[0]
	switch name {
	case "-h", "--help":
		name = "help"
	case "--version":
		name = "version"
	case "-help", "-version":
		return e.exit(usagef("", "%s", longFlagMessage(name)))
	}
	cmd, ok := commandTable()[name]
	if !ok {
		return e.exit(usagef("", "unknown command %q; the commands are %s", name, strings.Join(commandNames(), ", ")))
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	act := cmd.setup(fs)
	if cmd.raw {
		return e.exit(act(ctx, e, args[1:]))
	}
	global.define(fs)
	if err := singleDash(fs, args[1:], cmd.interspersed); err != nil {
		return e.exit(usagef(name, "%v", err))
	}
	pos, err := parseArgs(fs, args[1:], cmd.interspersed)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(e.stdout, commandHelp(name, cmd))
		return ExitOK
	}
	if err != nil {
		return e.exit(usagef(name, "%s", flagMessage(err)))
	}
	e.logger = global.logger(e.stderr)
	e.reports = global.reports(e.stderr)
	return e.exit(act(ctx, e, pos))
}

// commandNames lists the commands that are not hidden, by name.
func commandNames() []string {
	var names []string
	for n, cmd := range commandTable() {
		if !cmd.hidden {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

// parseArgs parses fs from args and returns the positional arguments. With
// interspersed, flags may also follow positional arguments; "--" ends the
// flags either way.
func parseArgs(fs *flag.FlagSet, args []string, interspersed bool) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if !interspersed || len(rest) == 0 {
			return append(pos, rest...), nil
		}
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// singleDash refuses a long flag written with one dash (-store for
// --store), which the flag package would take: the documentation writes
// long flags with two, and one dash is for the one-letter flags (-v, -h).
// It reads args as parseArgs does, skipping the values of flags.
func singleDash(fs *flag.FlagSet, args []string, interspersed bool) error {
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if arg == "--" {
			return nil
		}
		if len(arg) < 2 || arg[0] != '-' {
			if !interspersed {
				return nil
			}
			continue
		}
		dashes := 1
		if arg[1] == '-' {
			dashes = 2
		}
		name, _, hasValue := strings.Cut(arg[dashes:], "=")
		if dashes == 1 && utf8.RuneCountInString(name) > 1 {
			return errors.New(longFlagMessage(arg))
		}
		if f := fs.Lookup(name); f != nil && !hasValue && !isBoolFlag(f) {
			i++ // its value follows
		}
	}
	return nil
}

// longFlagMessage refuses arg, a long flag written with one dash, naming
// the flag but not its value (a store URL's password, say).
func longFlagMessage(arg string) string {
	name, _, _ := strings.Cut(strings.TrimPrefix(arg, "-"), "=")
	return fmt.Sprintf("-%s is written --%s: long flags take two dashes", name, name)
}

func isBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// flagMessage renders an error of the flag package naming flags as the
// documentation writes them: --name, not -name.
func flagMessage(err error) string {
	return flagName.ReplaceAllString(err.Error(), "${1}--$2")
}

var flagName = regexp.MustCompile(`(flag |defined: |argument: | for )-([^-\s:][^\s:]+)`)

// usageError is a mistake in the command line.
type usageError struct {
	cmd string
	msg string
}

func usagef(cmd, format string, args ...any) error {
	return &usageError{cmd: cmd, msg: fmt.Sprintf(format, args...)}
}

func (e *usageError) Error() string {
	if e.cmd == "" {
		return e.msg + " (see `tenure help`)"
	}
	return fmt.Sprintf("%s: %s (see `tenure help %s`)", e.cmd, e.msg, e.cmd)
}

// exitError ends a subcommand with a code of its choosing. A nil err
// prints nothing: the line was printed already, or the code is the run
// command's own.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// exitCode is the one place where errors become exit codes.
func exitCode(err error) int {
	var ee *exitError
	var ue *usageError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &ee):
		return ee.code
	case errors.As(err, &ue), errors.Is(err, store.ErrInvalid):
		return ExitUsage
	case errors.Is(err, store.ErrNotMigrated):
		return ExitNotMigrated
	case errors.Is(err, store.ErrHeld):
		return ExitNotAcquired
	case errors.Is(err, tenure.ErrLost):
		return ExitLost
	case errors.Is(err, store.ErrUnavailable), errors.Is(err, store.ErrClosed):
		return ExitUnavailable
	}
	return ExitFailure
}

// exit prints err as one line and returns its exit code.
func (e *env) exit(err error) int {
	code := exitCode(err)
	var ee *exitError
	if err != nil && (!errors.As(err, &ee) || ee.err != nil) {
		msg := message(err)
		if code == ExitNotMigrated && !strings.Contains(msg, "tenure migrate") {
			msg += "; run `tenure migrate` as the schema's owner"
		}
		e.errorf("%s", msg)
	}
	return code
}

// errorf prints one line on standard error, prefixed "tenure: ".
func (e *env) errorf(format string, args ...any) {
	fmt.Fprintf(e.stderr, "tenure: %s\n", message(fmt.Errorf(format, args...)))
}

// message renders err on one line without the "tenure: " and
// "storeurl: " prefixes of the errors it wraps (errorf prefixes the line
// once), nor the text of store.ErrInvalid, which says nothing the rest of
// the message does not.
func message(err error) string {
	msg := strings.Join(strings.Fields(err.Error()), " ")
	return innerPrefix.ReplaceAllString(msg, "$1")
}

// innerPrefix matches the package prefixes a wrapped error brings along,
// at the start of the message or of a wrapped part.
var innerPrefix = regexp.MustCompile(`(^|: )(?:(?:tenure|storeurl): |invalid argument: )+`)

// durationValue is a flag holding a non-negative duration, with an error
// that says how to write one.
type durationValue struct{ d *time.Duration }

func durationFlag(fs *flag.FlagSet, name string, def time.Duration, usage string) *time.Duration {
	d := def
	fs.Var(durationValue{&d}, name, usage)
	return &d
}

func (v durationValue) String() string {
	if v.d == nil {
		return ""
	}
	return v.d.String()
}

func (v durationValue) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("%q is not a duration; write a number with a unit, such as 30s, 2m or 1500ms", s)
	}
	if d < 0 {
		return fmt.Errorf("%q is negative", s)
	}
	*v.d = d
	return nil
}

// storeUsage documents the --store flag of every command that opens a
// store.
const storeUsage = "store `URL`: " + storeurl.Supported + " (default $" + storeurl.EnvVar + ", else the SQLite file in $XDG_STATE_HOME/tenure); TLS and secrets: see tenure help"

// openStore resolves and opens the store of command's --store flag value
// (given says whether the flag was on the command line). An empty --store,
// or an empty but set TENURE_STORE, is refused as a usage error; the
// default store (this host's SQLite file) is announced on standard error.
func (e *env) openStore(ctx context.Context, command string, given bool, flagValue string) (*storeopen.Opened, error) {
	if given && strings.TrimSpace(flagValue) == "" {
		return nil, usagef(command, "--store is empty; give a store URL, or leave --store out for $%s or the default SQLite file", storeurl.EnvVar)
	}
	if flagValue == "" && envSetEmpty(e, storeurl.EnvVar) {
		return nil, usagef(command, "%s is set but empty; set it to a store URL, or unset it to use the default SQLite file of this host", storeurl.EnvVar)
	}
	t, err := storeurl.Resolve(flagValue, e.getenv)
	if err != nil {
		return nil, err
	}
	e.announceDefault(t, "to see other hosts' leases")
	return storeopen.Open(ctx, t, storeopen.Options{})
}

// announceDefault says on standard error that t, the default store, is
// about to be created: once per host and user, when its file does not
// exist yet, not on every call (a cron job's log would repeat it nightly).
// purpose ends the line's advice: "pass --store or set TENURE_STORE
// <purpose>".
func (e *env) announceDefault(t storeurl.Target, purpose string) {
	if !t.Default {
		return
	}
	if _, err := os.Stat(t.File()); !errors.Is(err, fs.ErrNotExist) {
		return
	}
	e.errorf("creating the default store %s: this host only; pass --store or set %s %s (said once, as the file is made)", t.Display, storeurl.EnvVar, purpose)
}

// flagSet reports whether the flag name was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) {
		if f.Name == name {
			set = true
		}
	})
	return set
}

// storeTimeout bounds one store call made outside the lease loop (get,
// release, list).
const storeTimeout = 10 * time.Second

func withStoreTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, storeTimeout)
}

// remaining renders a remaining time for people.
func remaining(d time.Duration) string {
	return d.Round(time.Millisecond).String()
}
