package storekit

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/tenure-dev/tenure/store"
)

// Group commit of acquisitions (see [AcquireGroup]).
const (
	// AcquireFlights is how many acquisition round trips a group has out
	// at once.
	AcquireFlights = 2
	// AcquireBatchMax is the most acquisitions one round trip of a group
	// carries.
	AcquireBatchMax = 1000
)

// AcquireBatch carries out the acquisitions ps, each valid and no name
// twice, at most [AcquireBatchMax] of them, in one round trip under ctx. It
// returns one result per params, in order: the grant, or the error
// [store.Store.Acquire] would have returned for that lease, also when the
// round trip failed as a whole (each lease then gets that failure as its
// own call would have reported it, naming its own lease).
type AcquireBatch func(ctx context.Context, ps []store.AcquireParams) []store.AcquireResult

// AcquireGroup is group commit of [store.Store.Acquire] at a store, shared
// by every caller of that store, the rule a client applies to its own
// acquisitions: while fewer than [AcquireFlights] round trips are out, a
// call goes at once, alone, on its caller's goroutine and under its
// caller's context, as it would without the group; calls made while that
// many are out wait for one to come back and then go together, up to
// [AcquireBatchMax] to a round trip, in the order they came. So a lone call
// pays no wait, and many made at once by any number of callers take a few
// round trips of many leases each rather than one each. Two calls for the
// same name never go in one round trip: the later waits for the next.
//
// A waiting caller keeps its own context:
//
//   - one whose context ends while it waits its turn leaves the queue,
//     unattempted, with an error matching [store.ErrUnavailable] and the
//     context's error;
//   - one whose context ends while its round trip is out returns at once
//     with an error matching [store.ErrUnavailable] and the context's
//     error: the acquisition may have been applied, as the Store contract
//     allows for an Acquire whose context ends.
//
// A round trip of waiting calls runs on a goroutine of its own, under a
// context of its own with no deadline and no values, which is cancelled
// once every caller it carries has left. So no caller's deadline or
// cancellation cuts short the others (the round trip runs until the
// latest of them has ended), and nothing runs for callers that have all
// gone. The goroutine ends when the round trip returns.
//
// The trust window of a grant is the caller's business: a client measures
// it from before it called (promise P3), so the wait only shortens it.
//
// Its methods are safe for concurrent use.
type AcquireGroup struct {
	pkg   string // the backend's package name, the prefix of its errors
	batch AcquireBatch

	mu      sync.Mutex
	flights int            // round trips out
	queue   []*acquireCall // waiting their turn, in the order they came
}

// acquireCall is one waiting caller.
type acquireCall struct {
	p    store.AcquireParams
	done chan struct{} // closed once res is set; under the group's mutex
	res  store.AcquireResult
	// trip is its round trip once it has gone; nil while it waits.
	trip *acquireTrip
}

// acquireTrip is one round trip of waiting calls.
type acquireTrip struct {
	cancel  context.CancelFunc
	waiting int // callers still waiting for its answer
}

// NewAcquireGroup returns a group that sends its calls through batch, for
// the backend package pkg (the prefix of its errors, such as "pgstore").
func NewAcquireGroup(pkg string, batch AcquireBatch) *AcquireGroup {
	return &AcquireGroup{pkg: pkg, batch: batch}
}

// Acquire carries out p, which is valid, alone or together with others
// (see [AcquireGroup]).
func (g *AcquireGroup) Acquire(ctx context.Context, p store.AcquireParams) (store.Grant, error) {
	g.mu.Lock()
	if g.flights < AcquireFlights {
		// Nobody waits: a round trip that lands sends the waiting at once.
		g.flights++
		g.mu.Unlock()
		res := g.send(ctx, []store.AcquireParams{p})[0]
		g.mu.Lock()
		g.land()
		g.mu.Unlock()
		return res.Grant, res.Err
	}
	c := &acquireCall{p: p, done: make(chan struct{})}
	g.queue = append(g.queue, c)
	g.mu.Unlock()
	select {
	case <-c.done:
		return c.res.Grant, c.res.Err
	case <-ctx.Done():
		return g.leave(ctx, c)
	}
}

// leave answers c, whose context ended while it waited.
func (g *AcquireGroup) leave(ctx context.Context, c *acquireCall) (store.Grant, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-c.done: // answered meanwhile: the outcome is known
		return c.res.Grant, c.res.Err
	default:
	}
	if c.trip == nil {
		g.queue = slices.DeleteFunc(g.queue, func(q *acquireCall) bool { return q == c })
		return store.Grant{}, fmt.Errorf("%s: acquire lease %q not attempted (it waited for a round trip): %w: %w",
			g.pkg, c.p.Name, store.ErrUnavailable, ctx.Err())
	}
	if c.trip.waiting--; c.trip.waiting == 0 {
		c.trip.cancel()
	}
	return store.Grant{}, fmt.Errorf("%s: acquire lease %q: %w (it may have been applied): %w",
		g.pkg, c.p.Name, store.ErrUnavailable, ctx.Err())
}

// land counts a round trip back and sends the calls waiting, if any, in
// its place. g.mu must be held.
func (g *AcquireGroup) land() {
	g.flights--
	if len(g.queue) == 0 {
		return
	}
	calls := g.take()
	ctx, cancel := context.WithCancel(context.Background())
	trip := &acquireTrip{cancel: cancel, waiting: len(calls)}
	ps := make([]store.AcquireParams, len(calls))
	for i, c := range calls {
		c.trip, ps[i] = trip, c.p
	}
	g.flights++
	go func() {
		defer cancel()
		res := g.send(ctx, ps)
		g.mu.Lock()
		defer g.mu.Unlock()
		for i, c := range calls {
			c.res = res[i]
			close(c.done)
		}
		g.land()
	}()
}

// take removes from the queue the calls of the next round trip: the
// first [AcquireBatchMax] of the queue, leaving in it, in order, every call
// for a name already taken. g.mu must be held.
func (g *AcquireGroup) take() []*acquireCall {
	calls := make([]*acquireCall, 0, min(len(g.queue), AcquireBatchMax))
	names := make(map[string]struct{}, cap(calls))
	rest := g.queue[:0]
	for i, c := range g.queue {
		if len(calls) == AcquireBatchMax {
			rest = append(rest, g.queue[i:]...)
			break
		}
		if _, dup := names[c.p.Name]; dup {
			rest = append(rest, c)
			continue
		}
		names[c.p.Name] = struct{}{}
		calls = append(calls, c)
	}
	clear(g.queue[len(rest):])
	g.queue = rest
	return calls
}

// send runs one round trip, whose answer must have one result per params.
func (g *AcquireGroup) send(ctx context.Context, ps []store.AcquireParams) []store.AcquireResult {
	res := g.batch(ctx, ps)
	if len(res) != len(ps) {
		panic(fmt.Sprintf("storekit: %s's acquire batch answered %d results for %d leases", g.pkg, len(res), len(ps)))
	}
	return res
}
