package storetest_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
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
}

type harness struct {
	wrap      func(*memstore.Store) store.Store
	roundTrip func(ctx context.Context) error
}

func (h harness) NewStore(tb testing.TB) store.Store {
	s := memstore.New(memstore.Config{})
	tb.Cleanup(func() { _ = s.Close() })
	return h.wrap(s)
}

func (h harness) Capabilities() storetest.Capabilities {
	return storetest.Capabilities{Notify: true, RoundTrip: h.roundTrip}
}

// TestSuite runs the suite against memstore, which must pass it; or, in
// the child processes of [TestSuiteCatchesMutants], against the broken
// store named by mutantEnv, which must fail it.
func TestSuite(t *testing.T) {
	t.Parallel()
	h := harness{wrap: func(s *memstore.Store) store.Store { return s }}
	if name := os.Getenv(mutantEnv); name != "" {
		m, ok := mutants[name]
		require.True(t, ok, "%s=%q names no mutant", mutantEnv, name)
		h.wrap = m.wrap
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
