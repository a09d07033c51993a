package storetest_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync/atomic"
	"testing"

	"github.com/tenure-dev/tenure/store"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store/memstore"
	"github.com/tenure-dev/tenure/store/storetest"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

// mutantEnv names the broken store [TestSuite] runs the suite against
// in a child process.
const mutantEnv = "STORETEST_MUTANT"

// mutants are stores that break the contract in one way each, with a subtest
// of the suite that must catch it.
var mutants = map[string]struct {
	wrap    func(*memstore.Store) store.Store
	faults  func() storetest.Faults // nil: [cuttableFaults] with a faithful cut
	catcher string
}{
	"ReentrantAcquire": {
		wrap:    func(s *memstore.Store) store.Store { return reentrantAcquire{s} },
		catcher: "Acquire/HeldBySameHolder",
	},
	"RenewIgnoresSeq": {
		wrap:    func(s *memstore.Store) store.Store { return renewIgnoresSeq{s} },
		catcher: "Renew/StaleSeq",
	},
	"ReleaseIgnoresToken": {
		wrap:    func(s *memstore.Store) store.Store { return releaseIgnoresToken{s} },
		catcher: "Release/StaleTokenAfterNewTenure",
	},
	"RenewResultsReversed": {
		wrap:    func(s *memstore.Store) store.Store { return renewReversed{s} },
		catcher: "Renew/MixedBatch",
	},
	"SilentListener": {
		wrap:    func(s *memstore.Store) store.Store { return silentListener{s} },
		catcher: "Close/EveryCallFails",
	},
	"SaysNothingOfFaults": {
		wrap:    func(s *memstore.Store) store.Store { return s },
		faults:  func() storetest.Faults { return storetest.Faults{} },
		catcher: "Faults/InjectedOrDeclined",
	},
	"CutNotUnavailable": {
		wrap:    func(s *memstore.Store) store.Store { return s },
		faults:  func() storetest.Faults { return cuttableFaults(context.Cause) },
		catcher: "Faults/Cut",
	},
	"RestartLosesTokens": {
		wrap: func(s *memstore.Store) store.Store { return s },
		faults: func() storetest.Faults {
			f := cuttableFaults(unavailable)
			newStore := f.NewStore
			f.NewStore = func(tb testing.TB) (store.Store, storetest.Fault) {
				s, fault := newStore(tb)
				fault.Restart = func(tb testing.TB) store.Store {
					fresh := memstore.New(memstore.Config{})
					tb.Cleanup(func() { _ = fresh.Close() })
					return fresh
				}
				return s, fault
			}
			return f
		},
		catcher: "Faults/Restart",
	},
}

type harness struct {
	wrap      func(*memstore.Store) store.Store
	faults    storetest.Faults
	roundTrip func(ctx context.Context) error
}

func (h harness) NewStore(tb testing.TB) store.Store {
	s := memstore.New(memstore.Config{})
	tb.Cleanup(func() { _ = s.Close() })
	return h.wrap(s)
}

func (h harness) Capabilities() storetest.Capabilities {
	return storetest.Capabilities{Notify: true, RoundTrip: h.roundTrip, Faults: h.faults}
}

// TestSuite runs the suite against memstore, which must pass it; or, in
// the child processes of [TestSuiteCatchesMutants], against the broken
// store named by mutantEnv, which must fail it.
func TestSuite(t *testing.T) {
	t.Parallel()
	h := harness{wrap: func(s *memstore.Store) store.Store { return s }, faults: cuttableFaults(unavailable)}
	if name := os.Getenv(mutantEnv); name != "" {
		m, ok := mutants[name]
		require.True(t, ok, "%s=%q names no mutant", mutantEnv, name)
		h.wrap = m.wrap
		if m.faults != nil {
			h.faults = m.faults()
		}
	}
	storetest.Run(t, h)
}

func TestSuiteCatchesMutants(t *testing.T) {
	t.Parallel()
	for name, m := range mutants {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestSuite$/^"+m.catcher+"$", "-test.v")
			cmd.Env = append(os.Environ(), mutantEnv+"="+name)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			require.True(t, errors.As(err, &exit), "the suite passed a store that breaks the contract:\n%s", out)
			require.Contains(t, string(out), "--- FAIL: TestSuite/"+m.catcher)
		})
	}
}

func BenchmarkMemstore(b *testing.B) {
	// memstore has no server: its cheapest call stands in for a round trip.
	probe := memstore.New(memstore.Config{})
	b.Cleanup(func() { _ = probe.Close() })
	storetest.Benchmark(b, harness{
		wrap: func(s *memstore.Store) store.Store { return s },
		roundTrip: func(ctx context.Context) error {
			_, err := probe.Get(ctx, "probe")
			if errors.Is(err, store.ErrNotFound) {
				return nil
			}
			return err
		},
	})
}

// reentrantAcquire lets a holder acquire a lease it already holds.
type reentrantAcquire struct{ *memstore.Store }

func (s reentrantAcquire) Acquire(ctx context.Context, p store.AcquireParams) (store.Grant, error) {
	g, err := s.Store.Acquire(ctx, p)
	if held, ok := errors.AsType[*store.HeldError](err); ok && held.Holder == p.Holder {
		return store.Grant{Name: p.Name, Holder: held.Holder, Token: held.Token, Seq: held.Seq, Remaining: held.Remaining}, nil
	}
	return g, err
}

// renewIgnoresSeq keeps hidden compare-and-set state: it renews whatever
// seq the lease has now.
type renewIgnoresSeq struct{ *memstore.Store }

func (s renewIgnoresSeq) Renew(ctx context.Context, ps []store.RenewParams) ([]store.RenewResult, error) {
	fixed := make([]store.RenewParams, len(ps))
	for i, p := range ps {
		if r, err := s.Get(ctx, p.Name); err == nil {
			p.Seq = r.Seq
		}
		fixed[i] = p
	}
	return s.Store.Renew(ctx, fixed)
}

// releaseIgnoresToken releases the lease whatever tenure the caller had.
type releaseIgnoresToken struct{ *memstore.Store }

func (s releaseIgnoresToken) Release(ctx context.Context, p store.ReleaseParams) error {
	if r, err := s.Get(ctx, p.Name); err == nil {
		p.Token = r.Token
	}
	return s.Store.Release(ctx, p)
}

// renewReversed returns renew results in the wrong order.
type renewReversed struct{ *memstore.Store }

func (s renewReversed) Renew(ctx context.Context, ps []store.RenewParams) ([]store.RenewResult, error) {
	rs, err := s.Store.Renew(ctx, ps)
	for i, j := 0, len(rs)-1; i < j; i, j = i+1, j-1 {
		rs[i], rs[j] = rs[j], rs[i]
	}
	return rs, err
}

// silentListener's Listen returns nil at once on a closed store.
type silentListener struct{ *memstore.Store }

func (s silentListener) Listen(ctx context.Context, notify func(store.Notice)) error {
	if _, err := s.Get(ctx, "probe"); errors.Is(err, store.ErrClosed) {
		return nil
	}
	return s.Store.Listen(ctx, notify)
}

// cuttableFaults injects faults into memstores behind a [cuttable] switch:
// a cut or a kill makes every call wait for its context's end and return
// what failure says of it; a restart keeps the memstore, as a server
// that keeps its data does.
func cuttableFaults(failure func(context.Context) error) storetest.Faults {
	return storetest.Faults{NewStore: func(tb testing.TB) (store.Store, storetest.Fault) {
		m := memstore.New(memstore.Config{})
		tb.Cleanup(func() { _ = m.Close() })
		c := &cuttable{Store: m, listen: m, failure: failure}
		return c, storetest.Fault{
			Cut:     func(testing.TB) { c.cut.Store(true) },
			Restore: func(testing.TB) { c.cut.Store(false) },
			Kill:    func(testing.TB) { c.cut.Store(true) },
			Restart: func(testing.TB) store.Store {
				c.cut.Store(false)
				return c
			},
		}
	}}
}

// unavailable is what a store cut off from its server returns once ctx
// ends.
func unavailable(ctx context.Context) error {
	return fmt.Errorf("%w: %w", store.ErrUnavailable, context.Cause(ctx))
}

// cuttable is a store with a switch standing in for the network between
// it and its server. It offers only [store.Store] and [store.Notifier],
// so that the suite calls nothing the switch does not cut.
type cuttable struct {
	store.Store
	listen  store.Notifier
	failure func(context.Context) error
	cut     atomic.Bool
}

// wait returns, while the switch is off, once ctx ends with what failure
// says of it.
func (c *cuttable) wait(ctx context.Context) error {
	if !c.cut.Load() {
		return nil
	}
	<-ctx.Done()
	return c.failure(ctx)
}

func (c *cuttable) Acquire(ctx context.Context, p store.AcquireParams) (store.Grant, error) {
	if err := c.wait(ctx); err != nil {
		return store.Grant{}, err
	}
	return c.Store.Acquire(ctx, p)
}

func (c *cuttable) Renew(ctx context.Context, ps []store.RenewParams) ([]store.RenewResult, error) {
	if err := c.wait(ctx); err != nil {
		return nil, err
	}
	return c.Store.Renew(ctx, ps)
}

func (c *cuttable) Release(ctx context.Context, p store.ReleaseParams) error {
	if err := c.wait(ctx); err != nil {
		return err
	}
	return c.Store.Release(ctx, p)
}

func (c *cuttable) Get(ctx context.Context, name string) (store.Record, error) {
	if err := c.wait(ctx); err != nil {
		return store.Record{}, err
	}
	return c.Store.Get(ctx, name)
}

func (c *cuttable) Listen(ctx context.Context, notify func(store.Notice)) error {
	return c.listen.Listen(ctx, notify)
}
