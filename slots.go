package tenure

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/tenure-dev/tenure/internal/drive"
	"github.com/tenure-dev/tenure/internal/engine"
	"github.com/tenure-dev/tenure/store"
)

// SlotsHeldError reports that every slot of a name is held; it matches
// [ErrHeld]. See [store.SlotsHeldError].
type SlotsHeldError = store.SlotsHeldError

// SlotName returns the lease name of slot k of name, "name#k" (k from 0):
// the name under which the slot's tenures, tokens, fences and history are
// kept. See [store.SlotName].
func SlotName(name string, k int) string { return store.SlotName(name, k) }

// Slot returns the slot index of the lease, from 0, and true when it is
// a slot of a name (its name is "name#k", see [SlotName]); 0 and false
// for a lease of a plain name.
func (l *Lease) Slot() (int, bool) {
	_, k, ok := store.ParseSlotName(l.name)
	return k, ok
}

// AcquireSlot tries once to take one of the n slots of name: the first
// free one, in one store round trip on a store that takes slots in one
// step ([store.SlotAcquirer]: PostgreSQL, SQLite, Redis), else trying
// slot 0, 1, … in turn (see [store.AcquireSlot]). Each slot is a lease of
// its own, named [SlotName](name, k): its own token sequence, renewal
// chain and fence, renewed with the client's other leases; [Lease.Slot]
// says which one was taken. At most n tenures of name are held at once.
//
// It returns the tenure, a [*SlotsHeldError] naming the holder of every
// slot when all are held, or the store's error. With n = 1 it takes the
// lease name#0, not name.
func (c *Client) AcquireSlot(ctx context.Context, name string, n int) (*Lease, error) {
	return c.trySlot(ctx, name, n, false)
}

// CampaignSlot waits until one of the n slots of name is taken or ctx is
// done, as [Client.Campaign] waits for one lease: after a refusal it
// tries again when the first slot's holder's time runs out by the
// store's clock (with jitter), or as soon as the store announces a
// release or takeover of any of the slots, whichever comes first, and
// takes whichever slot is free then. Waiters are not kept in a line:
// of those that hear of a free slot, the first to ask gets it, and each
// release costs the store one attempt per waiter (the line of a plain
// lease costs one, however many wait). Store
// errors are retried with backoff, except [ErrInvalid],
// [ErrNotMigrated] and [ErrClosed], which are returned, as is
// [ErrNotRunning].
func (c *Client) CampaignSlot(ctx context.Context, name string, n int) (*Lease, error) {
	return c.campaignSlot(ctx, name, n, false)
}

// DoSlot is [Client.Do] over one of the n slots of name: it campaigns for
// a slot ([Client.CampaignSlot]), runs fn under it (fn's ctx is
// cancelled when the tenure is lost; l.Slot() says which slot, and
// l.Token() is that slot's token), and releases it when fn returns.
func (c *Client) DoSlot(ctx context.Context, name string, n int, fn func(ctx context.Context, l *Lease) error) error {
	l, err := c.campaignSlot(ctx, name, n, true)
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

// slotBackoffFloor is the first wait after a store error while
// campaigning for a slot; it doubles with each error in a row, up to the
// renew interval.
const slotBackoffFloor = 50 * time.Millisecond

func (c *Client) campaignSlot(ctx context.Context, name string, n int, guarded bool) (*Lease, error) {
	if err := (store.SlotParams{Name: name, Slots: n, Holder: c.Holder(), TTL: c.cfg.TTL, Payload: c.cfg.Payload}).Validate(); err != nil {
		return nil, err
	}
	freed := make(chan struct{}, 1)
	if nt, ok := c.store.(store.Notifier); ok {
		sub := store.Subscribe(nt)
		for k := range n {
			sub.Follow(SlotName(name, k))
		}
		lctx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		defer wg.Wait()
		defer stop()
		wg.Go(func() {
			_ = sub.Listen(lctx, func(no store.Notice) {
				if no.Kind != store.NoticeAcquired {
					select {
					case freed <- struct{}{}:
					default:
					}
				}
			})
		})
	}
	failures := 0
	for {
		l, err := c.trySlot(ctx, name, n, guarded)
		var all *SlotsHeldError
		var wait time.Duration
		switch {
		case err == nil:
			return l, nil
		case errors.As(err, &all):
			failures = 0
			wait = all.Soonest() + jitter(min(c.cfg.TTL/100, 10*time.Millisecond))
		case errors.Is(err, ErrHeld):
			// The lease loop still tracks the slot it was granted (its
			// last tenure's release is under way): the grant went back;
			// look again shortly.
			failures = 0
			wait = slotBackoffFloor
		case drive.Permanent(err) || errors.Is(err, ErrNotRunning) || ctx.Err() != nil:
			return nil, err
		default:
			failures++
			wait = min(slotBackoffFloor<<min(failures-1, 10), c.cfg.RenewInterval)
			wait = wait/2 + jitter(wait/2)
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-freed:
			t.Stop()
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-c.stopped:
			t.Stop()
			return nil, fmt.Errorf("%w: the client's Run has returned", ErrClosed)
		}
	}
}

// trySlot takes a slot at the store and hands the grant to the lease
// loop, which holds and renews it as if it had acquired it itself (see
// [engine.Granted]).
func (c *Client) trySlot(ctx context.Context, name string, n int, guarded bool) (*Lease, error) {
	h := c.Holder()
	wall, mono := c.cfg.Clock.Now()
	sent := engine.Instant{Mono: mono, Wall: wall}
	g, err := store.AcquireSlot(ctx, c.store, store.SlotParams{Name: name, Slots: n, Holder: h, TTL: c.cfg.TTL, Payload: c.cfg.Payload})
	if err != nil {
		return nil, err
	}
	if g.Name != SlotName(name, g.Slot) || g.Slot >= n || g.Token <= 0 || g.Seq != 1 || g.Remaining <= 0 || g.Remaining > c.cfg.TTL {
		c.giveBackSlot(ctx, g.Name, h, g.Token)
		return nil, fmt.Errorf("%w: store granted slot %d of %q as lease %q with token %d, seq %d and %s remaining of a %s TTL; that is no new tenure of a slot",
			ErrUnavailable, g.Slot, name, g.Name, g.Token, g.Seq, g.Remaining, c.cfg.TTL)
	}
	g.Holder = h
	reply := make(chan acquireResult, 1)
	c.submit(request{event: engine.Granted{Holder: h, SentAt: sent, Grant: g.Grant}, reply: reply, guarded: guarded})
	var notRunning <-chan time.Time
	if !c.started.Load() {
		// The grant waits in the inbox for Run. Past one TTL it is past
		// its trusted time too, so a Run that starts later gives it back
		// rather than hold it for nobody.
		t := time.NewTimer(c.cfg.TTL)
		defer t.Stop()
		notRunning = t.C
	}
	for {
		select {
		case r := <-reply:
			if r.lease != nil && ctx.Err() != nil {
				_ = r.lease.Release(context.WithoutCancel(ctx))
				return nil, ctx.Err()
			}
			return r.lease, r.err
		case <-c.stopped:
			c.giveBackSlot(ctx, g.Name, h, g.Token)
			return nil, fmt.Errorf("%w: the client's Run has returned", ErrClosed)
		case <-notRunning:
			notRunning = nil
			if !c.started.Load() {
				return nil, fmt.Errorf("%w: waited %s for it to start; call go client.Run(ctx) before AcquireSlot, CampaignSlot or DoSlot", ErrNotRunning, c.cfg.TTL)
			}
		}
	}
}

// giveBackSlot releases a slot's grant the lease loop will not hold,
// best effort: otherwise it expires by its TTL.
func (c *Client) giveBackSlot(ctx context.Context, name string, h Holder, token Token) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.RenewInterval)
	defer cancel()
	_ = c.store.Release(rctx, store.ReleaseParams{Name: name, Holder: h, Token: token})
}
