package storekit

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/tenure-dev/tenure/store"
)

// Group commit of a store's calls (see [AcquireGroup] and [RenewGroup]).
const (
	// Flights is how many round trips a group has out at once.
	Flights = 2
	// AcquireBatchMax is the most acquisitions one round trip of a group
	// carries.
	AcquireBatchMax = 1000
	// RenewBatchMax is the most renewals one round trip of a group
	// carries: the most one call may carry.
	RenewBatchMax = store.MaxRenewBatch
)

// group is group commit of one kind of store call, shared by every caller
// of the store: while fewer than [Flights] round trips are out, a call goes
// at once, alone, on its caller's goroutine and under its caller's
// context, as it would without the group; calls made while that many are
// out wait for one to come back and then go together, up to max items to a
// round trip, in the order they came (the oldest waiting call always goes
// next). Two items of the same name never go in one round trip: a call
// holding a name already taken waits for the next.
//
// A waiting caller keeps its own context:
//
//   - one whose context ends while it waits its turn leaves the queue,
//     unattempted, with an error matching [store.ErrUnavailable] and the
//     context's error;
//   - one whose context ends while its round trip is out returns at once
//     with an error matching [store.ErrUnavailable] and the context's
//     error: the call may have been applied, as the Store contract allows
//     for a call whose context ends.
//
// A round trip of waiting calls runs on a goroutine of its own, under a
// context of its own with no deadline and no values, which is cancelled
// once every caller it carries has left. So no caller's deadline or
// cancellation cuts short the others, and nothing runs for callers that
// have all gone. The goroutine ends when the round trip returns.
type group[P, R any] struct {
	pkg   string // the backend's package name, the prefix of its errors
	max   int
	name  func(P) string
	what  func([]P) string // the call, in errors: `acquire lease "a"`
	batch func(ctx context.Context, ps []P) ([]R, error)

	mu      sync.Mutex
	flights int           // round trips out
	queue   []*call[P, R] // waiting their turn, in the order they came
}

// call is one waiting caller.
type call[P, R any] struct {
	ps   []P
	done chan struct{} // closed once res and err are set; under the group's mutex
	res  []R
	err  error
	// trip is its round trip once it has gone; nil while it waits.
	trip *trip
}

// trip is one round trip of waiting calls.
type trip struct {
	cancel  context.CancelFunc
	waiting int // callers still waiting for its answer
}

// do carries out ps, at most max items, no name twice, alone or together
// with other calls, and returns their results in order.
func (g *group[P, R]) do(ctx context.Context, ps []P) ([]R, error) {
	g.mu.Lock()
	if g.flights < Flights {
		// Nobody waits: a round trip that lands sends the waiting at once.
		g.flights++
		g.mu.Unlock()
		res, err := g.send(ctx, ps)
		g.mu.Lock()
		g.land()
		g.mu.Unlock()
		return res, err
	}
	c := &call[P, R]{ps: ps, done: make(chan struct{})}
	g.queue = append(g.queue, c)
	g.mu.Unlock()
	select {
	case <-c.done:
		return c.res, c.err
	case <-ctx.Done():
		return g.leave(ctx, c)
	}
}

// leave answers c, whose context ended while it waited.
func (g *group[P, R]) leave(ctx context.Context, c *call[P, R]) ([]R, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-c.done: // answered meanwhile: the outcome is known
		return c.res, c.err
	default:
	}
	if c.trip == nil {
		g.queue = slices.DeleteFunc(g.queue, func(q *call[P, R]) bool { return q == c })
		return nil, fmt.Errorf("%s: %s not attempted (it waited for a round trip): %w: %w",
			g.pkg, g.what(c.ps), store.ErrUnavailable, ctx.Err())
	}
	if c.trip.waiting--; c.trip.waiting == 0 {
		c.trip.cancel()
	}
	return nil, fmt.Errorf("%s: %s: %w (it may have been applied): %w",
		g.pkg, g.what(c.ps), store.ErrUnavailable, ctx.Err())
}

// land counts a round trip back and sends the calls waiting, if any, in
// its place. g.mu must be held.
func (g *group[P, R]) land() {
	g.flights--
	if len(g.queue) == 0 {
		return
	}
	calls := g.take()
	ctx, cancel := context.WithCancel(context.Background())
	tr := &trip{cancel: cancel, waiting: len(calls)}
	var ps []P
	for _, c := range calls {
		c.trip = tr
		ps = append(ps, c.ps...)
	}
	g.flights++
	go func() {
		defer cancel()
		res, err := g.send(ctx, ps)
		g.mu.Lock()
		defer g.mu.Unlock()
		for _, c := range calls {
			if err != nil {
				c.err = err
			} else {
				c.res, res = res[:len(c.ps):len(c.ps)], res[len(c.ps):]
			}
			close(c.done)
		}
		g.land()
	}()
}

// take removes from the queue the calls of the next round trip: in queue
// order, every call that fits in max items and holds no name already
// taken, leaving the others in the queue, in order. The first call always
// fits. g.mu must be held.
func (g *group[P, R]) take() []*call[P, R] {
	var calls []*call[P, R]
	items := 0
	names := make(map[string]struct{})
	rest := g.queue[:0]
	for i, c := range g.queue {
		if items == g.max {
			rest = append(rest, g.queue[i:]...)
			break
		}
		if items+len(c.ps) > g.max || slices.ContainsFunc(c.ps, func(p P) bool { _, dup := names[g.name(p)]; return dup }) {
			rest = append(rest, c)
			continue
		}
		for _, p := range c.ps {
			names[g.name(p)] = struct{}{}
		}
		items += len(c.ps)
		calls = append(calls, c)
	}
	clear(g.queue[len(rest):])
	g.queue = rest
	return calls
}

// send runs one round trip, whose answer must have one result per item.
func (g *group[P, R]) send(ctx context.Context, ps []P) ([]R, error) {
	res, err := g.batch(ctx, ps)
	if err == nil && len(res) != len(ps) {
		panic(fmt.Sprintf("storekit: %s's batch answered %d results for %d items", g.pkg, len(res), len(ps)))
	}
	return res, err
}

// AcquireBatch carries out the acquisitions ps, each valid and no name
// twice, at most [AcquireBatchMax] of them, in one round trip under ctx. It
// returns one result per params, in order: the grant, or the error
// [store.Store.Acquire] would have returned for that lease, also when the
// round trip failed as a whole (each lease then gets that failure as its
// own call would have reported it, naming its own lease).
type AcquireBatch func(ctx context.Context, ps []store.AcquireParams) []store.AcquireResult

// AcquireGroup is group commit of [store.Store.Acquire] at a store, shared
// by every caller of that store, the rule a client applies to its own
// acquisitions: while fewer than [Flights] round trips are out, a
// call goes at once, alone, on its caller's goroutine and under its
// caller's context, as it would without the group; calls made while that
// many are out wait for one to come back and then go together, up to
// [AcquireBatchMax] to a round trip, in the order they came. So a lone call
// pays no wait, and many made at once by any number of callers take a few
// round trips of many leases each rather than one each. Two calls for the
// same name never go in one round trip: the later waits for the next.
//
// A waiting caller keeps its own context, and a round trip of waiting
// calls runs detached from theirs until the last of them has left, as
// group says: one whose context ends while it waits its turn is not
// attempted; one whose context ends while its round trip is out returns
// at once, and its acquisition may have been applied, as the Store
// contract allows for an Acquire whose context ends.
//
// The trust window of a grant is the caller's business: a client measures
// it from before it called (promise P3), so the wait only shortens it.
//
// Its methods are safe for concurrent use.
type AcquireGroup struct {
	g group[store.AcquireParams, store.AcquireResult]
}

// NewAcquireGroup returns a group that sends its calls through batch, for
// the backend package pkg (the prefix of its errors, such as "pgstore").
func NewAcquireGroup(pkg string, batch AcquireBatch) *AcquireGroup {
	return &AcquireGroup{g: group[store.AcquireParams, store.AcquireResult]{
		pkg:  pkg,
		max:  AcquireBatchMax,
		name: func(p store.AcquireParams) string { return p.Name },
		what: func(ps []store.AcquireParams) string { return fmt.Sprintf("acquire lease %q", ps[0].Name) },
		batch: func(ctx context.Context, ps []store.AcquireParams) ([]store.AcquireResult, error) {
			return batch(ctx, ps), nil
		},
	}}
}

// Acquire carries out p, which is valid, alone or together with others
// (see [AcquireGroup]).
func (g *AcquireGroup) Acquire(ctx context.Context, p store.AcquireParams) (store.Grant, error) {
	res, err := g.g.do(ctx, []store.AcquireParams{p})
	if err != nil {
		return store.Grant{}, err
	}
	return res[0].Grant, res[0].Err
}

// RenewBatch carries out the renewals ps, each valid and no name twice, at
// most [RenewBatchMax] of them, in one round trip under ctx, as
// [store.Store.Renew] does.
type RenewBatch func(ctx context.Context, ps []store.RenewParams) ([]store.RenewResult, error)

// RenewGroup is group commit of [store.Store.Renew] at a store, shared by
// every caller of that store, by the rule of [AcquireGroup]: while fewer
// than [Flights] round trips are out, a call (a client's batch) goes at
// once, alone, on its caller's goroutine and under its caller's context;
// calls made while that many are out wait for one to come back and then
// go together, up to [RenewBatchMax] renewals to a round trip, in the
// order they came, no lease twice in one round trip. So a thousand clients
// sharing a store, whose renewal rounds come due together, take a few
// round trips of many leases each rather than one each. A round trip that
// fails as a whole fails each call it carried with its error; a caller
// whose context ends while it waits leaves as an [AcquireGroup]'s callers do.
//
// A renewal's trust window is the caller's business: a client anchors it
// at the time it called (promise P3), so the wait only shortens it.
//
// Its methods are safe for concurrent use.
type RenewGroup struct {
	g group[store.RenewParams, store.RenewResult]
}

// NewRenewGroup returns a group that sends its calls through batch, for
// the backend package pkg (the prefix of its errors, such as "pgstore").
func NewRenewGroup(pkg string, batch RenewBatch) *RenewGroup {
	return &RenewGroup{g: group[store.RenewParams, store.RenewResult]{
		pkg:   pkg,
		max:   RenewBatchMax,
		name:  func(p store.RenewParams) string { return p.Name },
		what:  RenewOp,
		batch: batch,
	}}
}

// Renew carries out ps, a valid batch of at least one renewal, alone or
// together with other calls (see [RenewGroup]).
func (g *RenewGroup) Renew(ctx context.Context, ps []store.RenewParams) ([]store.RenewResult, error) {
	return g.g.do(ctx, ps)
}

// RenewOp names a renewal call in errors: `renew lease "a"`, or `renew 3
// leases`.
func RenewOp(ps []store.RenewParams) string {
	if len(ps) == 1 {
		return fmt.Sprintf("renew lease %q", ps[0].Name)
	}
	return fmt.Sprintf("renew %d leases", len(ps))
}
