package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Limits of a window ([Windower]).
const (
	// MaxWindowKeyLen is the longest window key, in bytes.
	MaxWindowKeyLen = 255
	// MinWindowPeriod is the shortest period a store derives windows from.
	MinWindowPeriod = time.Second
)

// ErrWindowDone: the window already ran, or began and may not be run
// again. See [WindowDoneError].
var ErrWindowDone = errors.New("tenure: window already ran")

// Windower is implemented by stores that can run a job at most once per
// window (`tenure run --once-per`, [tenure.Client.Once]): a window is a
// name the caller gives (a date, a batch id) or one the store derives from
// a period on its own clock, and the store records, in the same atomic
// step that checks the caller's tenure, that the window was begun, then
// whether it completed or failed.
//
// Every call compares the caller's lease exactly as [Store.Release] does:
// held, by the store's clock, by p.Holder with p.Token. A tenure that
// ended (a crash, a lost lease, a pause longer than the TTL) can therefore
// neither begin nor finish a window: it is fenced, and gets [ErrNotHeld].
//
// [tenure.Client.Once]: https://pkg.go.dev/github.com/tenure-dev/tenure#Client.Once
type Windower interface {
	// StartWindow begins the window p names for the tenure (p.Holder,
	// p.Token), or refuses it (see [DecideStart] for the whole rule):
	//   - a window never begun is begun, attempt 1;
	//   - a completed window is refused with a [*WindowDoneError];
	//   - a window begun by an earlier tenure and not completed (that
	//     tenure failed, or ended halfway) is begun again by this one
	//     when p.RetryFailed is set, and refused with a
	//     [*WindowDoneError] otherwise;
	//   - a window begun by this same tenure is returned as it is (a
	//     repeated call after a lost reply), or begun again after a
	//     failure when p.RetryFailed is set.
	// It returns the window as recorded after the call.
	StartWindow(ctx context.Context, p StartWindowParams) (Window, error)

	// FinishWindow records the outcome (WindowCompleted or WindowFailed)
	// of a window begun by the tenure (p.Holder, p.Token), still held. A
	// window begun again by a later tenure since, or a tenure that ended,
	// is refused with [ErrNotHeld] and changes nothing. Finishing a window
	// again with the outcome it has is no error.
	FinishWindow(ctx context.Context, p FinishWindowParams) (Window, error)

	// GetWindow returns the window key of the lease name as recorded, or
	// [ErrNotFound].
	GetWindow(ctx context.Context, name, key string) (Window, error)
}

// WindowState is where a window stands.
type WindowState int

const (
	// WindowStarted: begun by Window.Token, not finished (still running,
	// or its tenure ended halfway).
	WindowStarted WindowState = iota + 1
	// WindowCompleted: its run completed; it never runs again.
	WindowCompleted
	// WindowFailed: its run failed and said so.
	WindowFailed
)

var windowStateNames = [...]string{
	WindowStarted:   "started",
	WindowCompleted: "completed",
	WindowFailed:    "failed",
}

// String returns "started", "completed" or "failed": the names backends
// store and the CLI prints.
func (s WindowState) String() string {
	if s >= WindowStarted && int(s) < len(windowStateNames) {
		return windowStateNames[s]
	}
	return fmt.Sprintf("WindowState(%d)", int(s))
}

// ParseWindowState returns the state [WindowState.String] names.
func ParseWindowState(s string) (WindowState, error) {
	for k := WindowStarted; int(k) < len(windowStateNames); k++ {
		if windowStateNames[k] == s {
			return k, nil
		}
	}
	return 0, fmt.Errorf("%w: %q is not a window state", ErrInvalid, s)
}

// Window is the record of one window of one lease name.
type Window struct {
	Name string
	Key  string
	// State is where it stands; Holder and Token are the tenure that
	// began it last (the one that completed it, once completed).
	State  WindowState
	Holder Holder
	Token  Token
	// Attempts counts the tenures that began it (1 unless failed runs
	// were retried).
	Attempts int64
	// StartedAt is when it was last begun, FinishedAt when it was
	// finished (zero while started), by the store's clock, in UTC.
	StartedAt  time.Time
	FinishedAt time.Time
}

// WindowDoneError reports a window [Windower.StartWindow] refused: it
// completed, or it began and may not be retried. Window says who ran it,
// when and with which token.
type WindowDoneError struct {
	Window Window
}

func (e *WindowDoneError) Error() string {
	w := e.Window
	switch w.State {
	case WindowCompleted:
		return fmt.Sprintf("tenure: window %s of %q already ran: completed by %s with token %d at %s",
			WindowKeyString(w.Key), w.Name, w.Holder, w.Token, w.FinishedAt.UTC().Format(time.RFC3339Nano))
	case WindowFailed:
		return fmt.Sprintf("tenure: window %s of %q already ran and failed: begun by %s with token %d at %s, failed at %s; it is not retried without RetryFailed (--retry-failed)",
			WindowKeyString(w.Key), w.Name, w.Holder, w.Token, w.StartedAt.UTC().Format(time.RFC3339Nano), w.FinishedAt.UTC().Format(time.RFC3339Nano))
	default:
		return fmt.Sprintf("tenure: window %s of %q was begun by %s with token %d at %s and did not complete (its tenure ended halfway); it is not retried without RetryFailed (--retry-failed)",
			WindowKeyString(w.Key), w.Name, w.Holder, w.Token, w.StartedAt.UTC().Format(time.RFC3339Nano))
	}
}

// Is matches [ErrWindowDone].
func (e *WindowDoneError) Is(target error) bool { return target == ErrWindowDone }

// StartWindowParams asks to begin a window.
type StartWindowParams struct {
	Name   string
	Holder Holder
	Token  Token
	// Key names the window: a date, a batch id. Empty: the store derives
	// it from Period on its own clock (see [DerivedWindowKey]), never from
	// the caller's.
	Key string
	// Period, with no Key, makes the window the store's now divided by
	// Period, rounded down: at least [MinWindowPeriod], a whole number of
	// milliseconds. Zero with a Key.
	Period time.Duration
	// RetryFailed lets this tenure begin again a window an earlier run
	// began and did not complete. Without it such a window is refused:
	// a job that must not run twice, even halfway, runs at most once.
	RetryFailed bool
}

// Validate reports whether p is well formed.
func (p StartWindowParams) Validate() error {
	if err := validateTenure(p.Name, p.Holder); err != nil {
		return err
	}
	if err := validateToken(p.Name, p.Token); err != nil {
		return err
	}
	return ValidateWindow(p.Name, p.Key, p.Period)
}

// ValidateWindow reports whether key and period name a window of the lease
// name: a key ([ValidateWindowKey]) or a period (at least
// [MinWindowPeriod], a whole number of milliseconds), not both.
func ValidateWindow(name, key string, period time.Duration) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	switch {
	case key != "" && period != 0:
		return fmt.Errorf("%w: window of %q: give a key or a period, not both", ErrInvalid, name)
	case key != "":
		return ValidateWindowKey(key)
	case period < MinWindowPeriod || period%time.Millisecond != 0:
		return fmt.Errorf("%w: window of %q: the period %s must be at least %s and a whole number of milliseconds (or give a window key)",
			ErrInvalid, name, period, MinWindowPeriod)
	}
	return nil
}

// FinishWindowParams records the outcome of a window.
type FinishWindowParams struct {
	Name   string
	Key    string
	Holder Holder
	Token  Token
	// Outcome is WindowCompleted or WindowFailed.
	Outcome WindowState
}

// Validate reports whether p is well formed.
func (p FinishWindowParams) Validate() error {
	if err := validateTenure(p.Name, p.Holder); err != nil {
		return err
	}
	if err := validateToken(p.Name, p.Token); err != nil {
		return err
	}
	if err := validateAnyWindowKey(p.Key); err != nil {
		return err
	}
	if p.Outcome != WindowCompleted && p.Outcome != WindowFailed {
		return fmt.Errorf("%w: window %s of %q: the outcome must be completed or failed, not %s", ErrInvalid, p.Key, p.Name, p.Outcome)
	}
	return nil
}

// ValidateWindowKey reports whether key is a window key a caller may give:
// 1 to [MaxWindowKeyLen] bytes of UTF-8 without control characters, not
// starting with '@' (kept for the keys stores derive).
func ValidateWindowKey(key string) error {
	if strings.HasPrefix(key, "@") {
		return fmt.Errorf("%w: window key %q starts with '@', which names the windows a store derives from a period; choose another", ErrInvalid, key)
	}
	return validateAnyWindowKey(key)
}

// ValidateWindowLookup reports whether name and key may be looked up
// ([Windower.GetWindow]): a lease name and a key given or derived.
func ValidateWindowLookup(name, key string) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	return validateAnyWindowKey(key)
}

func validateAnyWindowKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: the window key is empty; name the window (a date, a batch id)", ErrInvalid)
	case len(key) > MaxWindowKeyLen:
		return fmt.Errorf("%w: window key of %d bytes exceeds the maximum of %d", ErrInvalid, len(key), MaxWindowKeyLen)
	case !utf8.ValidString(key):
		return fmt.Errorf("%w: window key %q is not valid UTF-8", ErrInvalid, key)
	case strings.IndexFunc(key, unicode.IsControl) >= 0:
		return fmt.Errorf("%w: window key %q contains a control character", ErrInvalid, key)
	}
	return nil
}

// DerivedWindowKey is the key of the window of period that contains the
// store time now (milliseconds since the Unix epoch): "@" followed by the
// window's start and its period, both in milliseconds, as in
// "@1796601600000+86400000". Stores compute it in their atomic step, in
// their own language; this is its definition, and the key memstore,
// sqlitestore and the conformance suite use.
func DerivedWindowKey(nowMs, periodMs int64) string {
	return "@" + strconv.FormatInt(nowMs-nowMs%periodMs, 10) + "+" + strconv.FormatInt(periodMs, 10)
}

// ParseDerivedWindowKey returns the start and period of a key
// [DerivedWindowKey] made; ok is false for any other key.
func ParseDerivedWindowKey(key string) (start time.Time, period time.Duration, ok bool) {
	rest, found := strings.CutPrefix(key, "@")
	if !found {
		return time.Time{}, 0, false
	}
	a, b, found := strings.Cut(rest, "+")
	if !found {
		return time.Time{}, 0, false
	}
	startMs, err1 := strconv.ParseInt(a, 10, 64)
	periodMs, err2 := strconv.ParseInt(b, 10, 64)
	if err1 != nil || err2 != nil || periodMs <= 0 {
		return time.Time{}, 0, false
	}
	return time.UnixMilli(startMs).UTC(), time.Duration(periodMs) * time.Millisecond, true
}

// WindowKeyString renders a window key for people: a derived key as its
// start and period ("2026-12-07T00:00:00Z (every 24h0m0s)"), any other
// quoted.
func WindowKeyString(key string) string {
	if start, period, ok := ParseDerivedWindowKey(key); ok {
		return fmt.Sprintf("%s (every %s)", start.Format(time.RFC3339Nano), period)
	}
	return strconv.Quote(key)
}

// StartDecision is what [DecideStart] tells a store to do.
type StartDecision int

const (
	// StartBegin: record the window as begun by the caller (attempt 1, or
	// one more than recorded).
	StartBegin StartDecision = iota + 1
	// StartAgain: the caller's own repeated call; change nothing and
	// return the window.
	StartAgain
	// StartRefuse: refuse with a [*WindowDoneError] carrying the window.
	StartRefuse
	// StartFenced: the window was begun by a later tenure than the
	// caller's; refuse with [ErrNotHeld].
	StartFenced
)

// DecideStart is the rule of [Windower.StartWindow] for a caller whose
// tenure the store has just found held: existing is the window's record,
// nil when it was never begun. Stores that run Go in their atomic step
// call it; the others (SQL, Lua) spell the same rule and the conformance
// suite checks them alike.
func DecideStart(existing *Window, p StartWindowParams) StartDecision {
	switch {
	case existing == nil:
		return StartBegin
	case existing.Token > p.Token:
		return StartFenced
	case existing.State == WindowCompleted:
		return StartRefuse
	case existing.State == WindowStarted && existing.Token == p.Token && existing.Holder == p.Holder:
		return StartAgain
	case p.RetryFailed:
		return StartBegin
	default:
		return StartRefuse
	}
}

// DecideFinish is the rule of [Windower.FinishWindow] for a caller whose
// tenure the store has just found held: it reports whether the window may
// take p.Outcome (changed) or already has it from this tenure (neither
// changed nor refused). existing nil is refused.
func DecideFinish(existing *Window, p FinishWindowParams) (change, ok bool) {
	if existing == nil || existing.Token != p.Token || existing.Holder != p.Holder {
		return false, false
	}
	switch existing.State {
	case WindowStarted:
		return true, true
	case p.Outcome:
		return false, true
	}
	return false, false
}

// FinishedEvent is the kind of the [HistoryEvent] of a window finished
// with outcome: [EventWindowCompleted] or [EventWindowFailed].
func FinishedEvent(outcome WindowState) EventKind {
	if outcome == WindowCompleted {
		return EventWindowCompleted
	}
	return EventWindowFailed
}
