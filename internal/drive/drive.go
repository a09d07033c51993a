// Package drive is the one glue between the lease engine and a store: it
// carries out the engine's store actions ([engine.SendAcquire],
// [engine.SendRenew], [engine.SendRelease], [engine.SendCheck]) and turns what the store
// answered into the events that feed the engine back.
//
// The client's runtime and the simulation both call it, so the seeded
// simulation runs exercise the glue that ships: batch splitting, the
// classification of errors that retrying cannot cure, and the checks that
// a store's answers are answers to what was asked. An answer that fails
// those checks is treated as a store failure, which ends the tenures it
// concerns (promise P3): a store that misreports is never trusted.
//
// Scheduling is the caller's: the runtime runs each call on its own
// goroutine with a timeout ([Timeout]); the simulation delivers it over a
// simulated network. A call that cannot complete (a timeout, a connection
// reset) is answered with [Failed].
package drive

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/tenure-dev/tenure/internal/engine"
	"github.com/tenure-dev/tenure/store"
)

// Call carries out one store action against s and returns the event that
// answers it. a must be a [engine.SendAcquire], [engine.SendRenew],
// [engine.SendRelease] or [engine.SendCheck]; Call panics on anything else, a programmer error.
func Call(ctx context.Context, s store.Store, a engine.Action) engine.Event {
	switch a := a.(type) {
	case engine.SendAcquire:
		return acquire(ctx, s, a)
	case engine.SendRenew:
		return renew(ctx, s, a)
	case engine.SendRelease:
		err := s.Release(ctx, store.ReleaseParams{Name: a.Name, Holder: a.Holder, Token: a.Token})
		return engine.ReleaseDone{Name: a.Name, Token: a.Token, Err: err}
	case engine.SendCheck:
		rec, err := s.Get(ctx, a.Name)
		if errors.Is(err, store.ErrNotFound) {
			// The store lost the lease (a restart without its data): it
			// is not held.
			rec, err = store.Record{}, nil
		}
		return engine.CheckDone{Name: a.Name, Token: a.Token, Record: rec, Err: err}
	}
	panic(fmt.Sprintf("drive: %T is not a store action", a))
}

// Failed returns the event that answers a store action whose call could
// not complete with err: its outcome is unknown.
func Failed(a engine.Action, err error) engine.Event {
	switch a := a.(type) {
	case engine.SendAcquire:
		return engine.AcquireDone{Name: a.Name, Holder: a.Holder, SentAt: a.SentAt, Err: err}
	case engine.SendRenew:
		return engine.RenewDone{SentAt: a.SentAt, Items: a.Items, Err: err}
	case engine.SendRelease:
		return engine.ReleaseDone{Name: a.Name, Token: a.Token, Err: err}
	case engine.SendCheck:
		return engine.CheckDone{Name: a.Name, Token: a.Token, Err: err}
	}
	panic(fmt.Sprintf("drive: %T is not a store action", a))
}

// Timeout returns how long the call for a store action may take, measured
// from now on the monotonic clock: a renewal until the earliest local
// deadline of its batch (an answer after it is of no use), anything else
// one renew interval. It is at least a millisecond.
func Timeout(a engine.Action, now, renewInterval time.Duration) time.Duration {
	d := renewInterval
	if r, ok := a.(engine.SendRenew); ok {
		d = r.Deadline - now
	}
	return max(d, time.Millisecond)
}

// Permanent reports whether err is one that retrying cannot cure: bad
// input, a store that is not set up, a store that was closed. A campaign
// ends with such an error instead of backing off.
func Permanent(err error) bool {
	return errors.Is(err, store.ErrInvalid) || errors.Is(err, store.ErrNotMigrated) || errors.Is(err, store.ErrClosed)
}

func acquire(ctx context.Context, s store.Store, a engine.SendAcquire) engine.AcquireDone {
	g, err := s.Acquire(ctx, acquireParams(a))
	return acquired(a, g, err)
}

func acquireParams(a engine.SendAcquire) store.AcquireParams {
	return store.AcquireParams{Name: a.Name, Holder: a.Holder, TTL: a.TTL, Payload: a.Payload, Wait: a.Wait}
}

// AcquireBatch attempts the acquisitions of several [engine.SendAcquire]
// actions through s, [store.MaxRenewBatch] at a time, and returns the
// [engine.AcquireDone] that answers each, in order. When a call fails as a
// whole, or answers with the wrong number of results, every attempt of
// that call is answered with its error (one matching [store.ErrUnavailable]
// for a miscount): its outcome is unknown, as a single attempt's would be.
func AcquireBatch(ctx context.Context, s store.BatchAcquirer, as []engine.SendAcquire) []engine.Event {
	evs := make([]engine.Event, 0, len(as))
	for chunk := range slices.Chunk(as, store.MaxRenewBatch) {
		ps := make([]store.AcquireParams, len(chunk))
		for i, a := range chunk {
			ps[i] = acquireParams(a)
		}
		res, err := s.AcquireBatch(ctx, ps)
		if err == nil && len(res) != len(ps) {
			err = fmt.Errorf("%w: the store answered %d results for an acquire batch of %d", store.ErrUnavailable, len(res), len(ps))
		}
		for i, a := range chunk {
			if err != nil {
				evs = append(evs, acquired(a, store.Grant{}, err))
				continue
			}
			evs = append(evs, acquired(a, res[i].Grant, res[i].Err))
		}
	}
	return evs
}

// acquired is the event that answers a, which the store answered with g or
// err.
func acquired(a engine.SendAcquire, g store.Grant, err error) engine.AcquireDone {
	d := engine.AcquireDone{Name: a.Name, Holder: a.Holder, SentAt: a.SentAt}
	var held *store.HeldError
	switch {
	case err == nil:
		err = checkGrant(a, g)
		if err == nil {
			g.Name, g.Holder = a.Name, a.Holder
			d.Grant = &g
			return d
		}
	case errors.As(err, &held):
		h := *held
		h.Name = a.Name
		d.Held = &h
		return d
	}
	d.Err, d.Permanent = err, Permanent(err)
	return d
}

// checkGrant makes sure a grant is one: a positive token, the first seq of
// a tenure, time left.
func checkGrant(a engine.SendAcquire, g store.Grant) error {
	if g.Token <= 0 || g.Seq != 1 || g.Remaining <= 0 || g.Remaining > a.TTL {
		return fmt.Errorf("%w: store granted lease %q with token %d, seq %d and %s remaining of a %s TTL; that is no new tenure",
			store.ErrUnavailable, a.Name, g.Token, g.Seq, g.Remaining, a.TTL)
	}
	return nil
}

// renewFlights is how many of a large renewal's batches are out at once.
// Two keep a store that works on both (PostgreSQL on two cores, say)
// busy, and a round of 100,000 leases, ten batches, takes half as long.
const renewFlights = 2

func renew(ctx context.Context, s store.Store, a engine.SendRenew) engine.RenewDone {
	d := engine.RenewDone{SentAt: a.SentAt, Items: a.Items}
	results := make([]store.RenewResult, len(a.Items))
	errs := make([]error, (len(a.Items)+store.MaxRenewBatch-1)/store.MaxRenewBatch)
	renewChunk := func(i int) {
		from := i * store.MaxRenewBatch
		ps := a.Items[from:min(from+store.MaxRenewBatch, len(a.Items))]
		res, err := s.Renew(ctx, ps)
		if err == nil {
			err = checkRenewed(ps, res)
		}
		if err != nil {
			errs[i] = err
			return
		}
		for j, r := range res {
			r.Renewed = renewed(ps[j], r)
			results[from+j] = r
		}
	}
	if len(errs) == 1 {
		renewChunk(0)
	} else {
		slots := make(chan struct{}, renewFlights)
		var wg sync.WaitGroup
		for i := range errs {
			slots <- struct{}{}
			wg.Go(func() {
				defer func() { <-slots }()
				renewChunk(i)
			})
		}
		wg.Wait()
	}
	if err := errors.Join(errs...); err != nil {
		d.Err = err
		return d
	}
	d.Results = results
	return d
}

// checkRenewed makes sure res answers ps: one result per request, in order,
// and every renewal reported is the one asked for, its seq advanced by one.
func checkRenewed(ps []store.RenewParams, res []store.RenewResult) error {
	if len(res) != len(ps) {
		return fmt.Errorf("%w: store answered %d results for %d renewals", store.ErrUnavailable, len(res), len(ps))
	}
	for i, r := range res {
		p := ps[i]
		if r.Grant.Name != "" && r.Grant.Name != p.Name {
			return fmt.Errorf("%w: store answered renewal %d with lease %q instead of %q", store.ErrUnavailable, i, r.Grant.Name, p.Name)
		}
		if r.Renewed && (r.Grant.Holder != p.Holder || r.Grant.Token != p.Token || r.Grant.Seq != p.Seq+1 || r.Grant.Remaining <= 0) {
			return fmt.Errorf("%w: store renewed lease %q as %s, token %d, seq %d with %s remaining; asked for %s, token %d, seq %d",
				store.ErrUnavailable, p.Name, r.Grant.Holder, r.Grant.Token, r.Grant.Seq, r.Grant.Remaining, p.Holder, p.Token, p.Seq+1)
		}
	}
	return nil
}

// ReleaseBatch releases the tenures of several [engine.SendRelease]
// actions through s, [store.MaxRenewBatch] at a time, one call after the
// other, each bounded by each under ctx (a batch that does not answer in
// time leaves its leases to expire, and the next batch still gets its
// own time), and returns the [engine.ReleaseDone] that answers each, in
// order. When the store answers a call with the wrong number of results,
// every release of that call is answered with an error matching
// [store.ErrUnavailable]: its outcome is unknown, and the lease is left
// to expire.
func ReleaseBatch(ctx context.Context, s store.BatchReleaser, as []engine.SendRelease, each time.Duration) []engine.Event {
	evs := make([]engine.Event, 0, len(as))
	for chunk := range slices.Chunk(as, store.MaxRenewBatch) {
		ps := make([]store.ReleaseParams, len(chunk))
		for i, a := range chunk {
			ps[i] = store.ReleaseParams{Name: a.Name, Holder: a.Holder, Token: a.Token}
		}
		cctx, cancel := context.WithTimeout(ctx, each)
		errs, err := s.ReleaseBatch(cctx, ps)
		cancel()
		if err == nil && len(errs) != len(ps) {
			err = fmt.Errorf("%w: the store answered %d results for a release batch of %d", store.ErrUnavailable, len(errs), len(ps))
		}
		for i, a := range chunk {
			e := err
			if e == nil {
				e = errs[i]
			}
			evs = append(evs, engine.ReleaseDone{Name: a.Name, Token: a.Token, Err: e})
		}
	}
	return evs
}
