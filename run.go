package tenure

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/tenure-dev/tenure/internal/engine"
)

// Run drives the client's lease loop until ctx is done: it sends
// acquisitions and renewals, keeps local deadlines, and reports
// transitions. On return every tenure has ended (with [LossClosed]) and been
// released at the store, best effort, and every goroutine Run started has
// exited. Run returns nil after ctx is done; a client runs once.
func (c *Client) Run(ctx context.Context) error {
	if !c.started.CompareAndSwap(false, true) {
		return errors.New("tenure: Client.Run called twice; a Client runs once, make a new one")
	}
	r := &runner{
		c:       c,
		ctx:     ctx,
		replies: make(chan engine.Event),
		quit:    make(chan struct{}),
		leases:  make(map[string]*Lease),
		waiters: make(map[string]chan acquireResult),
		fed:     make(map[*Lease]int64),
		obs:     newObserver(c.cfg.OnTransition),
	}
	r.wg.Go(r.obs.run)
	if n, ok := c.store.(Notifier); ok {
		r.wg.Go(func() {
			_ = n.Listen(ctx, func(name string) { c.enqueue(request{event: engine.Notified{Name: name}}) })
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
	c       *Client
	ctx     context.Context
	wg      sync.WaitGroup
	replies chan engine.Event
	quit    chan struct{}
	closing bool

	leases  map[string]*Lease             // the current tenure per name
	waiters map[string]chan acquireResult // Acquire and Campaign calls awaiting an answer
	fed     map[*Lease]int64              // last progress reading fed to the engine
	obs     *observer
}

func (r *runner) loop() {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		r.drainInbox()
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
			r.step(ev)
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
		if at := l.progress.Load(); at > r.fed[l] {
			r.fed[l] = at
			r.step(engine.Progress{Name: l.name, Token: int64(l.token), At: engine.Instant{Mono: time.Duration(at)}})
		}
	}
}

func (r *runner) now() engine.Instant {
	wall, mono := r.c.cfg.Clock.Now()
	return engine.Instant{Mono: mono, Wall: wall}
}

func (r *runner) step(ev engine.Event) {
	for _, a := range r.c.eng.Step(r.now(), ev) {
		r.do(a)
	}
}

func (r *runner) do(a engine.Action) {
	switch a := a.(type) {
	case engine.SendAcquire:
		r.call(func(ctx context.Context) engine.Event { return r.acquire(ctx, a) }, r.c.cfg.RenewInterval)
	case engine.SendRenew:
		_, mono := r.c.cfg.Clock.Now()
		r.call(func(ctx context.Context) engine.Event { return r.renew(ctx, a) }, a.Deadline-mono)
	case engine.SendRelease:
		p := ReleaseParams{Name: a.Name, Holder: fromEngine(a.Holder), Token: Token(a.Token)}
		r.call(func(ctx context.Context) engine.Event {
			_ = r.c.store.Release(ctx, p) // best effort: expiry covers a failure
			return engine.ReleaseDone{Name: a.Name, Token: a.Token}
		}, r.c.cfg.RenewInterval)
	case engine.Acquired:
		r.acquired(a)
	case engine.Renewed:
		if l := r.tenure(a.Name, a.Token); l != nil {
			l.seq.Store(max(l.seq.Load(), a.Seq))
			l.trust.Store(&engine.Window{Anchor: a.Anchor, Deadline: a.Deadline})
		}
	case engine.Lost:
		r.lost(a)
	case engine.ChainWritesGranted:
		if l := r.tenure(a.Name, a.Token); l != nil {
			for _, w := range l.chainWaiters {
				w <- chainGrant{seq: a.Seq}
			}
			l.chainWaiters = nil
		}
	case engine.AcquireFailed:
		r.answer(a.Name, acquireResult{err: r.acquireError(a)})
	case engine.IdentityChanged:
		h := fromEngine(a.Holder)
		r.c.id.Store(&h)
	}
}

// call runs a store call off the loop, bounded by timeout, and feeds its
// answer back in.
func (r *runner) call(f func(ctx context.Context) engine.Event, timeout time.Duration) {
	r.wg.Go(func() {
		ctx, cancel := context.WithTimeout(r.ctx, max(timeout, time.Millisecond))
		ev := f(ctx)
		cancel()
		select {
		case r.replies <- ev:
		case <-r.quit:
		}
	})
}

func (r *runner) acquire(ctx context.Context, a engine.SendAcquire) engine.Event {
	d := engine.AcquireDone{Name: a.Name, Holder: a.Holder, SentAt: a.SentAt}
	g, err := r.c.store.Acquire(ctx, AcquireParams{Name: a.Name, Holder: fromEngine(a.Holder), TTL: a.TTL})
	var held *HeldError
	switch {
	case err == nil:
		d.Grant = &engine.Grant{Holder: a.Holder, Token: int64(g.Token), Seq: g.Seq, Remaining: g.Remaining}
	case errors.As(err, &held):
		d.Held = &engine.Grant{Holder: toEngine(held.Holder), Token: int64(held.Token), Seq: held.Seq, Remaining: held.Remaining}
	default:
		d.Err = err
		d.Permanent = errors.Is(err, ErrInvalid) || errors.Is(err, ErrNotMigrated) || errors.Is(err, ErrClosed)
	}
	return d
}

func (r *runner) renew(ctx context.Context, a engine.SendRenew) engine.Event {
	d := engine.RenewDone{SentAt: a.SentAt, Items: a.Items}
	ps := make([]RenewParams, len(a.Items))
	for i, it := range a.Items {
		ps[i] = RenewParams{Name: it.Name, Holder: fromEngine(it.Holder), Token: Token(it.Token), Seq: it.Seq, TTL: a.TTL}
	}
	for len(ps) > 0 {
		n := min(len(ps), MaxRenewBatch)
		res, err := r.c.store.Renew(ctx, ps[:n])
		if err == nil && len(res) != n {
			err = fmt.Errorf("%w: store answered %d results for %d renewals", ErrUnavailable, len(res), n)
		}
		if err != nil {
			d.Err = err
			return d
		}
		for _, o := range res {
			d.Outcomes = append(d.Outcomes, engine.RenewOutcome{Renewed: o.Renewed, Grant: engine.Grant{
				Holder: toEngine(o.Grant.Holder), Token: int64(o.Grant.Token), Seq: o.Grant.Seq, Remaining: o.Grant.Remaining,
			}})
		}
		ps = ps[n:]
	}
	return d
}

func (r *runner) acquired(a engine.Acquired) {
	l := &Lease{
		client: r.c,
		name:   a.Name,
		holder: fromEngine(a.Holder),
		token:  Token(a.Token),
		done:   make(chan struct{}),
	}
	l.seq.Store(a.Seq)
	l.trust.Store(&engine.Window{Anchor: a.Anchor, Deadline: a.Deadline})
	l.progress.Store(int64(a.Anchor.Mono))
	r.leases[a.Name] = l
	r.obs.push(Transition{Name: l.name, Kind: Acquired, Holder: l.holder, Token: l.token, At: time.Now()})
	if !r.answer(a.Name, acquireResult{lease: l}) {
		// Nobody is waiting any more: give it back.
		r.step(engine.Release{Name: a.Name, Token: a.Token})
		r.do(engine.SendRelease{Name: a.Name, Holder: a.Holder, Token: a.Token})
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
	r.obs.push(Transition{Name: l.name, Kind: Lost, Holder: l.holder, Token: l.token, Reason: reason, Err: err, At: time.Now()})
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
		return &HeldError{Name: a.Name, Holder: fromEngine(a.Held.Holder), Token: Token(a.Held.Token), Seq: a.Held.Seq, Remaining: a.Held.Remaining}
	}
	return a.Err
}

func (r *runner) tenure(name string, token int64) *Lease {
	if l := r.leases[name]; l != nil && int64(l.token) == token {
		return l
	}
	return nil
}

// shutdown ends and releases every tenure, answers every waiter, and waits
// for every goroutine Run started.
func (r *runner) shutdown() {
	r.closing = true
	r.drainInbox()
	for name, l := range r.leases {
		r.step(engine.Release{Name: name, Token: int64(l.token)})
		r.releaseNow(l)
	}
	for name := range r.waiters {
		r.answer(name, acquireResult{err: fmt.Errorf("%w: the client's Run has returned", ErrClosed)})
	}
	close(r.quit)
	close(r.c.stopped)
	r.obs.close()
	r.wg.Wait()
}

// releaseNow releases l at the store with a short timeout of its own: the
// loop's ctx is already done.
func (r *runner) releaseNow(l *Lease) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), min(r.c.cfg.RenewInterval, 5*time.Second))
	defer cancel()
	_ = r.c.store.Release(ctx, ReleaseParams{Name: l.name, Holder: l.holder, Token: l.token})
}
