package tenure

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tenure-dev/tenure/internal/drive"
	"github.com/tenure-dev/tenure/internal/engine"
	"github.com/tenure-dev/tenure/store"
)

// Run drives the client's lease loop until ctx is done: it sends
// acquisitions and renewals, keeps local deadlines, and reports
// transitions. On return every tenure has ended (with [LossClosed]) and been
// released at the store, best effort, and every goroutine Run started has
// exited. Run returns nil after ctx is done; a client runs once.
//
// Run does not wait for the work under its tenures: it releases them as
// soon as ctx is done, and a next holder may start at once. Cancel Run's
// ctx only after that work has stopped ([Client.Do] returned), or let the
// work watch [Lease.Done] and stop first.
func (c *Client) Run(ctx context.Context) error {
	if !c.started.CompareAndSwap(false, true) {
		return errors.New("tenure: Client.Run called twice; a Client runs once, make a new one")
	}
	r := &runner{
		c:        c,
		ctx:      ctx,
		replies:  make(chan engine.Event),
		leases:   make(map[string]*Lease),
		waiters:  make(map[string]chan acquireResult),
		releases: make(map[tenureKey][]chan error),
		fed:      make(map[*Lease]time.Duration),
		obs:      newObserver(c.cfg.OnTransition),
		tel:      newTelemetry(c),
	}
	r.batcher, _ = c.store.(store.BatchAcquirer)
	r.wg.Go(r.obs.run)
	if n, ok := c.store.(store.Notifier); ok {
		r.sub = store.Subscribe(n)
		r.wg.Go(func() {
			_ = r.sub.Listen(ctx, func(n store.Notice) { c.enqueue(request{event: engine.Notified{Notice: n}}) })
		})
	}
	r.loop()
	r.shutdown()
	return nil
}

// runner is the state of one Run: everything here belongs to the loop
// goroutine, except what the store calls and the observer touch through
// channels.
type runner struct {
	c        *Client
	ctx      context.Context
	wg       sync.WaitGroup
	replies  chan engine.Event
	inflight int // store calls whose answer has not been received
	closing  bool
	// gathered holds the releases of a shutdown until they go to the
	// store together; nil when releases go out one by one.
	gathered *[]engine.SendRelease
	// batcher is the store's batch acquisition, if it has one; acquires
	// holds the attempts the engine asked for that have not gone to the
	// store yet (see sendAcquires).
	batcher        store.BatchAcquirer
	acquires       []engine.SendAcquire
	acquireFlights atomic.Int32 // acquisition round trips out; the loop adds, their goroutines subtract
	// sub hears the store's announcements of the names the engine
	// follows, so that the loop is not woken for the others; nil when the
	// store announces nothing.
	sub store.Subscription

	leases   map[string]*Lease             // the current tenure per name
	waiters  map[string]chan acquireResult // Acquire and Campaign calls awaiting an answer
	releases map[tenureKey][]chan error    // Lease.Release calls awaiting the store's answer
	fed      map[*Lease]time.Duration      // last progress reading fed to the engine
	obs      *observer
	tel      *telemetry // nil: no Observer, no Logger
}

// tenureKey names one tenure.
type tenureKey struct {
	name  string
	token Token
}

func (r *runner) loop() {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		r.drainInbox()
		r.sendAcquires()
		due, armed := r.c.eng.Next()
		if armed {
			_, mono := r.c.cfg.Clock.Now()
			timer.Reset(max(due-mono, 0))
		} else {
			timer.Stop()
		}
		select {
		case <-r.ctx.Done():
			return
		case <-r.c.wake:
		case ev := <-r.replies:
			// Requests made before this reply arrived are seen first, so
			// the engine sees events in the order they happened.
			r.drainInbox()
			r.reply(ev)
		case <-timer.C:
			if armed {
				r.feedProgress()
				r.step(engine.Tick{Timer: true, Due: due})
			}
		}
	}
}

func (r *runner) drainInbox() {
	r.c.mu.Lock()
	inbox := r.c.inbox
	r.c.inbox = nil
	r.c.mu.Unlock()
	for _, q := range inbox {
		switch ev := q.event.(type) {
		case engine.Want, engine.Adopt:
			name := wantedName(ev)
			if _, busy := r.waiters[name]; busy {
				q.reply <- acquireResult{err: r.acquireError(engine.AcquireFailed{Name: name, Busy: true})}
				continue
			}
			r.waiters[name] = q.reply
		case engine.Unwant:
			if w, ok := r.waiters[ev.Name]; ok && w == q.reply {
				delete(r.waiters, ev.Name)
				w <- acquireResult{err: context.Canceled}
			}
		case engine.ChainWriteBegin:
			l := r.tenure(ev.Name, ev.Token)
			if l == nil {
				q.chain <- chainGrant{err: fmt.Errorf("%w: lease %q with token %d is no longer held", ErrLost, ev.Name, ev.Token)}
				continue
			}
			l.chainWaiters = append(l.chainWaiters, q.chain)
		case engine.Release:
			k := tenureKey{ev.Name, ev.Token}
			r.releases[k] = append(r.releases[k], q.released)
		}
		r.step(q.event)
	}
}

func wantedName(ev engine.Event) string {
	if a, ok := ev.(engine.Adopt); ok {
		return a.Name
	}
	return ev.(engine.Want).Name
}

// feedProgress tells the engine of Progress calls since the last tick. It
// runs just before each timer tick: only then can a stall be declared.
func (r *runner) feedProgress() {
	if r.c.cfg.ProgressTimeout <= 0 {
		return
	}
	for _, l := range r.leases {
		if at := time.Duration(l.progress.Load()); at > r.fed[l] {
			r.fed[l] = at
			r.step(engine.Progress{Name: l.name, Token: l.token, At: engine.Instant{Mono: at}})
		}
	}
}

func (r *runner) now() engine.Instant {
	wall, mono := r.c.cfg.Clock.Now()
	return engine.Instant{Mono: mono, Wall: wall}
}

func (r *runner) step(ev engine.Event) {
	now := r.now()
	acts := r.c.eng.Step(now, ev)
	for _, a := range acts {
		r.do(a)
	}
	r.tel.step(now, ev, acts)
}

// reply feeds the engine a store call's answer, and hands a release's
// answer to those waiting for it.
func (r *runner) reply(ev engine.Event) {
	r.inflight--
	if d, ok := ev.(engine.ReleaseDone); ok {
		k := tenureKey{d.Name, d.Token}
		for _, w := range r.releases[k] {
			w <- d.Err
		}
		delete(r.releases, k)
	}
	r.step(ev)
}

func (r *runner) do(a engine.Action) {
	switch a := a.(type) {
	case engine.SendRelease:
		if r.gathered != nil {
			*r.gathered = append(*r.gathered, a)
			return
		}
		r.call(a)
	case engine.SendAcquire:
		if r.batcher != nil {
			r.acquires = append(r.acquires, a)
			return
		}
		r.call(a)
	case engine.SendRenew, engine.SendCheck:
		r.call(a)
	case engine.Acquired:
		r.acquired(a)
	case engine.Renewed:
		if l := r.tenure(a.Name, a.Token); l != nil {
			l.seq.Store(max(l.seq.Load(), a.Seq))
			w := engine.NewWindow(a.Anchor, a.Deadline)
			l.trust.Store(&w)
		}
	case engine.Lost:
		r.lost(a)
	case engine.ChainWriteGranted:
		if l := r.tenure(a.Name, a.Token); l != nil && len(l.chainWaiters) > 0 {
			l.chainWaiters[0] <- chainGrant{seq: a.Seq}
			l.chainWaiters = l.chainWaiters[1:]
		}
	case engine.AcquireFailed:
		r.answer(a.Name, acquireResult{err: r.acquireError(a)})
	case engine.IdentityChanged:
		h := a.Holder
		r.c.id.Store(&h)
	case engine.Follow:
		if r.sub != nil {
			r.sub.Follow(a.Name)
		}
	case engine.Unfollow:
		// A step's actions may be carried out after those of a step they
		// caused (acquired gives back a grant nobody waits for), which may
		// have tracked the name again.
		if r.sub != nil && !r.c.eng.Tracks(a.Name) {
			r.sub.Unfollow(a.Name)
		}
	}
}

// call carries out a store action off the loop, bounded by its timeout,
// and feeds the answer back in. A release is not cut short by ctx: it is
// the last call a tenure makes, and shutdown waits for it.
func (r *runner) call(a engine.Action) {
	_, mono := r.c.cfg.Clock.Now()
	timeout := drive.Timeout(a, mono, r.c.cfg.RenewInterval)
	parent := r.ctx
	if _, ok := a.(engine.SendRelease); ok {
		parent = context.WithoutCancel(parent)
		timeout = min(timeout, maxReleaseWait)
	}
	r.inflight++
	r.wg.Go(func() {
		ctx, cancel := context.WithTimeout(parent, timeout)
		ev := drive.Call(ctx, r.c.store, a)
		cancel()
		r.replies <- ev
	})
}

// sendAcquires sends the attempts gathered since the loop last looked,
// group-commit style: while fewer than maxAcquireFlights acquisition round
// trips are out, a lone attempt goes at once and several go together;
// attempts made while that many are out wait for one to come back and then
// go together, up to maxAcquireBatch to a round trip. So one Acquire call
// pays no wait, and thousands made at once (or campaigns retrying at one
// expiry) take a few round trips each of many leases rather than one each.
// An attempt's trust window starts when the engine asked for it, so the
// wait only shortens it (promise P3).
func (r *runner) sendAcquires() {
	for len(r.acquires) > 0 && r.acquireFlights.Load() < maxAcquireFlights {
		n := min(len(r.acquires), maxAcquireBatch)
		r.flyAcquires(r.acquires[:n:n])
		r.acquires = r.acquires[n:]
	}
	if len(r.acquires) == 0 {
		r.acquires = nil
	}
}

// Group commit of acquisitions (see sendAcquires).
const (
	maxAcquireFlights = 2
	maxAcquireBatch   = 1000
)

func (r *runner) flyAcquires(as []engine.SendAcquire) {
	_, mono := r.c.cfg.Clock.Now()
	timeout := drive.Timeout(as[0], mono, r.c.cfg.RenewInterval)
	r.inflight += len(as)
	r.acquireFlights.Add(1)
	r.wg.Go(func() {
		ctx, cancel := context.WithTimeout(r.ctx, timeout)
		var evs []engine.Event
		if len(as) == 1 {
			evs = []engine.Event{drive.Call(ctx, r.c.store, as[0])}
		} else {
			evs = drive.AcquireBatch(ctx, r.batcher, as)
		}
		cancel()
		r.acquireFlights.Add(-1) // before the answers: the loop looks again when it takes the first
		for _, ev := range evs {
			r.replies <- ev
		}
	})
}

// releaseAll carries out the releases of a shutdown: in batches, one
// round trip each, when the store releases in batches, else one call each.
func (r *runner) releaseAll(as []engine.SendRelease) {
	br, ok := r.c.store.(store.BatchReleaser)
	if !ok || len(as) < 2 {
		for _, a := range as {
			r.call(a)
		}
		return
	}
	r.inflight += len(as)
	r.wg.Go(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), maxReleaseWait)
		defer cancel()
		for _, ev := range drive.ReleaseBatch(ctx, br, as) {
			r.replies <- ev
		}
	})
}

// maxReleaseWait bounds a release at the store: a store that does not
// answer by then lets the lease expire by its TTL instead.
const maxReleaseWait = 5 * time.Second

func (r *runner) acquired(a engine.Acquired) {
	l := &Lease{
		client: r.c,
		name:   a.Name,
		holder: a.Holder,
		token:  a.Token,
		done:   make(chan struct{}),
	}
	l.seq.Store(a.Seq)
	w := engine.NewWindow(a.Anchor, a.Deadline)
	l.trust.Store(&w)
	l.progress.Store(int64(a.Anchor.Mono))
	r.leases[a.Name] = l
	tr := Transition{Name: l.name, Kind: TransitionAcquired, Holder: l.holder, Token: l.token, At: time.Now()}
	r.obs.push(tr)
	r.tel.transition(tr)
	if !r.answer(a.Name, acquireResult{lease: l}) {
		// Nobody is waiting any more: give it back.
		l.ended.Store(true)
		r.step(engine.Release{Name: a.Name, Holder: a.Holder, Token: a.Token})
	}
}

func (r *runner) lost(a engine.Lost) {
	l := r.tenure(a.Name, a.Token)
	if l == nil {
		return
	}
	delete(r.leases, a.Name)
	delete(r.fed, l)
	reason := lossReasons[a.Reason]
	if r.closing {
		reason = LossClosed
	}
	err := &LostError{Name: l.name, Token: l.token, Reason: reason, Cause: a.Err}
	for _, w := range l.chainWaiters {
		w <- chainGrant{err: err}
	}
	l.chainWaiters = nil
	l.end(err)
	tr := Transition{Name: l.name, Kind: TransitionLost, Holder: l.holder, Token: l.token, Reason: reason, Err: err, At: time.Now()}
	r.obs.push(tr)
	r.tel.transition(tr)
}

func (r *runner) answer(name string, res acquireResult) bool {
	w, ok := r.waiters[name]
	if ok {
		delete(r.waiters, name)
		w <- res
	}
	return ok
}

func (r *runner) acquireError(a engine.AcquireFailed) error {
	switch {
	case a.Busy:
		return fmt.Errorf("%w: lease %q is already held or being acquired by this client", ErrHeld, a.Name)
	case a.Held != nil:
		return a.Held
	}
	return a.Err
}

func (r *runner) tenure(name string, token Token) *Lease {
	if l := r.leases[name]; l != nil && l.token == token {
		return l
	}
	return nil
}

// shutdown ends and releases every tenure, answers every waiter, and waits
// for every store call still out (acquisitions and renewals fail at once:
// ctx is done) and every goroutine Run started.
func (r *runner) shutdown() {
	r.closing = true
	r.drainInbox()
	for name := range r.waiters {
		r.answer(name, acquireResult{err: fmt.Errorf("%w: the client's Run has returned", ErrClosed)})
		r.step(engine.Unwant{Name: name})
	}
	var releases []engine.SendRelease
	r.gathered = &releases
	for _, l := range r.leases {
		r.step(engine.Release{Name: l.name, Holder: l.holder, Token: l.token})
	}
	r.gathered = nil
	r.releaseAll(releases)
	for r.inflight > 0 {
		r.reply(<-r.replies)
	}
	close(r.c.stopped)
	r.obs.close()
	r.wg.Wait()
}
