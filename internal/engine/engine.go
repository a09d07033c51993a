package engine

import (
	"cmp"
	"container/heap"
	"errors"
	"math"
	"slices"
	"time"

	"github.com/tenure-dev/tenure/store"
)

// Config fixes the engine's timing and its sources of identity and jitter.
// The caller validates it; the engine trusts it.
type Config struct {
	Label            string
	TTL              time.Duration
	RenewInterval    time.Duration
	Grace            time.Duration
	SuspendTolerance time.Duration
	ProgressTimeout  time.Duration // zero: no progress gate
	Payload          string        // published with every tenure (store.AcquireParams.Payload)
	// NewInstance returns a fresh, never repeated instance id.
	NewInstance func() string
	// Jitter returns a uniformly random duration in [0, max).
	Jitter func(max time.Duration) time.Duration
}

// ErrTooLate reports a grant whose reply arrived after the local deadline it
// implied, or across a clock discontinuity: the engine released it unused.
var ErrTooLate = errors.New("grant arrived too late to be trusted; released it")

type phase int

const (
	idle phase = iota
	acquiring
	held
	// releasing: a release is in flight. Nothing else is sent for the name
	// until it is answered, so a new attempt never races the old release.
	releasing
)

type lease struct {
	name    string
	phase   phase
	removed bool

	// idle and acquiring
	want        bool // a Want is outstanding
	campaign    bool
	nextAttempt time.Duration
	failures    int
	reqHolder   store.Holder // identity the in-flight acquire was sent with
	position    int          // place in the store's line of followers (1: next); 0: none known
	// missed is the last announcement heard while an acquisition was in
	// flight, or nil: the refusal may predate it, so it is heard again
	// once the refusal is in.
	missed *store.Notice

	// held and releasing
	holder       store.Holder
	token        store.Token
	seq          int64
	anchor       Instant
	storeAt      time.Time // the store's clock when it granted or last renewed, if it says
	deadline     time.Duration
	renewDue     time.Duration
	renewing     bool // part of the batch in flight
	checking     bool // a check of who holds the lease is in flight
	recheck      bool // an announcement came while it was: check again after it
	lastProgress time.Duration
	chainWriting bool // a granted chain write has not ended yet
	chainWaiting int  // chain writes waiting for their turn

	idx    int           // the order it was added in
	wakeAt time.Duration // the wake time queued for it (never: none)
	ver    uint64        // bumped whenever wakeAt changes
}

// wakeEntry is a lease's wake time as queued; outdated once the lease's
// ver moved on.
type wakeEntry struct {
	at  time.Duration
	l   *lease
	ver uint64
}

// wakeHeap orders wake entries, earliest first.
type wakeHeap []wakeEntry

func (h wakeHeap) Len() int           { return len(h) }
func (h wakeHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h wakeHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *wakeHeap) Push(x any)        { *h = append(*h, x.(wakeEntry)) }
func (h *wakeHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	old[len(old)-1] = wakeEntry{}
	*h = old[:len(old)-1]
	return x
}

// Engine is the lease state machine. It is not safe for concurrent use: one
// goroutine (or one simulated process) owns it.
type Engine struct {
	cfg    Config
	holder store.Holder

	leases  map[string]*lease
	order   []*lease // insertion order, so every Step is deterministic
	removed int

	renewInFlight bool
	out           []Action
	// dropped holds the names the current step stopped tracking; those
	// it did not track again are unfollowed when it ends.
	dropped []string

	// Next reads the earliest wake time off a heap, and check and
	// schedule walk the leases only when something is due, so that an
	// event costs O(log n) however many leases a process holds. The leases
	// an event changed (touched) get their wake time refreshed when it has
	// been handled; a change that concerns every lease (a renewal batch
	// sent or answered, a revoke) marks them all stale.
	wakes   wakeHeap
	stale   bool
	touched []*lease
	due     []*lease // popDue's answer, reused
	added   int      // leases ever added, for their idx
	last    Instant  // the instant of the previous Step
}

const (
	// never is the wake time of a lease that needs no tick.
	never = time.Duration(math.MaxInt64)
	// unqueued marks a lease whose wake time was taken off the heap.
	unqueued = time.Duration(math.MinInt64)
)

// New returns an engine with a fresh identity.
func New(cfg Config) *Engine {
	return &Engine{
		cfg:    cfg,
		holder: store.Holder{Label: cfg.Label, Instance: cfg.NewInstance()},
		leases: make(map[string]*lease),
	}
}

// Holder returns the identity the engine acquires with now.
func (e *Engine) Holder() store.Holder { return e.holder }

// Step applies one event at now and returns the actions to carry out, in
// order. The slice is the caller's.
func (e *Engine) Step(now Instant, ev Event) []Action {
	e.out = nil
	if t, ok := ev.(Tick); ok && t.Timer && now.Mono-t.Due > e.cfg.SuspendTolerance && e.active() {
		e.loseAll(ReasonSuspended, nil)
	}
	jumped := e.jumped(now)
	if _, ok := ev.(Progress); !ok {
		// Time is judged before the event: a reply that arrives after the
		// deadline must not revive what already expired. Progress is the
		// exception: it reports a past instant, and counts from then.
		e.check(now, jumped)
	}
	e.handle(now, ev)
	e.settle()
	e.check(now, jumped)
	e.schedule(now)
	e.compact()
	e.unfollow()
	e.last = now
	return e.out
}

// Tracks reports whether the engine tracks lease name: from the step that
// reported [Follow] for it to the step that reported [Unfollow].
func (e *Engine) Tracks(name string) bool { return e.leases[name] != nil }

// unfollow reports the names the step stopped tracking and did not track
// again.
func (e *Engine) unfollow() {
	for _, name := range e.dropped {
		if !e.Tracks(name) {
			e.emit(Unfollow{Name: name})
		}
	}
	clear(e.dropped)
	e.dropped = e.dropped[:0]
}

// Next returns the monotonic instant at which the engine wants a [Tick],
// and false when it needs none.
func (e *Engine) Next() (time.Duration, bool) {
	e.settle()
	for len(e.wakes) > 0 {
		if w := e.wakes[0]; w.ver == w.l.ver {
			return w.at, true
		}
		heap.Pop(&e.wakes)
	}
	return 0, false
}

// wake returns when l next needs the engine, or never.
func (e *Engine) wake(l *lease) time.Duration {
	switch {
	case l.removed:
	case l.phase == held:
		t := l.deadline
		if e.cfg.ProgressTimeout > 0 {
			t = min(t, l.lastProgress+e.cfg.ProgressTimeout)
		}
		if !e.renewInFlight && !l.chainWriting {
			t = min(t, l.renewDue)
		}
		return t
	case l.phase == idle && l.want:
		return l.nextAttempt
	}
	return never
}

// touch notes that the current event may change l's wake time.
func (e *Engine) touch(l *lease) {
	if !e.stale {
		e.touched = append(e.touched, l)
	}
}

// settle refreshes the wake times of the leases touched since the last
// call, or of every lease when they are stale.
func (e *Engine) settle() {
	if e.stale {
		e.stale = false
		if len(e.wakes) > 2*len(e.leases)+64 {
			// Mostly outdated entries: start afresh.
			e.wakes = e.wakes[:0]
			for _, l := range e.order {
				l.wakeAt = never
			}
		}
		for _, l := range e.order {
			e.refresh(l)
		}
	} else {
		for _, l := range e.touched {
			e.refresh(l)
		}
	}
	clear(e.touched)
	e.touched = e.touched[:0]
}

// refresh queues l's wake time when it changed; the entry it had is
// outdated then (ver), and dropped when it reaches the top.
func (e *Engine) refresh(l *lease) {
	w := e.wake(l)
	if w == l.wakeAt {
		return
	}
	l.wakeAt = w
	l.ver++
	if w != never {
		heap.Push(&e.wakes, wakeEntry{at: w, l: l, ver: l.ver})
	}
}

// popDue takes off the heap the leases whose wake time has come, in the
// order they were added. They count as touched: their next wake time is
// queued when the step has dealt with them.
func (e *Engine) popDue(now Instant) []*lease {
	e.settle()
	e.due = e.due[:0]
	for len(e.wakes) > 0 && e.wakes[0].at <= now.Mono {
		w := heap.Pop(&e.wakes).(wakeEntry)
		if w.ver != w.l.ver {
			continue
		}
		w.l.wakeAt = unqueued
		e.touch(w.l)
		e.due = append(e.due, w.l)
	}
	slices.SortFunc(e.due, func(a, b *lease) int { return cmp.Compare(a.idx, b.idx) })
	return e.due
}

// jumped reports whether the wall clock moved apart from the monotonic
// clock since the previous step by more than a quarter of the suspension
// tolerance: then every held tenure's window is checked (check) whatever
// is due, as a pause can only have happened between two steps.
func (e *Engine) jumped(now Instant) bool {
	if e.last == (Instant{}) {
		return true
	}
	skew := time.Duration(now.Wall.UnixNano()-e.last.Wall.UnixNano()) - (now.Mono - e.last.Mono)
	return skew > e.cfg.SuspendTolerance/4 || skew < -e.cfg.SuspendTolerance/4
}

func (e *Engine) handle(now Instant, ev Event) {
	switch ev := ev.(type) {
	case Tick:
	case Want:
		e.want(now, ev)
	case Unwant:
		if l := e.lookup(ev.Name); l != nil && l.phase != held {
			l.want = false
			if l.phase == idle {
				e.remove(l)
			}
		}
	case ReleaseDone:
		if l := e.lookup(ev.Name); l != nil && l.phase == releasing && l.token == ev.Token {
			l.phase = idle
			if !l.want {
				e.remove(l)
			}
		}
	case AcquireDone:
		e.acquireDone(now, ev)
	case RenewDone:
		e.renewDone(now, ev)
	case Notified:
		if ev.Name == "" {
			e.stale = true
			for _, l := range e.order {
				e.heard(now, l, ev.Notice)
			}
		} else if l := e.lookup(ev.Name); l != nil {
			e.heard(now, l, ev.Notice)
		}
	case CheckDone:
		e.checked(ev)
	case Progress:
		if l := e.tenure(ev.Name, ev.Token); l != nil {
			l.lastProgress = max(l.lastProgress, ev.At.Mono)
		}
	case ChainWriteBegin:
		if l := e.tenure(ev.Name, ev.Token); l != nil {
			l.chainWaiting++
			e.grantChainWrite(now, l)
		}
	case ChainWriteEnd:
		if l := e.tenure(ev.Name, ev.Token); l != nil && l.chainWriting {
			l.chainWriting = false
			l.seq = max(l.seq, ev.Seq)
			e.grantChainWrite(now, l)
		}
	case Release:
		e.release(ev)
	case Drop:
		if l := e.tenure(ev.Name, ev.Token); l != nil {
			if ev.Reason == ReasonSuspended {
				e.loseAll(ReasonSuspended, nil)
			} else {
				e.lose(l, ev.Reason, nil)
			}
		}
	case Revoke:
		e.loseAll(ReasonRevoked, nil)
	case Adopt:
		e.adopt(now, ev)
	case Granted:
		e.grantedBy(now, ev)
	}
}

// grantedBy takes in a tenure acquired outside the engine (see [Granted])
// as the answer to a one-shot Want sent at ev.SentAt.
func (e *Engine) grantedBy(now Instant, ev Granted) {
	g := ev.Grant
	if l := e.lookup(g.Name); l != nil {
		e.emit(AcquireFailed{Name: g.Name, Busy: true})
		e.emit(SendRelease{Name: g.Name, Holder: ev.Holder, Token: g.Token})
		return
	}
	l := e.add(g.Name)
	l.want, l.phase, l.reqHolder = true, acquiring, ev.Holder
	e.acquireDone(now, AcquireDone{Name: g.Name, Holder: ev.Holder, SentAt: ev.SentAt, Grant: &g})
}

func (e *Engine) want(now Instant, ev Want) {
	l := e.lookup(ev.Name)
	if l != nil && (l.want || l.phase == acquiring || l.phase == held) {
		e.emit(AcquireFailed{Name: ev.Name, Busy: true})
		return
	}
	if l == nil {
		l = e.add(ev.Name)
	}
	l.want, l.campaign = true, ev.Campaign
	l.nextAttempt, l.failures = now.Mono, 0
}

func (e *Engine) adopt(now Instant, ev Adopt) {
	if l := e.lookup(ev.Name); l != nil {
		e.emit(AcquireFailed{Name: ev.Name, Busy: true})
		return
	}
	e.holder = ev.Holder
	e.emit(IdentityChanged{Holder: e.holder})
	l := e.add(ev.Name)
	l.phase, l.holder, l.token, l.seq = held, ev.Holder, ev.Token, ev.Seq
	l.anchor, l.deadline, l.renewDue, l.lastProgress = now, now.Mono+ev.Remaining, now.Mono, now.Mono
	e.emit(Acquired{Name: l.name, Holder: l.holder, Token: l.token, Seq: l.seq, Anchor: l.anchor, Deadline: l.deadline})
}

func (e *Engine) acquireDone(now Instant, d AcquireDone) {
	l := e.lookup(d.Name)
	if l == nil || l.phase != acquiring || l.reqHolder != d.Holder {
		if d.Grant != nil {
			e.emit(SendRelease{Name: d.Name, Holder: d.Holder, Token: d.Grant.Token})
		}
		return
	}
	l.phase = idle
	missed := l.missed
	l.missed = nil
	switch {
	case d.Grant != nil:
		e.granted(now, l, d)
	case d.Held != nil:
		if d.Held.Holder == d.Holder {
			// The store says this identity holds the lease, but no grant
			// was seen: a lost reply or a clone. Neither may be trusted.
			e.regenerate()
		}
		if !l.campaign {
			e.emit(AcquireFailed{Name: l.name, Held: d.Held})
			e.remove(l)
			return
		}
		l.failures = 0
		l.position = d.Held.Position
		// The lease expires (or the hold for the next in line ends) by the
		// store's clock no later than its remaining time from now: try
		// then, not later.
		l.nextAttempt = now.Mono + d.Held.Remaining + e.behind(l)
		// An announcement heard meanwhile is heard now, unless it is of the
		// tenure that refused: the place and time the refusal gave count
		// that tenure already.
		if missed != nil && (missed.Kind != store.NoticeAcquired || missed.Holder != d.Held.Holder) {
			e.heard(now, l, *missed)
		}
	case d.Permanent:
		e.emit(AcquireFailed{Name: l.name, Err: d.Err})
		e.remove(l)
	default:
		e.failed(now, l, d.Err)
	}
}

func (e *Engine) granted(now Instant, l *lease, d AcquireDone) {
	g := *d.Grant
	if !l.want || d.Holder != e.holder {
		// Withdrawn while in flight, or granted to an identity retired
		// meanwhile: give it back, then try again if still wanted.
		l.nextAttempt = now.Mono
		e.giveBack(l.name, d.Holder, g.Token)
		return
	}
	deadline := e.deadline(now, d.SentAt, g.Remaining)
	if NewWindow(d.SentAt, deadline).Check(now, e.cfg.SuspendTolerance) != 0 {
		e.failed(now, l, ErrTooLate)
		e.giveBack(l.name, d.Holder, g.Token)
		return
	}
	l.phase, l.want = held, false
	l.holder, l.token, l.seq = d.Holder, g.Token, g.Seq
	l.anchor, l.deadline, l.storeAt = d.SentAt, deadline, g.At
	l.renewDue = d.SentAt.Mono + e.cfg.RenewInterval
	l.lastProgress = now.Mono
	e.emit(Acquired{Name: l.name, Holder: l.holder, Token: l.token, Seq: l.seq, Anchor: l.anchor, Deadline: l.deadline})
}

func (e *Engine) failed(now Instant, l *lease, err error) {
	if !l.campaign {
		e.emit(AcquireFailed{Name: l.name, Err: err})
		l.want = false
		e.remove(l)
		return
	}
	l.failures++
	l.nextAttempt = now.Mono + e.backoff(l.failures)
}

func (e *Engine) renewDone(now Instant, d RenewDone) {
	e.renewInFlight = false
	e.stale = true // every held lease's renewal counts again
	for i, it := range d.Items {
		l := e.tenure(it.Name, it.Token)
		if l == nil || !l.renewing {
			continue
		}
		l.renewing = false
		if d.Err != nil || i >= len(d.Results) {
			e.lose(l, ReasonRenewError, d.Err)
			continue
		}
		o := d.Results[i]
		switch {
		case o.Renewed && e.storeClockAhead(now, l, o.Grant.At):
			l.seq = o.Grant.Seq
			e.lose(l, ReasonStoreClockAhead, nil)
		case o.Renewed:
			l.seq = o.Grant.Seq
			l.anchor, l.storeAt = d.SentAt, o.Grant.At
			l.deadline = e.deadline(now, d.SentAt, o.Grant.Remaining)
			l.renewDue = d.SentAt.Mono + e.cfg.RenewInterval
			e.emit(Renewed{Name: l.name, Token: l.token, Seq: l.seq, Anchor: l.anchor, Deadline: l.deadline})
			e.grantChainWrite(now, l)
		case o.Grant.Holder == (store.Holder{}) || o.Grant.Remaining <= 0:
			e.lose(l, ReasonExpiredAtStore, nil)
		case o.Grant.Holder != l.holder || o.Grant.Token != l.token:
			e.lose(l, ReasonSuperseded, nil)
		default:
			// Same holder, same token, another seq: no renewal or chain
			// write of this client was in flight, so a clone moved it.
			e.loseAll(ReasonSeqMismatch, nil)
		}
	}
}

// storeClockAhead reports whether the store's wall clock ran ahead of this
// process's monotonic clock since l's last grant or renewal, by more than
// the suspension tolerance. The store read its clock after l.anchor was
// sent and before now, so an honest clock never advances more than
// now - l.anchor between the two readings. One that did has stepped
// forward (or runs fast): the store will expire the next lease early, while
// this holder's deadline assumes the store's seconds are its own.
func (e *Engine) storeClockAhead(now Instant, l *lease, at time.Time) bool {
	if at.IsZero() || l.storeAt.IsZero() {
		return false
	}
	return at.Sub(l.storeAt)-(now.Mono-l.anchor.Mono) > e.cfg.SuspendTolerance
}

// heard acts on the store's announcement n concerning l's lease (or that
// announcements may have been lost: n.Name is empty).
//
// A waiting campaign is ordered when the store keeps a line: the follower
// a release names as next tries at once, and the others stay away for the
// [store.Handoff] the store keeps the lease for it; a new tenure sends
// every follower back to waiting for its expiry, one place further up the
// line. A handover so costs the store the next follower's acquisition
// however many wait. A change that names no next follower (a woken MySQL
// follower, a Consul or etcd expiry) sends the first in line at once and
// the others after a small spread; without a line (or on the empty notice)
// every follower tries now, plus that spread.
//
// An announcement that arrives while the follower's acquisition is in
// flight is kept and heard when the refusal is in: the store may have
// refused before the release it announces.
//
// A held tenure asks the store who holds the lease now ([SendCheck]), so
// that a holder whose lease an operator released, or someone took over,
// learns of it within a round trip instead of at its next renewal; the
// announcement of its own grant needs no check. The check only reads: it
// does not move the renewal chain. One check is in flight at a time; an
// announcement heard meanwhile makes one more check once it is back, since
// the store may have answered it before what the announcement reports (an
// operator deleting the lease while a check of an earlier notice was on
// its way).
func (e *Engine) heard(now Instant, l *lease, n store.Notice) {
	switch {
	case l.removed:
	case l.phase == acquiring:
		l.missed = &n
	case l.phase == idle && l.want:
		switch {
		case n.Kind == store.NoticeChanged && n.Name != "" && l.position == 1:
			// The lease changed, and this follower is next in line: no
			// other follower of the line has cause to come first.
			l.nextAttempt = now.Mono
		case n.Name == "" || n.Kind == store.NoticeChanged:
			l.nextAttempt = min(l.nextAttempt, now.Mono+e.cfg.Jitter(e.spread()))
		case n.Kind == store.NoticeReleased && n.Next == e.holder:
			l.nextAttempt = now.Mono
		case n.Kind == store.NoticeReleased && n.Next != (store.Holder{}):
			l.nextAttempt = min(l.nextAttempt, now.Mono+store.Handoff+e.cfg.Jitter(e.spread()))
		case n.Kind == store.NoticeReleased:
			l.nextAttempt = min(l.nextAttempt, now.Mono+e.cfg.Jitter(e.spread()))
		case n.Kind == store.NoticeAcquired && n.Remaining > 0:
			if l.position > 1 {
				l.position--
			}
			l.nextAttempt = now.Mono + n.Remaining + e.behind(l)
		}
	case l.phase == held:
		switch {
		case n.Kind == store.NoticeAcquired && n.Holder == l.holder:
		case l.checking:
			l.recheck = true
		default:
			l.checking = true
			e.emit(SendCheck{Name: l.name, Holder: l.holder, Token: l.token})
		}
	}
}

// behind is how long after the lease's expiry a waiting campaign tries:
// the next in line at once, the others after the [store.Handoff] that
// lets the next one take it, and followers that know no line after a
// small spread, so that those told the same expiry do not arrive in one
// instant.
func (e *Engine) behind(l *lease) time.Duration {
	switch {
	case l.position == 1:
		return 0
	case l.position > 1:
		return store.Handoff + e.cfg.Jitter(e.spread())
	}
	return e.cfg.Jitter(e.spread())
}

// checked ends a held tenure that the store reports no longer held by it.
// A failed check proves nothing either way: the renewal chain decides.
func (e *Engine) checked(d CheckDone) {
	l := e.tenure(d.Name, d.Token)
	if l == nil {
		return
	}
	l.checking = false
	switch {
	case d.Err != nil:
	case d.Record.State != store.StateHeld:
		e.lose(l, ReasonExpiredAtStore, nil)
		return
	case d.Record.Holder != l.holder || d.Record.Token != l.token:
		e.lose(l, ReasonSuperseded, nil)
		return
	}
	if l.recheck {
		l.recheck = false
		l.checking = true
		e.emit(SendCheck{Name: l.name, Holder: l.holder, Token: l.token})
	}
}

// grantChainWrite lets the next chain write waiting for l start, with the
// seq the previous one committed, when none is in flight and no renewal is
// in flight or due: chain writes of a tenure go one at a time, each behind
// the last, so two of them never present the same seq (the second would
// find the chain moved, as a clone's write would).
func (e *Engine) grantChainWrite(now Instant, l *lease) {
	if l.chainWaiting == 0 || l.chainWriting || l.renewing || l.renewDue <= now.Mono {
		return
	}
	l.chainWaiting--
	l.chainWriting = true
	e.emit(ChainWriteGranted{Name: l.name, Token: l.token, Seq: l.seq})
}

// check ends every held tenure whose time is up, and every one whose
// window shows a pause when the clocks jumped apart.
func (e *Engine) check(now Instant, jumped bool) {
	leases := e.order
	if !jumped {
		leases = e.popDue(now)
	}
	for _, l := range leases {
		if l.removed || l.phase != held {
			continue
		}
		switch NewWindow(l.anchor, l.deadline).Check(now, e.cfg.SuspendTolerance) {
		case ReasonSuspended:
			e.loseAll(ReasonSuspended, nil)
			return
		case ReasonExpiredLocally:
			e.lose(l, ReasonExpiredLocally, nil)
		}
		switch {
		case l.phase != held:
		case e.cfg.ProgressTimeout > 0 && now.Mono-l.lastProgress >= e.cfg.ProgressTimeout:
			e.lose(l, ReasonProgressStalled, nil)
		}
	}
}

// schedule sends what is due: acquisitions, and one renewal batch.
func (e *Engine) schedule(now Instant) {
	var batch []store.RenewParams
	var earliest time.Duration
	due := false
	for _, l := range e.popDue(now) {
		switch {
		case l.removed:
		case l.phase == idle && l.want && l.nextAttempt <= now.Mono:
			e.touch(l)
			l.phase, l.reqHolder = acquiring, e.holder
			e.emit(SendAcquire{Name: l.name, Holder: l.reqHolder, TTL: e.cfg.TTL, Payload: e.cfg.Payload, Wait: l.campaign, SentAt: now})
		case l.phase == held && !e.renewInFlight && !l.chainWriting:
			due = due || l.renewDue <= now.Mono
		}
	}
	if !due {
		return
	}
	// Renew every lease due within half an interval along with the one that
	// is due now, so that the leases of one process converge on one batch.
	horizon := now.Mono + e.cfg.RenewInterval/2
	for _, l := range e.order {
		if l.removed || l.phase != held || l.chainWriting || l.renewDue > horizon {
			continue
		}
		l.renewing = true
		if len(batch) == 0 || l.deadline < earliest {
			earliest = l.deadline
		}
		batch = append(batch, store.RenewParams{Name: l.name, Holder: l.holder, Token: l.token, Seq: l.seq, TTL: e.cfg.TTL})
	}
	e.renewInFlight = true
	e.stale = true // no held lease's renewal counts until the answer
	e.emit(SendRenew{Items: batch, SentAt: now, Deadline: earliest})
}

// lose ends a held tenure. It does not release the lease at the store:
// the work under the tenure may still be stopping (for up to the grace),
// and nobody else may hold the lease before it has. Its owner releases it
// once the work has stopped (Lease.Release, Client.Do, the CLI after the
// command died); otherwise it expires by its TTL.
func (e *Engine) lose(l *lease, r Reason, err error) {
	e.touch(l)
	e.emit(Lost{Name: l.name, Token: l.token, Reason: r, Err: err})
	l.phase, l.renewing, l.want = idle, false, false
	e.remove(l)
}

// release ends the tenure ev names, if it is still held, and gives it back
// at the store. A tenure that ended earlier (lost, not released) is given
// back too: its owner releases it once the work under it has stopped.
func (e *Engine) release(ev Release) {
	if l := e.tenure(ev.Name, ev.Token); l != nil {
		e.lose(l, ReasonReleased, nil)
	}
	e.giveBack(ev.Name, ev.Holder, ev.Token)
}

// giveBack releases a tenure of name at the store. While the release is in
// flight no new attempt for the name is sent, so that an attempt never races
// the release of an earlier tenure; a release of the same tenure already in
// flight answers for this one. When the name is being acquired or held again
// under a newer tenure, the old one cannot hold the lease any more and the
// release is only sent to make sure of that.
func (e *Engine) giveBack(name string, h store.Holder, token store.Token) {
	l := e.lookup(name)
	switch {
	case l == nil:
		l = e.add(name)
	case l.phase == releasing && l.token == token:
		return
	case l.phase != idle:
		e.emit(SendRelease{Name: name, Holder: h, Token: token})
		return
	}
	l.phase, l.holder, l.token = releasing, h, token
	e.emit(SendRelease{Name: name, Holder: h, Token: token})
}

// loseAll ends every held tenure and regenerates the identity: what ended
// them (a clone, a suspension, a revoke) concerns the whole process. None
// is released: a process that was cloned or restored cannot know whether
// it is the copy that still does the work, so the leases expire by their
// TTL unless the copy at the head of the renewal chain releases them.
func (e *Engine) loseAll(r Reason, err error) {
	e.stale = true
	for _, l := range e.order {
		if !l.removed && l.phase == held {
			e.lose(l, r, err)
		}
	}
	e.regenerate()
}

// active reports whether any lease is held or being acquired.
func (e *Engine) active() bool {
	for _, l := range e.order {
		if !l.removed && l.phase != idle {
			return true
		}
	}
	return false
}

func (e *Engine) regenerate() {
	e.holder.Instance = e.cfg.NewInstance()
	e.emit(IdentityChanged{Holder: e.holder})
}

// tenure returns the held lease name with token, or nil.
func (e *Engine) tenure(name string, token store.Token) *lease {
	if l := e.lookup(name); l != nil && l.phase == held && l.token == token {
		return l
	}
	return nil
}

// lookup returns the lease name, or nil, and notes that the current event
// may change it.
func (e *Engine) lookup(name string) *lease {
	l := e.leases[name]
	if l != nil {
		e.touch(l)
	}
	return l
}

// add starts tracking a lease name, and follows it before anything is
// sent for it.
func (e *Engine) add(name string) *lease {
	e.added++
	l := &lease{name: name, idx: e.added, wakeAt: never}
	e.leases[name] = l
	e.order = append(e.order, l)
	e.touch(l)
	e.emit(Follow{Name: name})
	return l
}

// deadline is the local deadline implied by a grant of remaining, seen
// succeed for a request sent at sent: the store's expiry as the monotonic
// clock can vouch for it, less a margin for round trips and clock rate,
// less the grace the work needs to stop.
func (e *Engine) deadline(now, sent Instant, remaining time.Duration) time.Duration {
	margin := max(e.cfg.TTL/10, 2*(now.Mono-sent.Mono))
	return sent.Mono + remaining - margin - e.cfg.Grace
}

// spread is the widest jitter a follower adds to a retry it was told to
// make (at an expiry, on an announcement): TTL/100, at most 10 ms. Wide
// enough that followers told at once do not arrive in one instant, narrow
// enough that a handover or a failover is not slowed by it.
func (e *Engine) spread() time.Duration { return min(e.cfg.TTL/100, maxSpread) }

const maxSpread = 10 * time.Millisecond

// backoff is the wait before retry n after errors: exponential from an
// eighth of the renew interval up to the interval itself, half of it jitter.
func (e *Engine) backoff(n int) time.Duration {
	d := e.cfg.RenewInterval / 8
	for i := 1; i < n && d < e.cfg.RenewInterval; i++ {
		d *= 2
	}
	d = min(d, e.cfg.RenewInterval)
	return d/2 + e.cfg.Jitter(d/2)
}

func (e *Engine) emit(a Action) { e.out = append(e.out, a) }

func (e *Engine) remove(l *lease) {
	if l.removed {
		return
	}
	l.removed = true
	delete(e.leases, l.name)
	e.removed++
	e.dropped = append(e.dropped, l.name)
}

func (e *Engine) compact() {
	if e.removed == 0 || e.removed < len(e.order)/2 {
		return
	}
	kept := e.order[:0]
	for _, l := range e.order {
		if !l.removed {
			kept = append(kept, l)
		}
	}
	clear(e.order[len(kept):])
	e.order, e.removed = kept, 0
}

// Clone returns a copy of the engine with its identity, tenures, seqs and
// deadlines, as a snapshot restored twice would produce, drawing new
// identities and jitter from cfg's functions. Requests in flight are not
// part of the copy: the caller must answer them for the clone too (a
// restored process finds its connections reset). The simulation uses it.
func (e *Engine) Clone(newInstance func() string, jitter func(time.Duration) time.Duration) *Engine {
	c := &Engine{
		cfg:           e.cfg,
		holder:        e.holder,
		leases:        make(map[string]*lease, len(e.leases)),
		renewInFlight: e.renewInFlight,
		stale:         true,
		last:          e.last,
		added:         e.added,
	}
	c.cfg.NewInstance, c.cfg.Jitter = newInstance, jitter
	for _, l := range e.order {
		if l.removed {
			continue
		}
		cp := *l
		cp.wakeAt, cp.ver = never, 0
		c.leases[cp.name] = &cp
		c.order = append(c.order, &cp)
	}
	return c
}
