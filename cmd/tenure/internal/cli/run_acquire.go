package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/tenure-dev/tenure"
	"github.com/tenure-dev/tenure/cmd/tenure/internal/storeopen"
	"github.com/tenure-dev/tenure/store"
)

// acquire takes the lease once, or waits for it with --wait, until a
// signal arrives.
func (o *runOptions) acquire(ctx context.Context, e *env, client *tenure.Client, sigs <-chan os.Signal, opened *storeopen.Opened) (*tenure.Lease, error) {
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	if o.wait && *o.waitTimeout > 0 {
		actx, cancel = context.WithTimeout(actx, *o.waitTimeout)
		defer cancel()
	}
	type result struct {
		lease *tenure.Lease
		err   error
	}
	results := make(chan result, 1)
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		var r result
		r.lease, r.err = o.take(actx, e, client)
		results <- r
	})
	var r result
	var s os.Signal
wait:
	for {
		select {
		case r = <-results:
			break wait
		case got := <-sigs:
			// WINCH, CONT, USR1 and USR2 have no command to go to yet.
			if got == RevokeSignal || slices.Contains(interrupting, got) {
				s = got
				break wait
			}
		}
	}
	if s != nil {
		cancel()
		if r = <-results; r.lease != nil {
			releaseQuietly(ctx, r.lease)
		}
		o.out.Ended = endedInterrupted
		if sig, ok := s.(syscall.Signal); ok {
			o.out.Signal = unix.SignalName(sig)
		}
		return nil, &exitError{code: ExitSignalBase + signum(s), err: fmt.Errorf("interrupted by %s while waiting for lease %q; nothing was run", s, o.name)}
	}
	var held *store.HeldError
	var all *tenure.SlotsHeldError
	switch {
	case r.err == nil:
		return r.lease, nil
	case errors.As(r.err, &all):
		return nil, o.slotsHeld(all)
	case errors.As(r.err, &held):
		o.out.heldElsewhere(endedHeld, held.Holder, held.Token, held.Remaining)
		code := ExitNotAcquired
		if o.heldExit.set {
			code = o.heldExit.code
		}
		return nil, &exitError{code: code, err: fmt.Errorf("%s; not acquired (use --wait to wait for it)", heldLine(o.name, held))}
	case ctx.Err() != nil:
		o.out.Ended = endedInterrupted
		return nil, fmt.Errorf("stopped while waiting for lease %q (%w); nothing was run", o.name, ctx.Err())
	case r.err != nil && errors.Is(actx.Err(), context.DeadlineExceeded):
		o.out.Ended = endedWaitTimeout
		return nil, &exitError{code: ExitNotAcquired, err: o.gaveUp(ctx, opened)}
	}
	return nil, opened.Target.Wrap(r.err)
}

// gaveUp describes a --wait-timeout that ran out, naming the holder when
// the store says who it is.
func (o *runOptions) gaveUp(ctx context.Context, opened *storeopen.Opened) error {
	sctx, cancel := withStoreTimeout(ctx)
	defer cancel()
	rec, err := opened.Store.Get(sctx, o.name)
	if err != nil || rec.State != store.StateHeld {
		return fmt.Errorf("gave up waiting for lease %q after --wait-timeout %s; not acquired", o.name, *o.waitTimeout)
	}
	o.out.heldElsewhere(endedWaitTimeout, rec.Holder, rec.Token, rec.Remaining)
	return fmt.Errorf("gave up waiting for lease %q after --wait-timeout %s: it is held by %s with token %d for another %s by the store's clock; not acquired",
		o.name, *o.waitTimeout, rec.Holder, rec.Token, remaining(rec.Remaining))
}

// reportHolders reports each change of the lease's holder while run waits
// for it, until ctx ends: one line on standard error, or one log record
// with -v or --log-format json. first is the holder the first attempt met
// (already reported), nil when it failed otherwise; run's own grant is
// not a change worth reporting (the command's start says it).
func (o *runOptions) reportHolders(ctx context.Context, e *env, client *tenure.Client, first *store.HeldError) {
	var last tenure.Observation
	if first != nil {
		last = tenure.Observation{Name: o.name, Held: true, Holder: first.Holder, Token: first.Token}
	}
	// Observe ends with ctx, or with a store that is closed or not set
	// up, which the campaign reports.
	_ = client.Observe(ctx, o.name, func(ob tenure.Observation) {
		same := ob.Held == last.Held && ob.Holder == last.Holder && ob.Token == last.Token
		if same || (ob.Held && ob.Holder == client.Holder()) || ctx.Err() != nil {
			return
		}
		last = ob
		if e.reports != nil {
			attrs := []any{"lease", o.name, "held", ob.Held}
			if ob.Held {
				attrs = append(attrs, "holder", ob.Holder.String(), "token", int64(ob.Token), "remaining", ob.Remaining)
			}
			e.reports.Info("lease holder changed", attrs...)
			return
		}
		if !ob.Held {
			e.errorf("lease %q is not held now by the store's clock; still waiting to take it", o.name)
			return
		}
		e.errorf("lease %q is now held by %s with token %d for another %s by the store's clock; still waiting for it",
			o.name, ob.Holder, ob.Token, remaining(ob.Remaining))
	})
}

// heldLine says who holds lease name, as the store refused it: a holder,
// or, just after a release, the follower in line the store keeps it for.
func heldLine(name string, held *store.HeldError) string {
	if held.Holder == (store.Holder{}) && held.Next != (store.Holder{}) {
		return fmt.Sprintf("lease %q was just released and is kept for the next follower in line, %s, for another %s by the store's clock",
			name, held.Next, remaining(held.Remaining))
	}
	return fmt.Sprintf("lease %q is held by %s with token %d for another %s by the store's clock",
		name, held.Holder, held.Token, remaining(held.Remaining))
}
