package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/tenure-dev/tenure"
	"github.com/tenure-dev/tenure/cmd/tenure/internal/storeopen"
	"github.com/tenure-dev/tenure/store"
)

// ExitWindowDone is run's exit status when --once-per finds the window
// already run (completed, or begun and not to be retried): nothing was run.
const ExitWindowDone = 80

// EnvWindow is the window key run passes to the command under --once-per
// (an idempotency key for its side effects).
const EnvWindow = "TENURE_WINDOW"

// endedWindowDone is --json's ended when the window already ran.
const endedWindowDone = "window_done"

// windowOptions are run's flags of the windows: run the command at most
// once per window (--once-per, --window-key, --retry-failed).
type windowOptions struct {
	period *time.Duration
	key    string
	retry  bool
	// begun is the window this run began, once it has, in ws.
	begun *store.Window
	ws    store.Windower
	// finishErr is why the window could not be finished, once printed.
	finishErr error
}

func (w *windowOptions) register(fs *flag.FlagSet) {
	w.period = durationFlag(fs, "once-per", 0, "run the command at most once per window of this `duration` of the store's clock (at least 1s, whole milliseconds), or per --window-key; a window that already ran exits 80")
	fs.StringVar(&w.key, "window-key", "", "with or instead of --once-per, the window's `KEY` (a date, a batch id) named by the caller rather than derived from the store's clock; required on etcd")
	fs.BoolVar(&w.retry, "retry-failed", false, "with --once-per or --window-key, run a window whose earlier run began and did not complete (it failed, or its tenure ended halfway); without it such a window exits 80")
}

// on reports whether run runs its command once per window.
func (w *windowOptions) on() bool { return *w.period != 0 || w.key != "" }

// check refuses window flags that do not fit together, and makes run wait
// for the lease: a worker that finds the window running waits for its
// end, then learns from the store whether it completed.
func (w *windowOptions) check(o *runOptions) error {
	if !w.on() {
		if w.retry {
			return usagef("run", "--retry-failed needs --once-per or --window-key")
		}
		return nil
	}
	if o.name != "" && w.key == "" {
		if err := store.ValidateWindow(o.name, "", *w.period); err != nil {
			return usagef("run", "--once-per: %s", message(err))
		}
	}
	if o.heldExit.set {
		return usagef("run", "--held-exit-code does not apply with --once-per or --window-key: a worker waits for the window's run to end, then exits 80 if it completed")
	}
	if w.key != "" {
		if err := store.ValidateWindowKey(w.key); err != nil {
			return usagef("run", "--window-key: %s", message(err))
		}
	}
	o.wait = true
	return nil
}

// env is the command's environment entry of the window, once begun.
func (w *windowOptions) env() []string {
	if w.begun == nil {
		return nil
	}
	return []string{EnvWindow + "=" + w.begun.Key}
}

// windowDone refuses at once, before taking the lease, a store that
// records no windows, and a named window that the store says has
// completed.
func (o *runOptions) windowDone(ctx context.Context, opened *storeopen.Opened) error {
	if !o.win.on() {
		return nil
	}
	ws, err := windower(opened)
	if err != nil || o.win.key == "" {
		return err
	}
	w, err := ws.GetWindow(ctx, o.name, o.win.key)
	if err == nil && w.State == store.WindowCompleted {
		return o.refused(&store.WindowDoneError{Window: w})
	}
	return nil
}

// beginWindow begins the window under the lease just acquired; when the
// store refuses it, the lease is released and run exits 80.
func (o *runOptions) beginWindow(ctx context.Context, e *env, opened *storeopen.Opened, lease *tenure.Lease) error {
	ws, err := windower(opened)
	if err != nil {
		releaseQuietly(ctx, lease)
		return err
	}
	w, err := ws.StartWindow(ctx, store.StartWindowParams{Name: o.name, Holder: lease.Holder(), Token: lease.Token(),
		Key: o.win.key, Period: o.windowPeriod(), RetryFailed: o.win.retry})
	var done *store.WindowDoneError
	switch {
	case errors.As(err, &done):
		releaseQuietly(ctx, lease)
		return o.refused(done)
	case err != nil:
		releaseQuietly(ctx, lease)
		return opened.Target.Wrap(err)
	}
	o.win.begun, o.win.ws = &w, ws
	e.logger.Info("window begun", "lease", o.name, "window", w.Key, "token", int64(w.Token), "attempt", w.Attempts)
	return nil
}

// windowPeriod is the period the store derives the window from: none when
// the caller names it.
func (o *runOptions) windowPeriod() time.Duration {
	if o.win.key != "" {
		return 0
	}
	return *o.win.period
}

// finishWindow records the window begun by this run completed (the command
// exited 0) or failed, before the lease is released. When the store
// refuses (the tenure ended) or cannot be asked, it says so on standard
// error, and run exits non-zero even if the command succeeded: the window
// stays begun and not completed.
func (s *supervision) finishWindow() {
	w := s.o.win.begun
	if w == nil {
		return
	}
	outcome := store.WindowFailed
	if s.cmd.ProcessState != nil && s.cmd.ProcessState.Success() {
		outcome = store.WindowCompleted
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(s.ctx), releaseTimeout)
	defer cancel()
	if _, err := s.o.win.ws.FinishWindow(ctx, store.FinishWindowParams{Name: w.Name, Key: w.Key, Holder: w.Holder, Token: w.Token, Outcome: outcome}); err != nil {
		s.o.win.finishErr = err
		s.e.errorf("window %s of %q ran but could not be recorded %s: %s; it stays begun and not completed (without --retry-failed it will not run again)",
			store.WindowKeyString(w.Key), w.Name, outcome, message(err))
	}
}

// after is run's result once supervise returned err: a window that could
// not be finished turns a success into its exit code (the line was
// printed).
func (w *windowOptions) after(err error) error {
	if err == nil && w.finishErr != nil {
		return &exitError{code: exitCode(w.finishErr)}
	}
	return err
}

// refused is run's result for a window that already ran: one line naming
// who ran it, when and with which token, and exit 80.
func (o *runOptions) refused(done *store.WindowDoneError) error {
	o.out.Ended = endedWindowDone
	return &exitError{code: ExitWindowDone, err: fmt.Errorf("%s; nothing was run", done.Error())}
}

// windower is the opened store's [store.Windower], or a usage error.
func windower(opened *storeopen.Opened) (store.Windower, error) {
	ws, ok := opened.Store.(store.Windower)
	if !ok {
		name := "this"
		if opened.Target.Backend != nil {
			name = "the " + opened.Target.Backend.Name()
		}
		return nil, usagef("run", "--once-per and --window-key need a store that records windows (PostgreSQL, SQLite, Redis, etcd); %s store does not", name)
	}
	return ws, nil
}
