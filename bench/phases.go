package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
)

// result is what the phases measured of one subject.
type result struct {
	mu sync.Mutex

	Acquire *dist `json:"acquire,omitempty"`
	Release *dist `json:"release,omitempty"`
	// StoreAcquire and StoreRelease: the same cycle with the store's own
	// calls and no client (tenure only).
	StoreAcquire *dist `json:"store_acquire,omitempty"`
	StoreRelease *dist `json:"store_release,omitempty"`
	// SlotAcquire: taking the last free of a name's slots (tenure only;
	// see slots.go).
	SlotAcquire *dist   `json:"slot_acquire,omitempty"`
	ReqPerCycle float64 `json:"requests_per_acquire_release,omitempty"`
	Renew       *dist   `json:"renew,omitempty"`
	// Handover: from A's release call to B, waiting, holding the name.
	Handover *dist `json:"handover,omitempty"`
	// Failover: from the crashed holder's last renewal to B holding.
	Failover *dist  `json:"failover_from_last_renewal,omitempty"`
	Load     []load `json:"idle_load,omitempty"`
	// Churn: clients looping acquire and release on one name.
	Churn  []churn  `json:"churn,omitempty"`
	Errors []string `json:"errors,omitempty"`

	acquire, release, renew, handover, failover []time.Duration
	storeAcquire, storeRelease                  []time.Duration
	slotAcquire                                 []time.Duration
}

// barer is a participant whose store can be called without its client.
type barer interface {
	bareCycle(ctx context.Context, name string, hold time.Duration) (acquire, release time.Duration, err error)
}

type load struct {
	Leases     int           `json:"leases"`
	ReqPerSec  float64       `json:"requests_per_sec"`
	AcquireAll time.Duration `json:"acquire_all_ns"`
	Window     time.Duration `json:"window_ns"`
}

type churn struct {
	Clients      int     `json:"clients"`
	Acquisitions int     `json:"acquisitions"`
	PerSec       float64 `json:"acquisitions_per_sec"`
	Jain         float64 `json:"jain"`
	PerClient    []int   `json:"per_client"`
}

func (r *result) errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.Errors) < 20 {
		r.Errors = append(r.Errors, fmt.Sprintf(format, args...))
	}
}

func (r *result) add(to *[]time.Duration, d time.Duration) {
	r.mu.Lock()
	*to = append(*to, d)
	r.mu.Unlock()
}

// summarise turns the raw samples into distributions.
func (r *result) summarise() {
	r.Acquire = summarise(r.acquire, false)
	r.Release = summarise(r.release, false)
	r.StoreAcquire = summarise(r.storeAcquire, false)
	r.SlotAcquire = summarise(r.slotAcquire, false)
	r.StoreRelease = summarise(r.storeRelease, false)
	r.Renew = summarise(r.renew, false)
	r.Handover = summarise(r.handover, true)
	r.Failover = summarise(r.failover, true)
}

// rotate returns xs starting at index k, for interleaving: every block of
// iterations visits every subject, in an order that moves each time.
func rotate[T any](xs []T, k int) []T {
	out := make([]T, 0, len(xs))
	for i := range xs {
		out = append(out, xs[(i+k)%len(xs)])
	}
	return out
}

// deadline is the longest any single wait of a subject may take.
func deadline(s *subject) time.Duration { return 3*s.TTL + 30*time.Second }

// phaseFloors times each floor operation hot (back to back) and paced
// (after an idle gap of hold), interleaved across stores. It also returns
// the first error of each operation that failed, with the count.
func phaseFloors(ctx context.Context, ops []floorOp, n, blocks int, hold time.Duration) (map[string]map[string]*dist, []string) {
	raw := map[string][]time.Duration{}
	failed := map[string]int{}
	var errs []string
	per := max(1, n/blocks)
	for _, paced := range []bool{false, true} {
		for b := range blocks {
			for _, op := range rotate(ops, b) {
				k := op.kind
				if paced {
					k += " paced"
				}
				for range per {
					if paced {
						time.Sleep(hold)
					}
					cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
					t0 := time.Now()
					err := op.call(cctx)
					d := time.Since(t0)
					cancel()
					if err != nil {
						if failed[op.store+" "+k]++; failed[op.store+" "+k] == 1 {
							errs = append(errs, fmt.Sprintf("floor %s %s: %v", op.store, k, err))
						}
						continue
					}
					raw[op.store+"\x00"+k] = append(raw[op.store+"\x00"+k], d)
				}
			}
		}
	}
	out := map[string]map[string]*dist{}
	for _, op := range ops {
		if out[op.store] == nil {
			out[op.store] = map[string]*dist{}
		}
		for _, k := range []string{op.kind, op.kind + " paced"} {
			out[op.store][k] = summarise(raw[op.store+"\x00"+k], false)
		}
	}
	for k, n := range failed {
		errs = append(errs, fmt.Sprintf("floor %s: %d calls failed", k, n))
	}
	return out, errs
}

// phaseUncontended: one participant per subject; idle gap, acquire, idle
// gap, release, on a name nobody else wants. Also counts the requests of
// one cycle.
func phaseUncontended(ctx context.Context, e *env, subs []*subject, n, blocks int, hold time.Duration) {
	type state struct {
		p    participant
		c    *counter
		name string
		base int64
	}
	st := map[*subject]*state{}
	for _, s := range subs {
		c := &counter{}
		p, err := s.impl.participant(ctx, "uncontended", c, false)
		if err != nil {
			s.Result.errorf("uncontended: %v", err)
			continue
		}
		st[s] = &state{p: p, c: c, name: e.key("uc")}
	}
	cycle := func(s *subject, x *state, record bool) {
		cctx, cancel := context.WithTimeout(ctx, deadline(s))
		defer cancel()
		time.Sleep(hold)
		t0 := time.Now()
		l, err := x.p.acquire(cctx, x.name)
		t1 := time.Now()
		if err != nil {
			s.Result.errorf("uncontended acquire: %v", err)
			return
		}
		time.Sleep(hold)
		t2 := time.Now()
		err = l.release(cctx)
		t3 := time.Now()
		if err != nil {
			s.Result.errorf("uncontended release: %v", err)
			return
		}
		if record {
			s.Result.add(&s.Result.acquire, t1.Sub(t0))
			s.Result.add(&s.Result.release, t3.Sub(t2))
		}
		// The bare store calls, right after, on another name: their
		// requests are not counted in req (see base below).
		if b, ok := x.p.(barer); ok && record {
			n0 := x.c.load()
			a, r, err := b.bareCycle(cctx, x.name+"-bare", hold)
			x.base += x.c.load() - n0
			if err != nil {
				s.Result.errorf("uncontended store calls: %v", err)
				return
			}
			s.Result.add(&s.Result.storeAcquire, a)
			s.Result.add(&s.Result.storeRelease, r)
		}
		if sl, ok := x.p.(sloter); ok && record {
			n0 := x.c.load()
			a, err := sl.slotCycle(cctx, tenureSlotName(x.name), hold)
			x.base += x.c.load() - n0
			if err != nil {
				s.Result.errorf("uncontended slot: %v", err)
				return
			}
			s.Result.add(&s.Result.slotAcquire, a)
		}
	}
	for s, x := range st { // warm up: connections, prepared statements, scripts
		for range 3 {
			cycle(s, x, false)
		}
		x.base = x.c.load()
	}
	per := max(1, n/blocks)
	for b := range blocks {
		for _, s := range rotate(subs, b) {
			if x := st[s]; x != nil {
				for range per {
					cycle(s, x, true)
				}
			}
		}
	}
	for s, x := range st {
		if k := len(s.Result.acquire); k > 0 {
			s.Result.ReqPerCycle = float64(x.c.load()-x.base) / float64(k)
		}
		_ = x.p.close()
	}
}

// phaseRenew times one explicit renewal of a held lease, each after an
// idle gap of hold.
func phaseRenew(ctx context.Context, e *env, subs []*subject, n, blocks int, hold time.Duration) {
	type state struct {
		p participant
		l lease
	}
	st := map[*subject]*state{}
	for _, s := range subs {
		p, err := s.impl.participant(ctx, "renew", nil, false)
		if err != nil {
			s.Result.errorf("renew: %v", err)
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, deadline(s))
		l, err := p.acquire(cctx, e.key("renew"))
		cancel()
		if err != nil {
			s.Result.errorf("renew: acquire: %v", err)
			_ = p.close()
			continue
		}
		st[s] = &state{p: p, l: l}
	}
	per := max(1, n/blocks)
	for b := range blocks {
		for _, s := range rotate(subs, b) {
			x := st[s]
			if x == nil {
				continue
			}
			for range per {
				time.Sleep(hold)
				cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				t0 := time.Now()
				err := x.l.renew(cctx)
				d := time.Since(t0)
				cancel()
				if err != nil {
					s.Result.errorf("renew: %v", err)
					continue
				}
				s.Result.add(&s.Result.renew, d)
			}
		}
	}
	for _, x := range st {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_ = x.l.release(cctx)
		cancel()
		_ = x.p.close()
	}
}

// waitResult is what a waiting participant's acquire came back with.
type waitResult struct {
	l   lease
	at  time.Time
	err error
}

// startWaiting makes p wait for name in the background.
func startWaiting(ctx context.Context, p participant, name string) <-chan waitResult {
	ch := make(chan waitResult, 1)
	go func() {
		l, err := p.acquire(ctx, name)
		ch <- waitResult{l: l, at: time.Now(), err: err}
	}()
	return ch
}

// errEarly: the waiter got the name while the holder still held it.
var errEarly = errors.New("B acquired the name while A held it")

// holdWithWaiter has A acquire a name and B wait for it; it returns after
// a pause once B is waiting, and fails if B got the name meanwhile.
func holdWithWaiter(ctx context.Context, e *env, s *subject, what string, crashable bool, pause time.Duration) (a, b participant, la lease, wait <-chan waitResult, err error) {
	a, err = s.impl.participant(ctx, what+"-a", nil, crashable)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	b, err = s.impl.participant(ctx, what+"-b", nil, false)
	if err != nil {
		_ = a.close()
		return nil, nil, nil, nil, err
	}
	// Warm both, as a service's long-lived connections are: each takes
	// and gives back a name of its own first (on PostgreSQL a session's
	// first call of a PL/pgSQL function plans its statements, a few
	// milliseconds that a real holder pays once, not per handover).
	for _, p := range []participant{a, b} {
		if err := warm(ctx, p, e.key(what+"-warm")); err != nil {
			_ = a.close()
			_ = b.close()
			return nil, nil, nil, nil, err
		}
	}
	name := e.key(what)
	la, err = a.acquire(ctx, name)
	if err != nil {
		_ = a.close()
		_ = b.close()
		return nil, nil, nil, nil, fmt.Errorf("A acquire: %w", err)
	}
	wait = startWaiting(ctx, b, name)
	time.Sleep(pause)
	select {
	case w := <-wait:
		if w.l != nil {
			_ = w.l.release(ctx)
		}
		_ = la.release(ctx)
		_ = a.close()
		_ = b.close()
		return nil, nil, nil, nil, fmt.Errorf("%w (B's error: %v)", errEarly, w.err)
	default:
	}
	return a, b, la, wait, nil
}

// warm has p take name and give it back.
func warm(ctx context.Context, p participant, name string) error {
	l, err := p.acquire(ctx, name)
	if err != nil {
		return fmt.Errorf("warm-up acquire: %w", err)
	}
	if err := l.release(ctx); err != nil {
		return fmt.Errorf("warm-up release: %w", err)
	}
	return nil
}

// handoverTrial: A holds, B waits; A releases. The time from A's release
// call to B holding.
func handoverTrial(ctx context.Context, e *env, s *subject) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, deadline(s))
	defer cancel()
	a, b, la, wait, err := holdWithWaiter(ctx, e, s, "handover", false, 100*time.Millisecond+rand.N(200*time.Millisecond))
	if err != nil {
		return 0, err
	}
	defer b.close()
	defer a.close()
	t0 := time.Now()
	if err := la.release(ctx); err != nil {
		return 0, fmt.Errorf("A release: %w", err)
	}
	w := <-wait
	if w.err != nil {
		return 0, fmt.Errorf("B acquire: %w", w.err)
	}
	_ = w.l.release(ctx)
	return w.at.Sub(t0), nil
}

// phaseHandover runs trials per subject, par at a time with a stagger,
// subjects in an order that rotates per round.
func phaseHandover(ctx context.Context, e *env, subs []*subject, trials, par int) {
	rounds := (trials + par - 1) / par
	for round := range rounds {
		for _, s := range rotate(subs, round) {
			var wg sync.WaitGroup
			for i := range min(par, trials-round*par) {
				wg.Go(func() {
					time.Sleep(time.Duration(i) * 50 * time.Millisecond)
					d, err := handoverTrial(ctx, e, s)
					if err != nil {
						s.Result.errorf("handover: %v", err)
						return
					}
					s.Result.add(&s.Result.handover, d)
				})
			}
			wg.Wait()
		}
	}
}

// failoverTrial: A holds and renews, B waits; at a random point of A's
// renewal cycle (and of B's polling, if it polls) A crashes without
// releasing. The time from A's last renewal to B holding.
func failoverTrial(ctx context.Context, e *env, s *subject) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, deadline(s))
	defer cancel()
	every := max(s.RenewEvery, s.PollEvery)
	a, b, la, wait, err := holdWithWaiter(ctx, e, s, "failover", true, 300*time.Millisecond+rand.N(every))
	if err != nil {
		return 0, err
	}
	defer b.close()
	defer a.close()
	a.crash()
	last := la.lastRenew()
	w := <-wait
	if w.err != nil {
		return 0, fmt.Errorf("B acquire: %w", w.err)
	}
	_ = w.l.release(ctx)
	return w.at.Sub(last), nil
}

// phaseFailover starts trials per subject, all at once with a stagger,
// in wg.
func phaseFailover(ctx context.Context, e *env, subs []*subject, trials int, wg *sync.WaitGroup) {
	for _, s := range subs {
		for i := range trials {
			wg.Go(func() {
				time.Sleep(time.Duration(i) * 150 * time.Millisecond)
				d, err := failoverTrial(ctx, e, s)
				if err != nil {
					s.Result.errorf("failover: %v", err)
					return
				}
				s.Result.add(&s.Result.failover, d)
			})
		}
	}
}

// loadTrial: one participant acquires leases names and idles; its
// requests per second over window, after settle.
func loadTrial(ctx context.Context, e *env, s *subject, leases int, settle, window time.Duration) (load, error) {
	c := &counter{}
	p, err := s.impl.participant(ctx, fmt.Sprintf("load-%d", leases), c, false)
	if err != nil {
		return load{}, err
	}
	defer p.close()
	var held []lease
	defer func() {
		for _, l := range held {
			cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_ = l.release(cctx)
			cancel()
		}
	}()
	t0 := time.Now()
	for i := range leases {
		cctx, cancel := context.WithTimeout(ctx, deadline(s))
		l, err := p.acquire(cctx, e.key(fmt.Sprintf("load%d-%d", leases, i)))
		cancel()
		if err != nil {
			return load{}, fmt.Errorf("acquire %d of %d: %w", i+1, leases, err)
		}
		held = append(held, l)
	}
	acquireAll := time.Since(t0)
	time.Sleep(settle)
	n0, w0 := c.load(), time.Now()
	time.Sleep(window)
	n1, el := c.load(), time.Since(w0)
	return load{Leases: leases, ReqPerSec: float64(n1-n0) / el.Seconds(), AcquireAll: acquireAll, Window: el}, nil
}

// phaseLoad starts the idle-load trials (1 lease and many) of every
// subject at once, in wg.
func phaseLoad(ctx context.Context, e *env, subs []*subject, many int, settle, window time.Duration, wg *sync.WaitGroup) {
	for _, s := range subs {
		m := many
		if s.MaxLeases > 0 {
			m = min(m, s.MaxLeases)
		}
		for _, n := range []int{1, m} {
			if n <= 0 || (n == m && m == 1) {
				continue
			}
			wg.Go(func() {
				lr, err := loadTrial(ctx, e, s, n, settle, window)
				if err != nil {
					s.Result.errorf("idle load, %d leases: %v", n, err)
					return
				}
				s.Result.mu.Lock()
				s.Result.Load = append(s.Result.Load, lr)
				s.Result.mu.Unlock()
			})
		}
	}
}

// churnRound: clients participants loop acquire and release on one name
// for dur; acquisitions per client.
func churnRound(ctx context.Context, e *env, s *subject, clients int, dur time.Duration) ([]int, time.Duration) {
	var ps []participant
	for i := range clients {
		p, err := s.impl.participant(ctx, fmt.Sprintf("churn-%d", i), nil, false)
		if err != nil {
			s.Result.errorf("churn: %v", err)
			continue
		}
		ps = append(ps, p)
	}
	defer func() {
		for _, p := range ps {
			_ = p.close()
		}
	}()
	name := e.key("churn")
	counts := make([]int, len(ps))
	rctx, cancel := context.WithTimeout(ctx, dur)
	defer cancel()
	var wg sync.WaitGroup
	start := time.Now()
	for i, p := range ps {
		wg.Go(func() {
			for rctx.Err() == nil {
				l, err := p.acquire(rctx, name)
				if err != nil {
					if rctx.Err() == nil {
						s.Result.errorf("churn acquire: %v", err)
						time.Sleep(10 * time.Millisecond)
					}
					continue
				}
				if rctx.Err() == nil {
					counts[i]++
				}
				cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
				if err := l.release(cctx); err != nil {
					s.Result.errorf("churn release: %v", err)
				}
				ccancel()
			}
		})
	}
	wg.Wait()
	return counts, min(time.Since(start), dur)
}

// phaseChurn runs each client count for dur per subject, split in rounds
// whose subject order rotates. Jain's index is taken per round (one
// client may win a whole round; pooling rounds would hide it) and
// averaged.
func phaseChurn(ctx context.Context, e *env, subs []*subject, clients []int, dur time.Duration, rounds int) {
	for _, n := range clients {
		type agg struct {
			total   int
			elapsed time.Duration
			jains   []float64
			per     []int
		}
		aggs := map[*subject]*agg{}
		for _, s := range subs {
			aggs[s] = &agg{per: make([]int, n)}
		}
		for round := range rounds {
			for _, s := range rotate(subs, round) {
				counts, el := churnRound(ctx, e, s, n, dur/time.Duration(rounds))
				a := aggs[s]
				a.elapsed += el
				a.jains = append(a.jains, jain(counts))
				for i, c := range counts {
					a.total += c
					a.per[i] += c
				}
			}
		}
		for _, s := range subs {
			a := aggs[s]
			ch := churn{Clients: n, Acquisitions: a.total, PerClient: a.per}
			if a.elapsed > 0 {
				ch.PerSec = float64(a.total) / a.elapsed.Seconds()
			}
			for _, j := range a.jains {
				ch.Jain += j / float64(len(a.jains))
			}
			s.Result.Churn = append(s.Result.Churn, ch)
		}
	}
}
