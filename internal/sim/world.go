package sim

import (
	"container/heap"
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/tenure-dev/tenure/store"

	"github.com/tenure-dev/tenure/internal/engine"
	"github.com/tenure-dev/tenure/store/memstore"
)

// Config fixes one simulated run.
type Config struct {
	Seed      uint64
	Processes int           // simulated workers at the start; default 3
	Duration  time.Duration // virtual time simulated; default 60 s
	TTL       time.Duration // lease TTL; default 2 s
	// Strict makes every write go through the store's renewal chain, the
	// way tenure_check_lease_strict does, so that of two clones only one
	// can write. Without it clones are not simulated.
	Strict bool
	Mutant Mutant
	// Trace, if set, receives a line for every fault, grant, loss and
	// write: what a replayed seed shows.
	Trace func(string)
}

func (c Config) withDefaults() Config {
	if c.Processes == 0 {
		c.Processes = 3
	}
	if c.Duration == 0 {
		c.Duration = time.Minute
	}
	if c.TTL == 0 {
		c.TTL = 2 * time.Second
	}
	return c
}

// Report is what a run found.
type Report struct {
	Seed       uint64
	Violations []string
	Grants     int // tenures granted
	Writes     int // writes sent
	Accepted   int
	Rejected   int
	Faults     int
	Clones     int
}

// String summarises the report in one line, with the seed to replay it.
func (r Report) String() string {
	return fmt.Sprintf("seed %d: %d grants, %d writes (%d accepted, %d rejected), %d faults (%d clones), %d violations",
		r.Seed, r.Grants, r.Writes, r.Accepted, r.Rejected, r.Faults, r.Clones, len(r.Violations))
}

const leaseName = "nightly-billing"

var epoch = time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)

// world is one run: the true clock, the event queue, the store, the
// resource, and the processes.
type world struct {
	cfg   Config
	rng   *rand.Rand
	now   time.Duration // true time since epoch
	queue events
	seq   int

	mem   *memstore.Store
	store store.Store // mem, possibly behind a mutant, behind the recorder

	procs   []*proc
	nextUID int

	// the fenced resource and the history the checker reads
	fenceMax  store.Token
	lastToken store.Token              // the last accepted write's token
	writers   map[store.Token][]writer // each token's writers, in order of their first accepted write
	lastGrant store.Token
	expires   map[store.Token]time.Duration // each tenure's expiry by the store's clock, as last granted
	released  map[store.Token]bool          // tenures their holder released

	// network conditions
	slowUntil, lossyUntil, downUntil time.Duration

	report Report
}

// Run simulates one run and returns its report.
func Run(cfg Config) Report {
	cfg = cfg.withDefaults()
	w := &world{
		cfg:      cfg,
		rng:      rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		writers:  make(map[store.Token][]writer),
		expires:  make(map[store.Token]time.Duration),
		released: make(map[store.Token]bool),
	}
	w.report.Seed = cfg.Seed
	w.mem = memstore.New(memstore.Config{Clock: func() time.Time { return epoch.Add(w.now) }})
	defer w.mem.Close()
	w.store = recorder{Store: wrap(w.mem, cfg.Mutant), w: w}
	for range cfg.Processes {
		w.spawn()
	}
	w.after(w.between(time.Second, 3*time.Second), w.nemesis)
	for w.queue.Len() > 0 {
		ev := heap.Pop(&w.queue).(*event)
		if ev.at > cfg.Duration {
			break
		}
		w.now = ev.at
		ev.fn()
	}
	return w.report
}

type event struct {
	at  time.Duration
	seq int
	fn  func()
}

type events []*event

func (q events) Len() int { return len(q) }
func (q events) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q events) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *events) Push(x any)   { *q = append(*q, x.(*event)) }
func (q *events) Pop() any {
	old := *q
	ev := old[len(old)-1]
	*q = old[:len(old)-1]
	return ev
}

func (w *world) after(d time.Duration, fn func()) {
	w.seq++
	heap.Push(&w.queue, &event{at: w.now + max(d, 0), seq: w.seq, fn: fn})
}

// between draws a duration uniformly from [lo, hi).
func (w *world) between(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(w.rng.Int64N(int64(hi-lo)))
}

// delay draws one message's network delay.
func (w *world) delay() time.Duration {
	if w.now < w.slowUntil && w.rng.IntN(3) == 0 {
		return w.between(0, 2*w.cfg.TTL)
	}
	return w.between(time.Millisecond, 20*time.Millisecond)
}

func (w *world) lost() bool { return w.now < w.lossyUntil && w.rng.IntN(3) == 0 }

func (w *world) tracef(format string, args ...any) {
	if w.cfg.Trace != nil {
		w.cfg.Trace(fmt.Sprintf("%12s ", w.now) + fmt.Sprintf(format, args...))
	}
}

func (w *world) violation(format string, args ...any) {
	w.tracef("VIOLATION "+format, args...)
	w.report.Violations = append(w.report.Violations, fmt.Sprintf("t=%s: ", w.now)+fmt.Sprintf(format, args...))
}

// request sends one store call from p over the network. apply runs at the
// store when the request arrives; its answer travels back unless lost. If
// no answer arrives within timeout, p gets fail's event, as the runtime's
// call timeout would give it.
func (w *world) request(p *proc, timeout time.Duration, apply func(context.Context) engine.Event, fail func(error) engine.Event) {
	r := &pending{fail: fail}
	p.pending = append(p.pending, r)
	if w.now < w.downUntil {
		// The store refuses connections: a fast error, nothing applied.
		w.after(w.delay(), func() {
			p.settle(r, fail(fmt.Errorf("%w: connection refused", store.ErrUnavailable)))
		})
		return
	}
	if !w.lost() {
		w.after(w.delay(), func() {
			ev := apply(context.Background())
			if w.lost() {
				return // the reply is lost after the store committed
			}
			w.after(w.delay(), func() { p.settle(r, ev) })
		})
	}
	w.after(max(timeout, time.Millisecond), func() {
		p.settle(r, fail(fmt.Errorf("%w: call timed out", store.ErrUnavailable)))
	})
}

// nemesis injects one fault and schedules the next.
func (w *world) nemesis() {
	defer w.after(w.between(time.Second, 4*time.Second), w.nemesis)
	alive := w.alive()
	if len(alive) == 0 {
		w.spawn()
		return
	}
	p := alive[w.rng.IntN(len(alive))]
	if h := w.holder(alive); h != nil && w.rng.IntN(2) == 0 {
		p = h // faults on the holder are the interesting ones
	}
	w.report.Faults++
	ttl := w.cfg.TTL
	switch w.rng.IntN(9) {
	case 0: // SIGSTOP: both clocks run on, the process does not
		p.pause(w.between(ttl/2, 5*ttl), pauseStop)
	case 1: // a VM paused, its wall clock re-synced on wake
		p.pause(w.between(ttl/2, 5*ttl), pauseVMResync)
	case 2: // a VM paused and not re-synced: undetectable
		p.pause(w.between(ttl/2, 5*ttl), pauseVMFrozen)
	case 3:
		w.tracef("kill p%d", p.uid)
		p.dead = true
		w.after(w.between(0, ttl), func() { w.spawn() })
	case 4:
		if w.cfg.Strict && len(alive) < 2*w.cfg.Processes {
			w.clone(p)
		} else {
			w.step(p)
		}
	case 5:
		if w.rng.IntN(2) == 0 {
			// A restore hook: the process (perhaps a clone) revokes.
			w.tracef("p%d revokes", p.uid)
			p.run(func() { p.step(engine.Revoke{}) })
		} else {
			w.step(p)
		}
	case 6:
		w.slowUntil = w.now + w.between(time.Second, 3*time.Second)
		w.tracef("network slow until %s", w.slowUntil)
	case 7:
		w.lossyUntil = w.now + w.between(time.Second, 3*time.Second)
		w.tracef("network lossy until %s", w.lossyUntil)
	case 8: // the store is restarted: connections refused for a while
		w.downUntil = w.now + w.between(100*time.Millisecond, ttl)
		w.tracef("store down until %s", w.downUntil)
	}
}

// step moves p's wall clock by up to three weeks either way.
func (w *world) step(p *proc) {
	d := w.between(-3*7*24*time.Hour, 3*7*24*time.Hour)
	p.wallOff += d
	w.tracef("p%d wall clock stepped by %s", p.uid, d)
}

func (w *world) alive() []*proc {
	var out []*proc
	for _, p := range w.procs {
		if !p.dead {
			out = append(out, p)
		}
	}
	return out
}

func (w *world) holder(ps []*proc) *proc {
	for _, p := range ps {
		if p.tenure != nil {
			return p
		}
	}
	return nil
}
