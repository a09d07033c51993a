package sim

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/tenure-dev/tenure/store"

	"github.com/tenure-dev/tenure/internal/drive"
	"github.com/tenure-dev/tenure/internal/engine"
)

// proc is one simulated worker process running the real engine.
type proc struct {
	w   *world
	uid int // ground truth: never copied, not even by a clone
	eng *engine.Engine
	// parent is the process this one was cloned from, at born.
	parent *proc
	born   time.Duration

	// Local clocks: mono = true − monoLost; wall = epoch + true + wallOff.
	monoLost time.Duration
	wallOff  time.Duration

	dead        bool
	pausedUntil time.Duration
	deferred    []func()
	// blind marks a process that was paused without being able to notice
	// (a VM whose wall clock stood still too): until a renewal sent after
	// the pause (at local mono ≥ blindUntil) succeeds, only the fence
	// protects its writes.
	blind      bool
	blindUntil time.Duration

	timerGen     int
	pending      []*pending
	tenure       *tenure_
	chainWaiting []tenure_            // chain writes asked for, not yet granted
	revoked      map[store.Token]bool // tenures this process revoked
	ids          int
}

// tenure_ mirrors what the runtime keeps for a held tenure.
type tenure_ struct {
	holder store.Holder
	token  store.Token
	seq    int64
	window engine.Window
	zombie bool // the WorkAfterRenewError mutant keeps writing after loss
}

type pending struct {
	settled bool
	fail    func(error) engine.Event
}

type pauseKind int

const (
	pauseStop pauseKind = iota
	pauseVMResync
	pauseVMFrozen
)

var errReset = errors.New("connection reset: the process was restored from a snapshot")

func (w *world) newProc() *proc {
	w.nextUID++
	return &proc{w: w, uid: w.nextUID, wallOff: w.between(-3*7*24*time.Hour, 3*7*24*time.Hour), revoked: make(map[store.Token]bool)}
}

func (p *proc) newInstance() string {
	p.ids++
	return fmt.Sprintf("p%d-%d", p.uid, p.ids)
}

func (p *proc) jitter(max time.Duration) time.Duration {
	if max <= 0 {
		return 0
	}
	return p.w.between(0, max)
}

func (w *world) engineConfig(p *proc) engine.Config {
	ttl := w.cfg.TTL
	return engine.Config{
		Label:            "worker",
		TTL:              ttl,
		RenewInterval:    ttl / 3,
		SuspendTolerance: ttl / 20,
		NewInstance:      p.newInstance,
		Jitter:           p.jitter,
	}
}

// spawn starts a fresh process that campaigns for the lease.
func (w *world) spawn() {
	p := w.newProc()
	p.eng = engine.New(w.engineConfig(p))
	w.procs = append(w.procs, p)
	p.step(engine.Want{Name: leaseName, Campaign: true})
	w.after(w.between(0, 200*time.Millisecond), p.work)
}

// clone starts a byte-identical copy of p: same identity, tenure, seq and
// deadline, its own ground-truth id. Its connections are reset.
func (w *world) clone(p *proc) {
	c := w.newProc()
	c.parent, c.born = p, w.now
	c.monoLost, c.wallOff = p.monoLost, p.wallOff
	c.ids = p.ids
	c.blind, c.blindUntil = p.blind, p.blindUntil
	c.chainWaiting = append([]tenure_(nil), p.chainWaiting...)
	c.revoked = maps.Clone(p.revoked)
	w.tracef("clone p%d as p%d", p.uid, c.uid)
	c.eng = p.eng.Clone(c.newInstance, c.jitter)
	if p.tenure != nil {
		t := *p.tenure
		c.tenure = &t
	}
	w.procs = append(w.procs, c)
	w.report.Clones++
	for _, r := range p.pending {
		if !r.settled {
			cr := &pending{fail: r.fail}
			c.pending = append(c.pending, cr)
			w.after(0, func() { c.settle(cr, cr.fail(fmt.Errorf("%w: %w", store.ErrUnavailable, errReset))) })
		}
	}
	c.arm()
	w.after(w.between(0, 200*time.Millisecond), c.work)
}

func (p *proc) instant() engine.Instant {
	return engine.Instant{Mono: p.w.now - p.monoLost, Wall: epoch.Add(p.w.now + p.wallOff)}
}

// run delivers fn to the process: at once when it is running, at resume
// when it is paused, never when it is dead.
func (p *proc) run(fn func()) {
	switch {
	case p.dead:
	case p.w.now < p.pausedUntil:
		p.deferred = append(p.deferred, fn)
	default:
		fn()
	}
}

func (p *proc) pause(d time.Duration, kind pauseKind) {
	if p.w.now < p.pausedUntil {
		return
	}
	p.w.tracef("pause p%d for %s (%s)", p.uid, d, [...]string{"SIGSTOP", "VM, wall clock re-synced", "VM, clocks frozen"}[kind])
	p.pausedUntil = p.w.now + d
	switch kind {
	case pauseVMResync:
		p.monoLost += d
	case pauseVMFrozen:
		p.monoLost += d
		p.wallOff -= d
		p.blind, p.blindUntil = true, p.instant().Mono+d
	}
	p.w.after(d, func() {
		deferred := p.deferred
		p.deferred = nil
		for _, fn := range deferred {
			p.run(fn)
		}
	})
}

func (p *proc) settle(r *pending, ev engine.Event) {
	if r.settled {
		return
	}
	r.settled = true
	p.run(func() { p.step(ev) })
}

func (p *proc) step(ev engine.Event) {
	for _, a := range p.eng.Step(p.instant(), ev) {
		p.do(a)
	}
	p.arm()
}

// arm sets the process's one timer to the engine's next wake-up.
func (p *proc) arm() {
	p.timerGen++
	gen := p.timerGen
	due, ok := p.eng.Next()
	if !ok {
		return
	}
	// Timers run on the local monotonic clock; while a VM is paused it
	// stands still, so the timer fires that much later in true time.
	in := due - p.instant().Mono
	p.w.after(in, func() {
		p.run(func() {
			if gen == p.timerGen {
				p.step(engine.Tick{Timer: true, Due: due})
			}
		})
	})
}

func (p *proc) do(a engine.Action) {
	w := p.w
	switch a := a.(type) {
	case engine.SendRelease:
		if p.revoked[a.Token] {
			// A revoke is the restore hook: the process may be a copy
			// whose twin still does the work under this tenure.
			w.violation("p%d released token %d, which it had revoked", p.uid, a.Token)
		}
		p.send(a)
	case engine.SendAcquire, engine.SendRenew, engine.SendCheck:
		p.send(a)
	case engine.Acquired:
		w.tracef("p%d acquired token %d as %s", p.uid, a.Token, a.Holder.Instance)
		w.report.Grants++
		p.see(a.Anchor)
		p.tenure = &tenure_{holder: a.Holder, token: a.Token, seq: a.Seq, window: engine.NewWindow(a.Anchor, a.Deadline)}
	case engine.Renewed:
		if t := p.tenure; t != nil && t.token == a.Token {
			p.see(a.Anchor)
			t.seq = max(t.seq, a.Seq)
			t.window = engine.NewWindow(a.Anchor, a.Deadline)
		}
	case engine.Lost:
		w.tracef("p%d lost token %d: reason %d", p.uid, a.Token, a.Reason)
		if a.Reason == engine.ReasonRevoked {
			p.revoked[a.Token] = true
		}
		p.chainWaiting = nil
		t := p.tenure
		if t == nil || t.token != a.Token {
			return
		}
		if w.cfg.Mutant == WorkAfterRenewError && (a.Reason == engine.ReasonRenewError || a.Reason == engine.ReasonExpiredLocally) {
			t.zombie = true
			return
		}
		p.tenure = nil
		if a.Reason != engine.ReasonReleased && a.Reason.Releasable() {
			// The lease may still be ours at the store: its owner gives it
			// back once the work stopped (Lease.Release). The engine holds
			// the new campaign back until the release is answered.
			w.after(0, func() {
				p.run(func() { p.step(engine.Release{Name: leaseName, Holder: t.holder, Token: t.token}) })
			})
		}
		w.after(0, func() { p.run(p.campaign) })
	case engine.ChainWriteGranted:
		if i := slices.IndexFunc(p.chainWaiting, func(t tenure_) bool { return t.token == a.Token }); i >= 0 {
			t := p.chainWaiting[i]
			p.chainWaiting = slices.Delete(p.chainWaiting, i, i+1)
			t.seq = a.Seq
			w.sendChain(p, t)
		}
	case engine.AcquireFailed:
		if !a.Busy {
			p.step(engine.Want{Name: leaseName, Campaign: true})
		}
	}
}

// send makes a store call over the network with the shipped glue, which
// runs when the request reaches the store; the clientClock mutant reads the
// sender's wall clock from ctx.
func (p *proc) send(a engine.Action) {
	now := p.instant()
	p.w.request(p, drive.Timeout(a, now.Mono, p.w.cfg.TTL/3), func(ctx context.Context) engine.Event {
		return drive.Call(withWall(ctx, now.Wall), p.w.store, a)
	}, func(err error) engine.Event { return drive.Failed(a, err) })
}

// see notes a renewal seen to succeed: one sent after a blind pause ends
// the blindness.
func (p *proc) see(anchor engine.Instant) {
	if p.blind && anchor.Mono >= p.blindUntil {
		p.blind = false
	}
}

// token is what Lease.Token would return now.
func (p *proc) token() (*tenure_, bool) {
	t := p.tenure
	if t == nil {
		return nil, false
	}
	if t.zombie {
		return t, true
	}
	return t, t.window.Check(p.instant(), p.w.cfg.TTL/20) == 0
}

// work is the job: every few hundred milliseconds, while it trusts its
// tenure, the process sends a write carrying its token to the resource.
func (p *proc) work() {
	w := p.w
	p.run(func() {
		if t, ok := p.token(); ok && !t.zombie && w.rng.IntN(40) == 0 {
			// The job is done for now: release, and campaign again.
			p.step(engine.Release{Name: leaseName, Holder: t.holder, Token: t.token})
			return
		}
		if t, ok := p.token(); ok {
			w.report.Writes++
			w.checkLive(p, t)
			w.write(p, *t)
		}
	})
	if !p.dead {
		w.after(w.between(100*time.Millisecond, 300*time.Millisecond), p.work)
	}
}

func (p *proc) campaign() { p.step(engine.Want{Name: leaseName, Campaign: true}) }

// write sends one fenced write over the network; it is judged when it
// arrives, however late. A strict write is a chain write: it asks the
// engine first and goes out, presenting the granted seq, once the engine
// grants it (no renewal of the tenure in flight).
func (w *world) write(p *proc, t tenure_) {
	if !w.cfg.Strict {
		w.send(p, t, nil)
		return
	}
	p.chainWaiting = append(p.chainWaiting, t)
	p.step(engine.ChainWriteBegin{Name: leaseName, Token: t.token})
}

// send puts one write on the network. end, for a chain write, reports its
// outcome to the engine: the committed seq, or 0 when the write was refused
// or its answer lost (as a caller who cannot tell must).
func (w *world) send(p *proc, t tenure_, end func(seq int64)) {
	w.after(w.delay(), func() {
		ok := w.fence(t)
		w.tracef("write from p%d with token %d seq %d: accepted %t", p.uid, t.token, t.seq, ok)
		if ok {
			w.report.Accepted++
			w.accept(p, t.token)
		} else {
			w.report.Rejected++
		}
		if end != nil && !w.lost() {
			seq := int64(0)
			if ok {
				seq = t.seq + 1
			}
			w.after(w.delay(), func() { end(seq) })
		}
	})
}

// sendChain sends a granted chain write.
func (w *world) sendChain(p *proc, t tenure_) {
	r := &pending{fail: func(error) engine.Event { return engine.ChainWriteEnd{Name: leaseName, Token: t.token} }}
	p.pending = append(p.pending, r)
	end := func(seq int64) {
		// Only the first outcome counts, as with ChainWrite.Commit/Abort.
		if seq > 0 && !r.settled {
			p.run(func() {
				if cur := p.tenure; cur != nil && cur.token == t.token {
					cur.seq = max(cur.seq, seq)
				}
			})
		}
		p.settle(r, engine.ChainWriteEnd{Name: leaseName, Token: t.token, Seq: seq})
	}
	w.after(w.cfg.TTL/3, func() { end(0) })
	w.send(p, t, end)
}

// fence is the resource's check.
func (w *world) fence(t tenure_) bool {
	if w.cfg.Strict {
		// tenure_check_lease_strict: the chain must match and advance.
		res, err := w.store.Renew(context.Background(), []store.RenewParams{{
			Name: leaseName, Holder: t.holder, Token: t.token, Seq: t.seq, TTL: w.cfg.TTL,
		}})
		if err != nil || !res[0].Renewed {
			return false
		}
	}
	if t.token < w.fenceMax && w.cfg.Mutant != FenceAcceptsLower {
		return false
	}
	w.fenceMax = max(w.fenceMax, t.token)
	return true
}
