package sim

import (
	"context"
	"errors"
	"math"
	"time"

	"github.com/tenure-dev/tenure/store"

	"github.com/tenure-dev/tenure/store/memstore"
)

// Mutant names one mechanism broken on purpose, so that tests can show the
// checker catches its absence.
type Mutant int

const (
	// None runs the real thing.
	None Mutant = iota
	// NoTokenBump: a takeover keeps the previous tenure's token.
	NoTokenBump
	// FenceAcceptsLower: the resource accepts any token.
	FenceAcceptsLower
	// DeleteOnRelease: releasing deletes the row, so tokens restart at 1.
	DeleteOnRelease
	// ClientClockExpiry: expiry is written and judged by each client's own
	// wall clock, as lock tables keyed on the client's time do.
	ClientClockExpiry
	// WorkAfterRenewError: a holder keeps writing after a renewal failed or
	// did not come back in time.
	WorkAfterRenewError
	// NoSeqCheck: renewals and strict writes ignore the renewal seq.
	NoSeqCheck
)

// Mutants lists every mutant, for tests.
var Mutants = []Mutant{NoTokenBump, FenceAcceptsLower, DeleteOnRelease, ClientClockExpiry, WorkAfterRenewError, NoSeqCheck}

func (m Mutant) String() string {
	return [...]string{"None", "NoTokenBump", "FenceAcceptsLower", "DeleteOnRelease", "ClientClockExpiry", "WorkAfterRenewError", "NoSeqCheck"}[m]
}

func wrap(s *memstore.Store, m Mutant) store.Store {
	switch m {
	case NoTokenBump:
		return &renumbered{Store: s, next: func(prev int64, _ bool) int64 { return max(prev, 1) }}
	case DeleteOnRelease:
		return &renumbered{Store: s, next: func(prev int64, released bool) int64 {
			if released {
				return 1
			}
			return prev + 1
		}}
	case ClientClockExpiry:
		return &clientClock{Store: s, until: make(map[string]time.Time)}
	case NoSeqCheck:
		return &seqBlind{Store: s}
	}
	return s
}

// renumbered hands out its own tokens: next(previous, released) gives the
// token of each new tenure, given the previous one and whether it was
// released.
type renumbered struct {
	*memstore.Store
	next         func(prev int64, released bool) int64
	real, mapped int64
	releasedLast bool
	started      bool
}

// toReal maps a token this wrapper handed out to the store's own; a token
// of no current tenure maps to one the store never handed out.
func (r *renumbered) toReal(t store.Token) store.Token {
	if int64(t) == r.mapped {
		return store.Token(r.real)
	}
	return math.MaxInt64
}

func (r *renumbered) toMapped(t store.Token) store.Token {
	if int64(t) == r.real {
		return store.Token(r.mapped)
	}
	return t
}

func (r *renumbered) Acquire(ctx context.Context, p store.AcquireParams) (store.Grant, error) {
	g, err := r.Store.Acquire(ctx, p)
	var held *store.HeldError
	switch {
	case err == nil:
		if r.started {
			r.mapped = r.next(r.mapped, r.releasedLast)
		} else {
			r.mapped = int64(g.Token)
		}
		r.real, r.releasedLast, r.started = int64(g.Token), false, true
		g.Token = store.Token(r.mapped)
	case errors.As(err, &held):
		held.Token = r.toMapped(held.Token)
	}
	return g, err
}

func (r *renumbered) Renew(ctx context.Context, ps []store.RenewParams) ([]store.RenewResult, error) {
	real := make([]store.RenewParams, len(ps))
	for i, p := range ps {
		p.Token = r.toReal(p.Token)
		real[i] = p
	}
	res, err := r.Store.Renew(ctx, real)
	for i := range res {
		res[i].Grant.Token = r.toMapped(res[i].Grant.Token)
	}
	return res, err
}

func (r *renumbered) Release(ctx context.Context, p store.ReleaseParams) error {
	p.Token = r.toReal(p.Token)
	err := r.Store.Release(ctx, p)
	if err == nil {
		r.releasedLast = true
	}
	return err
}

func (r *renumbered) Get(ctx context.Context, name string) (store.Record, error) {
	rec, err := r.Store.Get(ctx, name)
	rec.Token = r.toMapped(rec.Token)
	return rec, err
}

// clientClock keeps a lock-until time written from the client's wall clock
// and lets any client whose wall clock is past it take the lease.
type clientClock struct {
	*memstore.Store
	until map[string]time.Time
}

type wallKey struct{}

// withWall tells the clientClock mutant the calling process's wall clock.
func withWall(ctx context.Context, wall time.Time) context.Context {
	return context.WithValue(ctx, wallKey{}, wall)
}

func (c *clientClock) Acquire(ctx context.Context, p store.AcquireParams) (store.Grant, error) {
	wall, _ := ctx.Value(wallKey{}).(time.Time)
	g, err := c.Store.Acquire(ctx, p)
	var held *store.HeldError
	if errors.As(err, &held) && wall.After(c.until[p.Name]) {
		_ = c.Store.Release(ctx, store.ReleaseParams{Name: p.Name, Holder: held.Holder, Token: held.Token})
		g, err = c.Store.Acquire(ctx, p)
	}
	if err == nil {
		c.until[p.Name] = wall.Add(p.TTL)
	}
	return g, err
}

func (c *clientClock) Renew(ctx context.Context, ps []store.RenewParams) ([]store.RenewResult, error) {
	wall, _ := ctx.Value(wallKey{}).(time.Time)
	res, err := c.Store.Renew(ctx, ps)
	for i, r := range res {
		if r.Renewed && !wall.IsZero() {
			c.until[ps[i].Name] = wall.Add(ps[i].TTL)
		}
	}
	return res, err
}

// seqBlind renews whatever seq the lease has now.
type seqBlind struct{ *memstore.Store }

func (s *seqBlind) Renew(ctx context.Context, ps []store.RenewParams) ([]store.RenewResult, error) {
	for i, p := range ps {
		if rec, err := s.Store.Get(ctx, p.Name); err == nil {
			ps[i].Seq = rec.Seq
		}
	}
	return s.Store.Renew(ctx, ps)
}
