package registry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tenure-dev/tenure/store"
)

// deregisterTimeout bounds the deregistration a [Heartbeater] makes on its
// way out.
const deregisterTimeout = 5 * time.Second

// HeartbeaterConfig configures a [Heartbeater]. It is passed by value; the
// zero value heartbeats silently and leaves the registration in place when
// Run returns. Callbacks are called from Run's goroutine, one at a time,
// and must not block: a slow callback delays the next heartbeat.
type HeartbeaterConfig struct {
	// OnHeartbeat is called after every successful heartbeat. Nil: nothing.
	OnHeartbeat func(Beat)
	// OnConflict is called when a heartbeat reveals that other processes
	// tried to heartbeat as this agent since the previous one (an older
	// instance that woke up, or a clone that lost the race): this process
	// keeps the identity, and someone should find the other process. Nil:
	// nothing (it is logged at Warn on [Config.Logger] either way). When it
	// is this process that lost, Run returns the [IdentityConflictError]
	// instead.
	OnConflict func(Conflict)
	// OnError is called with each failed heartbeat that Run retries (the
	// store was unavailable), and with a failed deregistration. Nil:
	// nothing.
	OnError func(error)
	// DeregisterOnStop makes Run deregister the agent when ctx is done, so
	// every reader sees it gone at once and the next Register under its id
	// succeeds without waiting. Its resources then answer [ErrOwnerDead]
	// until it registers again. False: the agent goes stale after
	// StaleAfter, as after a crash.
	DeregisterOnStop bool
}

// Conflict tells the process that holds an agent identity that others
// tried to use it.
type Conflict struct {
	Agent string
	// Count is how many heartbeats were refused since the previous one; the
	// latest came from Instance at At (by the store's clock).
	Count    int64
	Instance string
	At       time.Time
}

// Heartbeater keeps one registration alive: it heartbeats every
// HeartbeatInterval of the registration until its Run's context is done or
// it loses the identity.
type Heartbeater struct {
	reg *Registry
	cfg HeartbeaterConfig

	running atomic.Bool

	mu  sync.Mutex
	cur Registration
}

// NewHeartbeater returns a heartbeater for g, which [Registry.Register]
// returned. It starts nothing: call Run.
func NewHeartbeater(reg *Registry, g Registration, cfg HeartbeaterConfig) (*Heartbeater, error) {
	if reg == nil {
		return nil, fmt.Errorf("registry: %w: heartbeater: registry is nil", store.ErrInvalid)
	}
	if err := g.validate(); err != nil {
		return nil, fmt.Errorf("registry: heartbeater: %w", err)
	}
	if g.HeartbeatInterval < MinHeartbeatInterval || g.StaleAfter < 2*g.HeartbeatInterval {
		return nil, fmt.Errorf("registry: heartbeater: %w: registration of agent %q has heartbeat interval %s and stale after %s; use the Registration that Register returned",
			store.ErrInvalid, g.ID, g.HeartbeatInterval, g.StaleAfter)
	}
	return &Heartbeater{reg: reg, cfg: cfg, cur: g}, nil
}

// Registration returns the registration as of the last heartbeat: what to
// deregister with, or to hand to a new Heartbeater.
func (h *Heartbeater) Registration() Registration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cur
}

// Run heartbeats at once and then every HeartbeatInterval until ctx is
// done, and returns only then, or when this process lost the identity. It
// starts no other goroutine.
//
//   - ctx done: Run returns nil, after deregistering when
//     [HeartbeaterConfig.DeregisterOnStop] is set (the deregistration's
//     error, if it fails).
//   - The heartbeat was refused: Run returns the [IdentityConflictError].
//     The process must stop acting as the agent: another instance was
//     registered under its id (after this one went stale), or a clone of
//     this process holds the same registration and heartbeated first.
//   - The store is unavailable: Run reports the error to OnError and
//     retries with jittered backoff up to the interval; each attempt is
//     bounded by half of StaleAfter. After a heartbeat whose reply was lost, the
//     next one recognises it instead of reporting a conflict.
//
// Run may be called again after it returned (with the same identity, if it
// did not lose it), but not twice at once.
func (h *Heartbeater) Run(ctx context.Context) error {
	if !h.running.CompareAndSwap(false, true) {
		return fmt.Errorf("registry: heartbeater: %w: Run is already running", store.ErrInvalid)
	}
	defer h.running.Store(false)

	interval := h.Registration().HeartbeatInterval
	timer := time.NewTimer(0) // the first heartbeat at once: Run may start late
	defer timer.Stop()
	var backoff time.Duration
	for {
		select {
		case <-ctx.Done():
			return h.stop(ctx)
		case <-timer.C:
		}
		b, err := h.beat(ctx)
		switch {
		case err == nil:
			backoff = 0
			h.report(b)
			timer.Reset(interval)
		case errors.Is(err, ErrIdentityConflict):
			return err
		case ctx.Err() != nil:
			return h.stop(ctx)
		default:
			if h.cfg.OnError != nil {
				h.cfg.OnError(err)
			}
			backoff = nextBackoff(backoff, interval)
			timer.Reset(backoff)
		}
	}
}

// beat sends one heartbeat, bounded by half of StaleAfter: a heartbeat
// that takes longer is abandoned (its outcome unknown) and retried, so a
// hung connection cannot let the agent go stale unnoticed.
func (h *Heartbeater) beat(ctx context.Context) (Beat, error) {
	g := h.Registration()
	bctx, cancel := context.WithTimeout(ctx, g.StaleAfter/2)
	defer cancel()
	b, err := h.reg.Heartbeat(bctx, g)
	h.mu.Lock()
	h.cur = b.Registration
	h.mu.Unlock()
	return b, err
}

func (h *Heartbeater) report(b Beat) {
	if b.NewConflicts > 0 {
		c := Conflict{Agent: b.Registration.ID, Count: b.NewConflicts, Instance: b.LastConflictInstance, At: b.LastConflictAt}
		h.reg.log.Warn("registry: other processes tried to heartbeat as this agent",
			slog.String("agent", c.Agent), slog.String("instance", b.Registration.Instance),
			slog.Int64("refused", c.Count), slog.String("other_instance", c.Instance))
		if h.cfg.OnConflict != nil {
			h.cfg.OnConflict(c)
		}
	}
	if h.cfg.OnHeartbeat != nil {
		h.cfg.OnHeartbeat(b)
	}
}

// stop ends Run after ctx is done.
func (h *Heartbeater) stop(ctx context.Context) error {
	if !h.cfg.DeregisterOnStop {
		return nil
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deregisterTimeout)
	defer cancel()
	if err := h.reg.Deregister(dctx, h.Registration()); err != nil {
		if h.cfg.OnError != nil {
			h.cfg.OnError(err)
		}
		return err
	}
	return nil
}

// nextBackoff doubles prev, from a tenth of the interval up to the
// interval, and jitters the result down by up to half.
func nextBackoff(prev, interval time.Duration) time.Duration {
	b := max(interval/10, min(2*prev, interval))
	return b/2 + rand.N(b/2+1)
}
