package tenure

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/tenure-dev/tenure/internal/engine"
)

// Observer receives what a [Client] does, for metrics: package
// github.com/tenure-dev/tenure/metrics implements it for Prometheus. Set
// it in [Config.Observer]; a nil Observer costs nothing.
//
// Handle is called by the client's loop, one call at a time and in the
// order things happened, on whichever goroutine steps the loop: Run's, an
// Acquire, Campaign, Do or Release call's, a store call's or the store
// listener's; never from [Lease.Token]. It must return quickly (update a
// counter, a gauge, a histogram) and must not call the client: while it
// runs, no lease is renewed. An Observer shared
// by several clients must be safe for concurrent use.
type Observer interface {
	Handle(Event)
}

// EventKind says what an [Event] reports.
type EventKind int

const (
	// EventAcquired: a tenure began. Name, Holder and Token are set;
	// Campaign and Duration tell how long a campaign waited for it. The
	// lease is held from now until the EventLost with the same Name and
	// Token.
	EventAcquired EventKind = iota + 1
	// EventLost: a tenure ended. Name, Holder, Token and Reason are set,
	// and Err (a [*LostError]). The lease is no longer held.
	EventLost
	// EventRenewed: one renewal round trip ended. Duration is the round
	// trip, Batch the number of leases it renewed, Err the store's error
	// (nil when the store answered; a lease it no longer gave to this
	// client is reported by its own EventLost).
	EventRenewed
	// EventAcquireFailed: an acquisition could not reach a verdict (the
	// store failed, or timed out). Name and Err are set; Campaign says
	// whether it will be retried. A refusal because someone else holds the
	// lease is not a failure and is not reported.
	EventAcquireFailed
	// EventSuspended: the process was found paused (the wall and
	// monotonic clocks disagree, or a timer fired far too late). Every
	// tenure ended, each with its EventLost, and the identity was
	// regenerated.
	EventSuspended
	// EventCloneDetected: the store showed that another copy of this
	// process (a snapshot restored twice, a fork) renewed or acquired with
	// this identity: the renewal chain moved (promise P6). Every tenure
	// ended, each with its EventLost, and the identity was regenerated.
	EventCloneDetected
	// EventNotified: the store announced that lease Name was released or
	// taken over ([store.Notifier]). The client hears only of the leases
	// it wants, holds or is giving back, so other leases' announcements
	// are not reported.
	EventNotified
	// EventSubscribed: the store's listener subscribed to announcements,
	// at first or again after a reconnection (announcements made while it
	// was not subscribed are lost; campaigns look again at once).
	EventSubscribed
)

var eventKindNames = map[EventKind]string{
	EventAcquired:      "acquired",
	EventLost:          "lost",
	EventRenewed:       "renewed",
	EventAcquireFailed: "acquire failed",
	EventSuspended:     "suspended",
	EventCloneDetected: "clone detected",
	EventNotified:      "notified",
	EventSubscribed:    "subscribed",
}

// String names the kind in a word or two.
func (k EventKind) String() string {
	if s, ok := eventKindNames[k]; ok {
		return s
	}
	return fmt.Sprintf("EventKind(%d)", int(k))
}

// Event is one thing a [Client] reports to its [Observer]. Kind says which
// of the other fields are set.
type Event struct {
	Kind EventKind
	// Store names the client's store: its package name (pgstore,
	// redisstore, …) or, for other types, the type's name.
	Store  string
	Name   string
	Holder Holder
	Token  Token
	Reason LossReason
	// Campaign is set on EventAcquired and EventAcquireFailed when the
	// acquisition is [Client.Campaign]'s (or [Client.Do]'s).
	Campaign bool
	// Duration is a renewal's round trip (EventRenewed), or the time
	// from the Acquire or Campaign call to its grant (EventAcquired): with
	// Campaign, how long the campaign waited.
	Duration time.Duration
	// Batch is the number of leases in a renewal round (EventRenewed).
	Batch int
	Err   error
}

// StoreName returns the name a [Client] reports its store by in events and
// logs: the package name of a type named Store (pgstore, redisstore,
// memstore, …), else the type's name.
func StoreName(s Store) string {
	name := strings.TrimLeft(fmt.Sprintf("%T", s), "*")
	if pkg, typ, ok := strings.Cut(name, "."); ok && typ == "Store" {
		return pkg
	}
	return name
}

// telemetry turns what the runner sees into events for the Observer and
// lines for the Logger. It belongs to the holder of the loop's turn. A nil *telemetry
// (neither configured) does nothing, at the cost of a nil check.
type telemetry struct {
	obs   Observer
	log   *slog.Logger
	store string
	clock Clock

	wants        map[string]*wanted // acquisitions in progress
	renewFailing bool
}

// wanted is one Acquire or Campaign in progress.
type wanted struct {
	campaign bool
	start    time.Duration // monotonic
	failures int           // consecutive store failures
	logged   time.Duration // when the last failure was logged
}

// unreachableEvery is how often a campaign that keeps failing to reach the
// store logs it again, after logging its first failure.
const unreachableEvery = time.Minute

func newTelemetry(c *Client) *telemetry {
	if c.cfg.Observer == nil && c.cfg.Logger == nil {
		return nil
	}
	t := &telemetry{
		obs:   c.cfg.Observer,
		store: StoreName(c.store),
		clock: c.cfg.Clock,
		wants: make(map[string]*wanted),
	}
	if c.cfg.Logger != nil {
		t.log = c.cfg.Logger.With(slog.String("store", t.store))
	}
	return t
}

func (t *telemetry) emit(e Event) {
	e.Store = t.store
	if t.obs != nil {
		t.obs.Handle(e)
	}
}

// transition reports a tenure's start or end.
func (t *telemetry) transition(tr Transition) {
	if t == nil {
		return
	}
	e := Event{Name: tr.Name, Holder: tr.Holder, Token: tr.Token}
	switch tr.Kind {
	case TransitionAcquired:
		e.Kind = EventAcquired
		if w := t.wants[tr.Name]; w != nil {
			delete(t.wants, tr.Name)
			_, mono := t.clock.Now()
			e.Campaign, e.Duration = w.campaign, mono-w.start
			t.recovered(tr.Name, w)
		}
		if t.log != nil {
			t.log.Info("lease acquired", slog.String("lease", tr.Name), slog.Int64("token", int64(tr.Token)), slog.String("holder", tr.Holder.String()))
		}
	case TransitionLost:
		e.Kind, e.Reason, e.Err = EventLost, tr.Reason, tr.Err
		if t.log != nil {
			attrs := []any{slog.String("lease", tr.Name), slog.Int64("token", int64(tr.Token)), slog.String("holder", tr.Holder.String()), slog.String("reason", tr.Reason.String())}
			if le, ok := tr.Err.(*LostError); ok && le.Cause != nil {
				attrs = append(attrs, slog.Any("err", le.Cause))
			}
			if tr.Reason == LossReleased || tr.Reason == LossClosed {
				t.log.Info("lease released", attrs...)
			} else {
				t.log.Warn("lease lost: stop writing under its token", attrs...)
			}
		}
	}
	t.emit(e)
}

// step reports what one engine step shows: an event fed in and the
// actions that came out.
func (t *telemetry) step(now engine.Instant, ev engine.Event, acts []engine.Action) {
	if t == nil {
		return
	}
	switch ev := ev.(type) {
	case engine.Want:
		t.wants[ev.Name] = &wanted{campaign: ev.Campaign, start: now.Mono}
	case engine.Unwant:
		delete(t.wants, ev.Name)
	case engine.Notified:
		if ev.Name == "" {
			t.emit(Event{Kind: EventSubscribed})
			if t.log != nil {
				t.log.Debug("subscribed to the store's announcements")
			}
		} else {
			t.emit(Event{Kind: EventNotified, Name: ev.Name})
		}
	case engine.RenewDone:
		t.renewed(now.Mono-ev.SentAt.Mono, len(ev.Items), ev.Err)
	case engine.AcquireDone:
		t.acquireDone(now, ev)
	}
	var suspended, clone, newIdentity bool
	for _, a := range acts {
		switch a := a.(type) {
		case engine.Lost:
			suspended = suspended || a.Reason == engine.ReasonSuspended
			clone = clone || a.Reason == engine.ReasonSeqMismatch
		case engine.IdentityChanged:
			newIdentity = true
		case engine.AcquireFailed:
			// The acquisition is over (refused, failed for good, or busy:
			// the name is held or being acquired already).
			delete(t.wants, a.Name)
		}
	}
	if _, tick := ev.(engine.Tick); tick && newIdentity {
		// A late timer with nothing held yet: only the identity changed.
		suspended = true
	}
	if d, ok := ev.(engine.AcquireDone); ok && newIdentity && d.Held != nil && d.Held.Holder == d.Holder {
		clone = true
	}
	if suspended {
		t.emit(Event{Kind: EventSuspended})
		if t.log != nil {
			t.log.Warn("process suspension detected: every lease dropped and identity regenerated", slog.String("holder", t.identity(acts)))
		}
	}
	if clone {
		t.emit(Event{Kind: EventCloneDetected})
		if t.log != nil {
			t.log.Error("another copy of this process holds this identity (a restored snapshot or a fork), or an operator's `tenure release --force` moved the renewal chain on: every lease dropped and identity regenerated", slog.String("holder", t.identity(acts)))
		}
	}
}

// identity returns the new identity among acts.
func (t *telemetry) identity(acts []engine.Action) string {
	for _, a := range acts {
		if a, ok := a.(engine.IdentityChanged); ok {
			return a.Holder.String()
		}
	}
	return ""
}

// renewed reports one renewal round; the log says when renewals start or
// stop failing, not every failure.
func (t *telemetry) renewed(rtt time.Duration, batch int, err error) {
	t.emit(Event{Kind: EventRenewed, Duration: rtt, Batch: batch, Err: err})
	if t.log == nil || (err != nil) == t.renewFailing {
		return
	}
	t.renewFailing = err != nil
	if err != nil {
		t.log.Warn("renewal failed: the leases it carried are lost", slog.Int("leases", batch), slog.Any("err", err))
	} else {
		t.log.Info("renewals succeed again", slog.Int("leases", batch))
	}
}

func (t *telemetry) acquireDone(now engine.Instant, d engine.AcquireDone) {
	w := t.wants[d.Name]
	if d.Err == nil {
		if w != nil && d.Held != nil {
			t.recovered(d.Name, w)
		}
		return
	}
	t.emit(Event{Kind: EventAcquireFailed, Name: d.Name, Campaign: w != nil && w.campaign, Err: d.Err})
	if w == nil || !w.campaign || d.Permanent || t.log == nil {
		return
	}
	w.failures++
	switch {
	case w.failures == 1:
		t.log.Warn("store unreachable while campaigning; retrying with backoff", slog.String("lease", d.Name), slog.Any("err", d.Err))
	case now.Mono-w.logged >= unreachableEvery:
		t.log.Warn("store still unreachable while campaigning; retrying with backoff", slog.String("lease", d.Name), slog.Int("failures", w.failures), slog.Any("err", d.Err))
	default:
		return
	}
	w.logged = now.Mono
}

// recovered logs that a campaign that could not reach the store got an
// answer again.
func (t *telemetry) recovered(name string, w *wanted) {
	if w.failures > 0 && t.log != nil {
		t.log.Info("store reachable again", slog.String("lease", name), slog.Int("failures", w.failures))
	}
	w.failures = 0
}

// String renders the transition for people: "billing: acquired with token
// 7 by worker/…" or "billing: lost token 7: superseded".
func (tr Transition) String() string {
	switch tr.Kind {
	case TransitionAcquired:
		return fmt.Sprintf("%s: acquired with token %d by %s", tr.Name, tr.Token, tr.Holder)
	case TransitionLost:
		return fmt.Sprintf("%s: lost token %d (%s): %s", tr.Name, tr.Token, tr.Holder, tr.Reason)
	}
	return fmt.Sprintf("%s: %s token %d", tr.Name, tr.Kind, tr.Token)
}

// LogValue renders the transition for [log/slog] with the keys the client
// logs by: lease, token, holder, and for a loss reason and err.
func (tr Transition) LogValue() slog.Value {
	attrs := []slog.Attr{
		slog.String("lease", tr.Name),
		slog.String("kind", tr.Kind.String()),
		slog.Int64("token", int64(tr.Token)),
		slog.String("holder", tr.Holder.String()),
	}
	if tr.Kind == TransitionLost {
		attrs = append(attrs, slog.String("reason", tr.Reason.String()))
		if le, ok := tr.Err.(*LostError); ok && le.Cause != nil {
			attrs = append(attrs, slog.Any("err", le.Cause))
		}
	}
	return slog.GroupValue(attrs...)
}
