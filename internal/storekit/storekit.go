// Package storekit holds the plumbing every backend of package store
// writes the same way: the closed gate (a Close after which every call fails
// with [store.ErrClosed]), the prologue and epilogue of
// [store.Notifier.Listen], the fan-out of a batch renewed lease by lease,
// group commit of the acquisitions and renewals many callers make at once
// ([AcquireGroup], [RenewGroup]), and Get and List over the in-memory stores' maps of
// leases. It has one job: keep those rules in one place.
package storekit

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/tenure-dev/tenure/store"
)

// Gate is a store's closed gate. Create it with [NewGate]; its methods are
// safe for concurrent use.
type Gate struct {
	pkg    string // the backend's package name, the prefix of its errors
	ctor   string // what makes a new store, named in the closed error
	ctx    context.Context
	cancel context.CancelFunc
	closed atomic.Bool
}

// NewGate returns an open gate for the backend package pkg (the prefix of
// its errors, such as "redisstore"), whose stores ctor makes (such as
// "redisstore.New").
func NewGate(pkg, ctor string) *Gate {
	ctx, cancel := context.WithCancel(context.Background())
	return &Gate{pkg: pkg, ctor: ctor, ctx: ctx, cancel: cancel}
}

// Close shuts the gate and ends [Gate.Context]. It reports whether this
// call shut it: only the first does.
func (g *Gate) Close() bool {
	if g.closed.Swap(true) {
		return false
	}
	g.cancel()
	return true
}

// Closed reports whether the gate is shut.
func (g *Gate) Closed() bool { return g.closed.Load() }

// Context is done once the gate is shut: background work of the store
// (watches, subscriptions, polls) runs under it.
func (g *Gate) Context() context.Context { return g.ctx }

// Check refuses op on a shut gate with an error matching
// [store.ErrClosed].
func (g *Gate) Check(op string) error {
	if g.closed.Load() {
		return g.closedError(op)
	}
	return nil
}

// Begin refuses op on a shut gate (see [Gate.Check]) and, before anything
// is attempted, with a context that is already done (an error matching
// [store.ErrUnavailable] that says nothing was attempted).
func (g *Gate) Begin(ctx context.Context, op string) error {
	if err := g.Check(op); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: %s not attempted: %w: %w", g.pkg, op, store.ErrUnavailable, err)
	}
	return nil
}

func (g *Gate) closedError(op string) error {
	return fmt.Errorf("%s: %s on a closed store; create a new one with %s: %w", g.pkg, op, g.ctor, store.ErrClosed)
}

// Listen runs what every [store.Notifier.Listen] shares around the
// backend's own loop: it refuses a nil notify ([store.ErrInvalid]) and a
// shut gate, runs loop under a context that ends when ctx does or when the
// gate is shut, and then returns what the contract asks: an error matching
// [store.ErrClosed] when the gate was shut, ctx's error otherwise. loop
// must return soon after its context ends; it reports subscriptions with
// notify(store.Notice{}) itself.
func (g *Gate) Listen(ctx context.Context, notify func(store.Notice), loop func(ctx context.Context, notify func(store.Notice))) error {
	if notify == nil {
		return fmt.Errorf("%s: listen: %w: notify function is nil", g.pkg, store.ErrInvalid)
	}
	if err := g.Check("listen"); err != nil {
		return err
	}
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(g.ctx, cancel)
	defer stop()
	loop(lctx, notify)
	if err := g.Check("listen"); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	// The loop ended on its own: the contract allows no such return.
	return fmt.Errorf("%s: listen: %w: the listener stopped unexpectedly", g.pkg, store.ErrUnavailable)
}

// Each calls one(i) for every i in [0, n), at most limit calls at once,
// and returns the first error one returned (by index), after every call
// has returned: the fan-out of a store that renews a batch lease by lease
// (natsstore, k8sstore).
func Each(n, limit int, one func(i int) error) error {
	errs := make([]error, n)
	sem := make(chan struct{}, limit)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = one(i)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
