package tenure

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/tenure-dev/tenure/internal/drive"
	"github.com/tenure-dev/tenure/store"
)

// Observation is who holds a lease, as the store reported it: the
// follower's view of a name.
type Observation struct {
	Name string
	// Held reports whether a holder has the lease (by the store's clock).
	// Holder and Token name the tenure while it is held.
	Held   bool
	Holder Holder
	Token  Token
	// Remaining is the tenure's time left by the store's clock when the
	// store was read; without a renewal the lease expires then.
	Remaining time.Duration
	// Payload is what the holder published with its tenure
	// ([Config.Payload]: its address, say); empty when it published
	// none or the lease is not held. It is fixed for a tenure, so a new
	// one is reported with its token.
	Payload string
}

// Observe calls fn with who holds the lease name now, and again each time
// that changes (another holder or token, or held or not), until ctx is
// done; then it returns nil. It only reads: it does not campaign, and it
// needs no [Client.Run].
//
// A change is seen at once when the store announces it ([store.Notifier]:
// a release, a takeover), at the holder's expiry by the store's clock when
// the holder stops renewing, and otherwise within one
// [Config.RenewInterval] (an acquisition of a free lease is not announced;
// neither is anything on a store without notifications, which is read
// once per renew interval). fn runs on the calling goroutine, one call at
// a time; changes that happen while it runs are coalesced, and the next
// call reports the latest.
//
// Store errors are retried with backoff, and fn is not called while the
// store cannot be read (the last observation stands); with
// [Config.Logger] set, the first failure and the recovery are logged. An
// invalid name fails with [ErrInvalid], and a store that is not set up or
// closed ends the observation with its error.
func (c *Client) Observe(ctx context.Context, name string, fn func(Observation)) error {
	if err := store.ValidateName(name); err != nil {
		return err
	}
	if fn == nil {
		return errors.New("tenure: Observe: fn is nil; pass the function to call with each change")
	}
	o := &observation{c: c, name: name, wake: make(chan struct{}, 1)}
	lctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stop()
	listened := make(chan struct{})
	if n, ok := c.store.(store.Notifier); ok {
		o.notifies = true
		wg.Go(func() {
			defer close(listened)
			_ = n.Listen(lctx, func(got store.Notice) {
				if got.Name == name || got.Name == "" {
					o.signal()
				}
			})
		})
	}
	return o.loop(ctx, fn, listened)
}

// observation is the state of one Observe call.
type observation struct {
	c        *Client
	name     string
	wake     chan struct{}
	notifies bool

	last     Observation
	reported bool
	failures int
}

func (o *observation) signal() {
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

func (o *observation) loop(ctx context.Context, fn func(Observation), listened <-chan struct{}) error {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-o.wake:
			timer.Stop()
		case <-timer.C:
		case <-listened:
			// The listener ended (the store cannot notify any more): read
			// on the timer alone from now on.
			o.notifies, listened = false, nil
			continue
		}
		next, err := o.read(ctx, fn)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			return err
		}
		timer.Reset(next)
	}
}

// read asks the store who holds the lease, reports a change, and returns
// when to read again.
func (o *observation) read(ctx context.Context, fn func(Observation)) (time.Duration, error) {
	every := o.c.cfg.RenewInterval
	rctx, cancel := context.WithTimeout(ctx, every)
	rec, err := o.c.store.Get(rctx, o.name)
	cancel()
	if errors.Is(err, store.ErrNotFound) {
		rec, err = store.Record{}, nil
	}
	if err != nil {
		if ctx.Err() != nil || drive.Permanent(err) {
			return 0, err
		}
		o.failures++
		if o.failures == 1 && o.c.cfg.Logger != nil {
			o.c.cfg.Logger.Warn("cannot read the lease while observing it; retrying with backoff",
				slog.String("lease", o.name), slog.String("store", StoreName(o.c.store)), slog.Any("err", err))
		}
		return o.backoff(), nil
	}
	if o.failures > 0 && o.c.cfg.Logger != nil {
		o.c.cfg.Logger.Info("store readable again", slog.String("lease", o.name), slog.String("store", StoreName(o.c.store)), slog.Int("failures", o.failures))
	}
	o.failures = 0
	obs := Observation{Name: o.name}
	if rec.State == store.StateHeld && rec.Remaining > 0 {
		obs.Held, obs.Holder, obs.Token, obs.Remaining, obs.Payload = true, rec.Holder, rec.Token, rec.Remaining, rec.Payload
	}
	if !o.reported || obs.Held != o.last.Held || obs.Holder != o.last.Holder || obs.Token != o.last.Token {
		o.last, o.reported = obs, true
		fn(obs)
	}
	if obs.Held && (o.notifies || obs.Remaining < every) {
		// Look again when the lease expires unless renewed (just after,
		// so the store's clock has passed it).
		return obs.Remaining + time.Millisecond, nil
	}
	return every, nil
}

// backoff is the wait before the next read after failures: from an eighth
// of the renew interval, doubling, up to the interval.
func (o *observation) backoff() time.Duration {
	d := o.c.cfg.RenewInterval / 8
	for i := 1; i < o.failures && d < o.c.cfg.RenewInterval; i++ {
		d *= 2
	}
	return min(d, o.c.cfg.RenewInterval)
}
