package tenure

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tenure-dev/tenure/internal/engine"
	"github.com/tenure-dev/tenure/internal/identity"
	"github.com/tenure-dev/tenure/store"
)

// Client holds leases on one [store.Store] for one holder process. Create it with
// [New], run its loop with [Client.Run], and take leases with
// [Client.Acquire], [Client.Campaign] or [Client.Do]. All its leases are
// renewed together, in one store round trip per renew interval.
type Client struct {
	store store.Store
	cfg   Config
	eng   *engine.Engine // belongs to whoever holds the turn of run
	id    atomic.Pointer[store.Holder]
	run   atomic.Pointer[runner] // set once Run has started

	mu    sync.Mutex
	inbox []request
	wake  chan struct{}

	started atomic.Bool
	stopped chan struct{}
}

// request is an engine event from an API call, with the channel that
// answers it: a Want, Unwant or adoption, a ChainWriteBegin, a Release.
type request struct {
	event engine.Event
	reply chan acquireResult
	// guarded marks a Want made by [Client.Do]: the tenure it is granted
	// has work running under it, which shutdown waits for.
	guarded  bool
	chain    chan chainGrant
	released chan error
}

type acquireResult struct {
	lease *Lease
	err   error
}

// New returns a client for s. It validates cfg (see [Config.Validate]),
// and that cfg.TTL is one the store can keep: not below its floor
// ([store.TTLFloor]) and a whole number of the unit it keeps TTLs in
// ([store.TTLUnit]: 2.5s is refused on etcd, which keeps whole seconds,
// with a [*store.TTLUnitError]). It starts nothing; call [Client.Run].
func New(s store.Store, cfg Config) (*Client, error) {
	if s == nil {
		return nil, fmt.Errorf("%w: store is nil", ErrInvalid)
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if floor := store.MinTTLOf(s); cfg.TTL < floor {
		return nil, fmt.Errorf("%w: TTL (%s) is below the store's minimum lease of %s; raise TTL", ErrInvalid, cfg.TTL, floor)
	}
	// A TTL the store would round is refused here rather than accepted
	// up to the store's rounding: the holder and its followers then count
	// with the TTL the store keeps, and the grant check that refuses a
	// grant longer than asked (a store misreporting) stays exact. The
	// user learns of it at once, with the TTLs to use instead, and not
	// from an acquisition that could never succeed.
	if err := store.CheckTTLUnit(s, cfg.TTL); err != nil {
		return nil, err
	}
	c := &Client{
		store:   s,
		cfg:     cfg,
		wake:    make(chan struct{}, 1),
		stopped: make(chan struct{}),
	}
	c.eng = engine.New(engine.Config{
		Label:            cfg.Label,
		TTL:              cfg.TTL,
		RenewInterval:    cfg.RenewInterval,
		Grace:            cfg.Grace,
		SuspendTolerance: cfg.SuspendTolerance,
		ProgressTimeout:  cfg.ProgressTimeout,
		Payload:          cfg.Payload,
		NewInstance:      identity.New,
		Jitter:           jitter,
	})
	h := c.eng.Holder()
	c.id.Store(&h)
	return c, nil
}

func jitter(max time.Duration) time.Duration {
	if max <= 0 {
		return 0
	}
	return rand.N(max)
}

// Holder returns the identity the client acquires with now. It changes
// after a revoke, a detected suspension or clone.
func (c *Client) Holder() Holder { return *c.id.Load() }

// Config returns the configuration in force, defaults filled in.
func (c *Client) Config() Config { return c.cfg }

// Acquire tries once to take the lease name. It returns the tenure, a
// [*HeldError] naming the current holder and its remaining time when the
// lease is held, or the store's error.
//
// Acquire calls made at once share round trips on a store that acquires
// in batches ([store.BatchAcquirer]): the client keeps at most two
// acquisition round trips out, and the attempts made meanwhile go together
// in the next, up to 1,000 to a round trip (group commit). A lone call
// goes at once.
func (c *Client) Acquire(ctx context.Context, name string) (*Lease, error) {
	return c.want(ctx, name, false, false)
}

// Campaign waits until the lease name is acquired or ctx is done. It does
// not poll blindly: after a refusal it retries when the holder's time runs
// out by the store's clock (with jitter), or as soon as the store announces
// a release or takeover. Store errors are retried with backoff, except
// [ErrInvalid] and [ErrNotMigrated], which are returned. Like Acquire and
// Do, it returns [ErrNotRunning] when the client's Run has not started
// within one TTL of the call.
func (c *Client) Campaign(ctx context.Context, name string) (*Lease, error) {
	return c.want(ctx, name, true, false)
}

// want asks for the lease name; guarded marks the tenure as one whose
// work [Client.Do] runs and releases it after (see [runner.shutdown]).
func (c *Client) want(ctx context.Context, name string, campaign, guarded bool) (*Lease, error) {
	if err := store.ValidateName(name); err != nil {
		return nil, err
	}
	reply := make(chan acquireResult, 1)
	c.submit(request{event: engine.Want{Name: name, Campaign: campaign}, reply: reply, guarded: guarded})
	var notRunning <-chan time.Time
	if !c.started.Load() {
		// Run may be about to start (go client.Run(ctx) just above the
		// call); give it one TTL before calling it forgotten.
		t := time.NewTimer(c.cfg.TTL)
		defer t.Stop()
		notRunning = t.C
	}
	var cause error
	for cause == nil {
		select {
		case r := <-reply:
			return r.lease, r.err
		case <-c.stopped:
			return nil, fmt.Errorf("%w: the client's Run has returned", ErrClosed)
		case <-ctx.Done():
			cause = ctx.Err()
		case <-notRunning:
			notRunning = nil
			if !c.started.Load() {
				cause = fmt.Errorf("%w: waited %s for it to start", ErrNotRunning, c.cfg.TTL)
			}
		}
	}
	// Withdraw, then take the one answer the loop still owes: a tenure
	// granted in the meantime is given back.
	c.enqueue(request{event: engine.Unwant{Name: name}, reply: reply})
	if !c.started.Load() {
		// No loop has drained the inbox yet: whenever one starts, it
		// sees the request and its withdrawal together, and owes nothing.
		if errors.Is(cause, ErrNotRunning) {
			return nil, fmt.Errorf("%w; call go client.Run(ctx) before Acquire, Campaign or Do", cause)
		}
		return nil, fmt.Errorf("%w (the client's Run never started: call go client.Run(ctx) first)", cause)
	}
	select {
	case r := <-reply:
		if r.lease != nil {
			_ = r.lease.Release(context.WithoutCancel(ctx))
		}
	case <-c.stopped:
	}
	if errors.Is(cause, ErrNotRunning) {
		// Run started just as the wait ran out: the campaign was sound.
		return c.want(ctx, name, campaign, guarded)
	}
	return nil, cause
}

// Do campaigns for the lease name, runs fn under it, and releases it when fn
// returns. fn's ctx is cancelled the moment the tenure is lost, with the
// [*LostError] as its cause; pass l.Token() with every write to a fenced
// resource. Do returns fn's error, joined with the LostError if the tenure
// was lost while fn ran (so errors.Is(err, ErrLost) tells).
//
// When the client's Run ends while fn runs (its ctx is done), the tenure
// ends with [LossClosed], which cancels fn's ctx, and Run waits for fn to
// return before it releases the lease, so the next holder never starts
// while fn still runs. Run waits up to the tenure's remaining trusted time
// (its local deadline; renewals have stopped): a lease whose fn has not
// returned by then is not released, and expires at the store by its TTL.
func (c *Client) Do(ctx context.Context, name string, fn func(ctx context.Context, l *Lease) error) error {
	l, err := c.want(ctx, name, true, true)
	if err != nil {
		return err
	}
	fctx, cancel := l.WithContext(ctx)
	err = fn(fctx, l)
	cancel()
	lost := l.Err()
	if rerr := l.Release(context.WithoutCancel(ctx)); rerr != nil && lost == nil {
		lost = rerr
	}
	if lost != nil {
		return errors.Join(err, lost)
	}
	return err
}

// Revoke is the hook for wake, resume, restore and fork: it drops every
// tenure at once (their Done channels close with [LossRevoked]) and
// regenerates the identity. It does not release the leases at the store: a
// restored or forked process cannot know whether it is the copy that still
// does the work, so they expire by their TTL (or are released by that
// copy). Campaigns in progress go on with the new identity; held work must
// campaign again, and gets a new token.
func (c *Client) Revoke() {
	c.enqueue(request{event: engine.Revoke{}})
}

// enqueue leaves r for the loop and wakes it.
func (c *Client) enqueue(r request) {
	c.mu.Lock()
	c.inbox = append(c.inbox, r)
	c.mu.Unlock()
	c.poke()
}

// submit steps the engine with q on the calling goroutine while Run runs
// (see [runner.turn]), and leaves it for the loop otherwise.
func (c *Client) submit(q request) {
	if r := c.run.Load(); r != nil && r.turn(true, func() { r.handle(q) }) {
		return
	}
	c.enqueue(q)
}

// post is submit for the store's listener: it steps the engine only when
// nobody else is, and leaves q for the loop otherwise, so that the
// listener keeps up with the store's announcements.
func (c *Client) post(q request) {
	if r := c.run.Load(); r != nil && r.turn(false, func() { r.handle(q) }) {
		return
	}
	c.enqueue(q)
}

// poke wakes the loop.
func (c *Client) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}
