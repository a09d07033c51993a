package tenure

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tenure-dev/tenure/internal/drive"
	"github.com/tenure-dev/tenure/internal/engine"
	"github.com/tenure-dev/tenure/store"
)

// Run drives the client's lease loop until ctx is done: it sends
// acquisitions and renewals, keeps local deadlines, and reports
// transitions. On return every tenure has ended (with [LossClosed]),
// every goroutine Run started has exited, and every tenure has been
// released at the store, best effort, except one whose work outlived its
// trusted time (below). Run returns nil after ctx is done; a client runs
// once.
//
// Once ctx is done Run renews nothing more. A tenure of [Client.Do] has
// work running under it: Run ends the tenure, which cancels fn's ctx, and
// waits for fn to return before it releases the lease, so the next holder
// never starts beside that work. It waits up to the tenure's remaining
// trusted time (its local deadline, at most the TTL less the safety
// margin); a lease whose fn has not returned by then is not released but
// left to expire at the store by its TTL, since the work may still run.
// So Run can take that long to return.
//
// A tenure of [Client.Acquire] or [Client.Campaign] is the caller's: Run
// cannot see the work under it and releases it at once. Stop that work
// before ctx is done, or use Do.
func (c *Client) Run(ctx context.Context) error {
	if !c.started.CompareAndSwap(false, true) {
		return errors.New("tenure: Client.Run called twice; a Client runs once, make a new one")
	}
	r := &runner{
		c:        c,
		ctx:      ctx,
		replies:  make(chan []engine.Event),
		idle:     make(chan job),
		armed:    never,
		leases:   make(map[string]*Lease),
		waiters:  make(map[string]waiter),
		releases: make(map[tenureKey][]chan error),
		stopping: make(map[tenureKey]time.Duration),
		overdue:  make(map[tenureKey]struct{}),
		fed:      make(map[*Lease]time.Duration),
		obs:      newObserver(c.cfg.OnTransition),
		tel:      newTelemetry(c),
	}
	r.batcher, _ = c.store.(store.BatchAcquirer)
	r.wg.Go(r.obs.run)
	if n, ok := c.store.(store.Notifier); ok {
		r.sub = store.Subscribe(n)
		r.wg.Go(func() {
			_ = r.sub.Listen(ctx, func(n store.Notice) { c.post(request{event: engine.Notified{Notice: n}}) })
		})
	}
	c.run.Store(r)
	r.loop()
	r.shutdown()
	return nil
}

// runner is the state of one Run. The engine and everything here belong
// to whoever holds the turn (mu): the loop goroutine, an API call that
// steps the engine itself (see [runner.turn]), or a worker handing in a
// store call's answer. Store calls run on workers, never under the turn.
type runner struct {
	c   *Client
	ctx context.Context
	wg  sync.WaitGroup

	mu sync.Mutex
	// armed is the wake time the loop's timer is set for (never: none).
	// A turn that leaves the engine wanting an earlier one wakes the loop.
	armed time.Duration
	// jobs holds the store calls of the current turn, launched once it
	// has ended.
	jobs []job
	// idle hands a job to a worker waiting for one; idlers counts them.
	idle    chan job
	idlers  atomic.Int32
	replies chan []engine.Event // answers handed in while closing
	// inflight counts store calls whose answer has not been handed in.
	inflight int
	closing  bool
	// gathered holds the releases of a shutdown until they go to the
	// store together; nil when releases go out one by one.
	gathered *[]engine.SendRelease
	// batcher is the store's batch acquisition, if it has one; acquires
	// holds the attempts the engine asked for that have not gone to the
	// store yet (see sendAcquires).
	batcher        store.BatchAcquirer
	acquires       []engine.SendAcquire
	acquireFlights atomic.Int32 // acquisition round trips out; a turn adds, their jobs subtract
	// sub hears the store's announcements of the names the engine
	// follows, so that the loop is not woken for the others; nil when the
	// store announces nothing.
	sub store.Subscription

	leases   map[string]*Lease          // the current tenure per name
	waiters  map[string]waiter          // Acquire and Campaign calls awaiting an answer
	releases map[tenureKey][]chan error // Lease.Release calls awaiting the store's answer
	// stopping holds the tenures of Do whose work shutdown waits for,
	// with their local deadlines; overdue those it gave up on.
	stopping map[tenureKey]time.Duration
	overdue  map[tenureKey]struct{}
	fed      map[*Lease]time.Duration // last progress reading fed to the engine
	obs      *observer
	tel      *telemetry // nil: no Observer, no Logger
}

// waiter is an Acquire, Campaign or Do call awaiting an answer; guarded
// marks Do's (see [request]).
type waiter struct {
	reply   chan acquireResult
	guarded bool
}

// job is a store call: it returns the events that answer it.
type job func() []engine.Event

// never is the wake time of a loop whose timer is stopped.
const never = time.Duration(math.MaxInt64)

// tenureKey names one tenure.
type tenureKey struct {
	name  string
	token Token
}

func (r *runner) loop() {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		r.mu.Lock()
		r.drainInbox()
		r.sendAcquires()
		due, armed := r.c.eng.Next()
		if armed {
			_, mono := r.c.cfg.Clock.Now()
			timer.Reset(max(due-mono, 0))
			r.armed = due
		} else {
			timer.Stop()
			r.armed = never
		}
		r.launch(r.takeJobs())
		select {
		case <-r.ctx.Done():
			return
		case <-r.c.wake:
		case <-timer.C:
			if armed {
				r.mu.Lock()
				r.feedProgress()
				r.step(engine.Tick{Timer: true, Due: due})
				r.mu.Unlock()
			}
		}
	}
}

// turn steps the engine on the calling goroutine, as the loop would:
// requests queued before come first, then handle, then the attempts due
// go to the store. An Acquire, a Release or an announcement so reaches
// the store without waiting for the loop's goroutine to wake; its store
// call is made by a worker, which hands the answer in the same way. turn
// reports false, doing nothing, once Run is shutting down, and when wait
// is false and another goroutine holds the turn.
func (r *runner) turn(wait bool, handle func()) bool {
	if wait {
		r.mu.Lock()
	} else if !r.mu.TryLock() {
		return false
	}
	if r.closing {
		r.mu.Unlock()
		return false
	}
	r.drainInbox()
	handle()
	r.endTurn()
	return true
}

// endTurn sends the attempts due, wakes the loop if the engine now wants
// a tick before the loop's timer fires, ends the turn and launches its
// store calls.
func (r *runner) endTurn() {
	r.sendAcquires()
	if due, ok := r.c.eng.Next(); ok && due < r.armed {
		r.armed = due
		r.c.poke()
	}
	r.launch(r.takeJobs())
}

// takeJobs returns the store calls of the turn.
func (r *runner) takeJobs() []job {
	jobs := r.jobs
	r.jobs = nil
	return jobs
}

// launch ends the turn and hands each job to an idle worker, or to a new
// one when none is idle. A worker keeps its stack from call to call, so a
// store call does not grow a fresh goroutine's stack on the way.
func (r *runner) launch(jobs []job) {
	r.mu.Unlock()
	for _, j := range jobs {
		select {
		case r.idle <- j:
		default:
			r.wg.Go(func() { r.work(j) })
		}
	}
}

// Idle workers: at most maxIdlers wait for a store call, each for at most
// workerLinger. Those beyond, started by a burst of calls, end with their
// call; the others end once the client has been quiet for a while, so
// that a process running many clients does not keep their stacks.
const (
	maxIdlers    = 8
	workerLinger = time.Second
)

// work carries out j, hands its answer in, and waits for the next job
// while Run runs (see maxIdlers).
func (r *runner) work(j job) {
	linger := time.NewTimer(workerLinger)
	defer linger.Stop()
	for {
		evs := j()
		j = nil // an idle worker keeps nothing of its last call
		r.handIn(evs)
		if r.idlers.Add(1) > maxIdlers {
			r.idlers.Add(-1)
			return
		}
		linger.Reset(workerLinger)
		select {
		case j = <-r.idle:
			r.idlers.Add(-1)
		case <-linger.C:
			r.idlers.Add(-1)
			return
		case <-r.ctx.Done():
			r.idlers.Add(-1)
			return
		}
	}
}

// handIn feeds the engine a store call's answer. Requests made before it
// arrived are seen first, so the engine sees events in the order they
// happened. Once Run is shutting down, shutdown takes the answer.
func (r *runner) handIn(evs []engine.Event) {
	r.mu.Lock()
	if r.closing {
		r.mu.Unlock()
		r.replies <- evs
		return
	}
	r.drainInbox()
	for _, ev := range evs {
		r.reply(ev)
	}
	r.endTurn()
}

func (r *runner) drainInbox() {
	r.c.mu.Lock()
	inbox := r.c.inbox
	r.c.inbox = nil
	r.c.mu.Unlock()
	for _, q := range inbox {
		r.handle(q)
	}
}

// handle steps the engine with one request of the API.
func (r *runner) handle(q request) {
	switch ev := q.event.(type) {
	case engine.Want, engine.Adopt, engine.Granted:
		name := wantedName(ev)
		if _, busy := r.waiters[name]; busy {
			q.reply <- acquireResult{err: r.acquireError(engine.AcquireFailed{Name: name, Busy: true})}
			if g, ok := ev.(engine.Granted); ok {
				r.do(engine.SendRelease{Name: name, Holder: g.Holder, Token: g.Grant.Token})
			}
			return
		}
		r.waiters[name] = waiter{reply: q.reply, guarded: q.guarded}
	case engine.Unwant:
		if w, ok := r.waiters[ev.Name]; ok && w.reply == q.reply {
			delete(r.waiters, ev.Name)
			w.reply <- acquireResult{err: context.Canceled}
		}
	case engine.ChainWriteBegin:
		l := r.tenure(ev.Name, ev.Token)
		if l == nil {
			q.chain <- chainGrant{err: fmt.Errorf("%w: lease %q with token %d is no longer held", ErrLost, ev.Name, ev.Token)}
			return
		}
		l.chainWaiters = append(l.chainWaiters, q.chain)
	case engine.Release:
		k := tenureKey{ev.Name, ev.Token}
		if r.closing && r.abandoned(k) {
			q.released <- fmt.Errorf("%w: lease %q, token %d: its work returned after the tenure's trusted time ran out at shutdown, so it was not released and expires by its TTL",
				ErrLost, ev.Name, ev.Token)
			return
		}
		r.releases[k] = append(r.releases[k], q.released)
	}
	r.step(q.event)
}

func wantedName(ev engine.Event) string {
	switch ev := ev.(type) {
	case engine.Adopt:
		return ev.Name
	case engine.Granted:
		return ev.Grant.Name
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

// call carries out a store action on a worker, bounded by its timeout,
// and hands the answer in. A release is not cut short by ctx: it is the
// last call a tenure makes, and shutdown waits for it.
func (r *runner) call(a engine.Action) {
	_, mono := r.c.cfg.Clock.Now()
	timeout := drive.Timeout(a, mono, r.c.cfg.RenewInterval)
	parent := r.ctx
	if _, ok := a.(engine.SendRelease); ok {
		parent = context.WithoutCancel(parent)
		timeout = min(timeout, maxReleaseWait)
	}
	r.inflight++
	r.jobs = append(r.jobs, func() []engine.Event {
		ctx, cancel := context.WithTimeout(parent, timeout)
		defer cancel()
		return []engine.Event{drive.Call(ctx, r.c.store, a)}
	})
}

// sendAcquires sends the attempts gathered since the loop last looked,
// group-commit style: while fewer than maxAcquireFlights acquisition round
// trips are out, a lone attempt goes at once and several go together;
// attempts made while that many are out wait for one to come back and then
// go together, up to maxAcquireBatch to a round trip. So one Acquire call
// pays no wait, and thousands made at once (or campaigns retrying at one
// expiry) take a few round trips each of many leases rather than one each.
// An attempt's trust window starts when its round trip does (see
// flyAcquires), so the wait in this queue does not shorten it.
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
	r.jobs = append(r.jobs, func() []engine.Event {
		ctx, cancel := context.WithTimeout(r.ctx, timeout)
		defer cancel()
		// The flight ends before its answers are handed in: the turn
		// that takes them sends the attempts that waited for it.
		defer r.acquireFlights.Add(-1)
		// Each attempt's trust window starts now, as its request leaves:
		// still before the store can grant it (promise P3), and not when
		// the engine asked, which can be a queue of flights earlier (a
		// window started there ran out before thousands of attempts made
		// at once were answered, and their grants were given back as too
		// late).
		sent := r.now()
		for i := range as {
			as[i].SentAt = sent
		}
		if len(as) == 1 {
			return []engine.Event{drive.Call(ctx, r.c.store, as[0])}
		}
		return drive.AcquireBatch(ctx, r.batcher, as)
	})
}

// releaseAll carries out the releases of a shutdown: when the store
// releases in batches, in batches of up to [store.MaxRenewBatch], one
// round trip each, one after the other, each bounded by maxReleaseWait;
// else one call each.
func (r *runner) releaseAll(as []engine.SendRelease) {
	br, ok := r.c.store.(store.BatchReleaser)
	if !ok || len(as) < 2 {
		for _, a := range as {
			r.call(a)
		}
		return
	}
	r.inflight += len(as)
	r.jobs = append(r.jobs, func() []engine.Event {
		return drive.ReleaseBatch(context.WithoutCancel(r.ctx), br, as, maxReleaseWait)
	})
}

// maxReleaseWait bounds a release, or a batch of releases, at the store: a
// store that does not answer by then lets the lease expire by its TTL
// instead.
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
	if w, ok := r.waiters[a.Name]; ok {
		l.guarded = w.guarded
	}
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
		w.reply <- res
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

// shutdown ends every tenure, answers every waiter, releases the tenures
// whose work has stopped, and waits for every store call still out
// (acquisitions and renewals fail at once: ctx is done) and every goroutine
// Run started.
//
// A guarded tenure (one of [Client.Do]) still has its work running: it is
// ended without a release, which cancels the work's ctx, and shutdown
// waits for Do to release it once fn has returned, until the tenure's
// local deadline. Past that deadline the work is no longer trusted and may
// still run, so the lease is left to expire at the store: releasing it
// would let the next holder in beside that work.
func (r *runner) shutdown() {
	r.mu.Lock()
	r.closing = true
	r.drainInbox()
	r.refuseWaiters()
	var releases []engine.SendRelease
	r.gathered = &releases
	for _, l := range r.leases {
		if l.guarded {
			r.stopping[tenureKey{l.name, l.token}] = l.trust.Load().Deadline
			// Dropped, not released: the engine forgets the tenure and
			// sends no release; Do's Release gives it back once fn has
			// returned.
			r.step(engine.Drop{Name: l.name, Token: l.token, Reason: engine.ReasonReleased})
			continue
		}
		r.step(engine.Release{Name: l.name, Holder: l.holder, Token: l.token})
	}
	r.gathered = nil
	r.releaseAll(releases)
	timer := time.NewTimer(never)
	defer timer.Stop()
	for {
		r.abandonOverdue()
		if r.inflight == 0 && len(r.stopping) == 0 {
			break
		}
		if len(r.stopping) > 0 {
			_, mono := r.c.cfg.Clock.Now()
			timer.Reset(max(r.nextOverdue()-mono, 0))
		}
		r.launch(r.takeJobs())
		select {
		case evs := <-r.replies:
			r.mu.Lock()
			for _, ev := range evs {
				r.reply(ev)
			}
		case <-r.c.wake:
			r.mu.Lock()
			r.drainInbox()
			r.refuseWaiters()
		case <-timer.C:
			r.mu.Lock()
		}
	}
	r.mu.Unlock()
	close(r.c.stopped)
	r.obs.close()
	r.wg.Wait()
}

// refuseWaiters answers every Acquire, Campaign and Do call still waiting
// with [ErrClosed], and withdraws their wants.
func (r *runner) refuseWaiters() {
	for name := range r.waiters {
		r.answer(name, acquireResult{err: fmt.Errorf("%w: the client's Run has returned", ErrClosed)})
		r.step(engine.Unwant{Name: name})
	}
}

// abandoned reports whether k is a tenure whose work shutdown gave up
// waiting for. For one it waits for, the wait ends here: its work has
// returned, in time when its local deadline has not passed, and then its
// release goes to the store.
func (r *runner) abandoned(k tenureKey) bool {
	deadline, ok := r.stopping[k]
	if !ok {
		_, over := r.overdue[k]
		return over
	}
	delete(r.stopping, k)
	if _, mono := r.c.cfg.Clock.Now(); mono >= deadline {
		r.overdue[k] = struct{}{}
		return true
	}
	return false
}

// abandonOverdue stops waiting for the work of tenures whose local
// deadline has passed: they are left to expire at the store.
func (r *runner) abandonOverdue() {
	_, mono := r.c.cfg.Clock.Now()
	for k, deadline := range r.stopping {
		if mono >= deadline {
			delete(r.stopping, k)
			r.overdue[k] = struct{}{}
		}
	}
}

// nextOverdue returns the earliest local deadline shutdown waits for.
func (r *runner) nextOverdue() time.Duration {
	next := never
	for _, d := range r.stopping {
		next = min(next, d)
	}
	return next
}
