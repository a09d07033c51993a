package tenure_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tenure-dev/tenure/internal/snapshot"
	"github.com/tenure-dev/tenure/store"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure"
	"github.com/tenure-dev/tenure/store/memstore"
)

const ttl = 30 * time.Second

// bundle is one running client over a store, inside a synctest bubble.
type bundle struct {
	store  store.Store
	client *tenure.Client
	log    *transitionLog
}

// setup starts a client over store (a fresh memstore when nil) and stops it
// at cleanup, checking that Run returned cleanly.
func setup(t *testing.T, st store.Store, cfg tenure.Config) *bundle {
	t.Helper()
	if st == nil {
		m := memstore.New(memstore.Config{})
		t.Cleanup(func() { _ = m.Close() })
		st = m
	}
	log := &transitionLog{}
	if cfg.OnTransition == nil {
		cfg.OnTransition = log.add
	}
	if cfg.Label == "" {
		cfg.Label = "worker"
	}
	c, err := tenure.New(st, cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-ran)
	})
	return &bundle{store: st, client: c, log: log}
}

// setupHolding starts a client over st (as setup does) with the default test
// TTL, and acquires "billing" with it.
func setupHolding(t *testing.T, st store.Store) (*bundle, *tenure.Lease) {
	t.Helper()
	b := setup(t, st, tenure.Config{TTL: ttl})
	return b, b.acquire(t, "billing")
}

// acquire acquires name, which must be free.
func (b *bundle) acquire(t *testing.T, name string) *tenure.Lease {
	t.Helper()
	l, err := b.client.Acquire(t.Context(), name)
	require.NoError(t, err)
	return l
}

// get reads name's record from the store.
func (b *bundle) get(t *testing.T, name string) store.Record {
	t.Helper()
	rec, err := b.store.Get(t.Context(), name)
	require.NoError(t, err)
	return rec
}

// beginChainWrite begins a chain write on l, which must succeed.
func beginChainWrite(t *testing.T, l *tenure.Lease) *tenure.ChainWrite {
	t.Helper()
	w, err := l.BeginChainWrite()
	require.NoError(t, err)
	return w
}

// beginChainWriteAsync begins a chain write on l in a goroutine and hands
// the write over once it has begun.
func beginChainWriteAsync(t *testing.T, l *tenure.Lease) <-chan *tenure.ChainWrite {
	t.Helper()
	begun := make(chan *tenure.ChainWrite, 1)
	go func() { begun <- beginChainWrite(t, l) }()
	return begun
}

type transitionLog struct {
	mu  sync.Mutex
	all []tenure.Transition
}

func (l *transitionLog) add(t tenure.Transition) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all = append(l.all, t)
}

func (l *transitionLog) summary() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, t := range l.all {
		s := fmt.Sprintf("%s %s %d", t.Kind, t.Name, t.Token)
		if t.Kind == tenure.TransitionLost {
			s += " " + t.Reason.String()
		}
		out = append(out, s)
	}
	return out
}

// faultyStore wraps a store and fails or stalls renewals on demand; a
// stalled store also stalls releases, as a hung connection would.
type faultyStore struct {
	store.Store
	failRenew  atomic.Bool
	stallRenew atomic.Bool
	holdRenew  atomic.Bool // the next renewal waits for release()
	held       chan struct{}
	renewCalls atomic.Int64
	renewed    atomic.Int64
}

func (s *faultyStore) Renew(ctx context.Context, ps []store.RenewParams) ([]store.RenewResult, error) {
	s.renewCalls.Add(1)
	if s.holdRenew.CompareAndSwap(true, false) {
		<-s.held
	}
	switch {
	case s.failRenew.Load():
		return nil, fmt.Errorf("%w: connection reset by peer", tenure.ErrUnavailable)
	case s.stallRenew.Load():
		<-ctx.Done()
		return nil, fmt.Errorf("%w: %w", tenure.ErrUnavailable, ctx.Err())
	}
	s.renewed.Add(int64(len(ps)))
	return s.Store.Renew(ctx, ps)
}

func (s *faultyStore) Release(ctx context.Context, p store.ReleaseParams) error {
	if s.stallRenew.Load() {
		<-ctx.Done()
		return fmt.Errorf("%w: %w", tenure.ErrUnavailable, ctx.Err())
	}
	return s.Store.Release(ctx, p)
}

func (s *faultyStore) release() { close(s.held) }

func newFaulty(t *testing.T) *faultyStore {
	m := memstore.New(memstore.Config{})
	t.Cleanup(func() { _ = m.Close() })
	return &faultyStore{Store: m, held: make(chan struct{})}
}

// skewClock is the system clock with a wall-clock offset that a test can
// move, as a VM's re-synced clock moves on wake.
type skewClock struct {
	base   tenure.Clock
	offset atomic.Int64
}

func (c *skewClock) Now() (time.Time, time.Duration) {
	w, m := c.base.Now()
	return w.Add(time.Duration(c.offset.Load())), m
}

func TestAcquireGivesTokenAndRefusesOthers(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		a := setup(t, nil, tenure.Config{TTL: ttl})
		b := setup(t, a.store, tenure.Config{TTL: ttl, Label: "other"})

		l := a.acquire(t, "billing")
		require.Positive(t, l.Token())
		require.Equal(t, a.client.Holder(), l.Holder())
		require.Equal(t, "billing", l.Name())

		elapse(time.Second)
		_, err := b.client.Acquire(t.Context(), "billing")
		var held *tenure.HeldError
		require.ErrorAs(t, err, &held)
		require.ErrorIs(t, err, tenure.ErrHeld)
		require.Equal(t, a.client.Holder(), held.Holder)
		require.Equal(t, l.Token(), held.Token)
		require.Equal(t, ttl-time.Second, held.Remaining, "remaining time by the store's clock")

		_, err = a.client.Acquire(t.Context(), "billing")
		require.ErrorIs(t, err, tenure.ErrHeld, "a client does not acquire what it holds twice")
		_, err = a.client.Acquire(t.Context(), "")
		require.ErrorIs(t, err, tenure.ErrInvalid)
	})
}

func TestRenewalsKeepTheLeaseAndItsToken(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b, l := setupHolding(t, nil)
		tok := l.Token()
		elapse(5*ttl + time.Second)
		require.Equal(t, tok, l.Token())
		require.NoError(t, l.Err())
		rec := b.get(t, "billing")
		require.Equal(t, store.StateHeld, rec.State)
		require.Equal(t, tok, rec.Token)
		require.Equal(t, int64(16), rec.Seq, "one renewal every TTL/3 over five TTLs")
		require.Equal(t, rec.Seq, l.Seq())
	})
}

func TestReleaseHandsOverAtOnceWithAGreaterToken(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		a := setup(t, nil, tenure.Config{TTL: ttl})
		b := setup(t, a.store, tenure.Config{TTL: ttl, Label: "follower"})
		first := a.acquire(t, "billing")

		got := make(chan *tenure.Lease, 1)
		go func() {
			l, err := b.client.Campaign(t.Context(), "billing")
			require.NoError(t, err)
			got <- l
		}()
		elapse(5 * time.Second)
		synctest.Wait()
		require.Empty(t, got, "the follower waits while the lease is held")

		start := time.Now()
		require.NoError(t, first.Release(t.Context()))
		require.Zero(t, first.Token())
		second := <-got
		require.Less(t, time.Since(start), time.Second, "the release notification wakes the follower")
		require.Greater(t, second.Token(), tokenOf(first))
		require.Equal(t, tenure.LossReleased, lostReason(t, first))
	})
}

func TestCrashedHolderIsTakenOverAtExpiry(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := newFaulty(t)
		a := setup(t, st, tenure.Config{TTL: ttl})
		b := setup(t, st.Store, tenure.Config{TTL: ttl, Label: "follower"})
		first := a.acquire(t, "billing")
		acquiredAt := time.Now()
		st.stallRenew.Store(true) // the holder's store connection hangs

		second, err := b.client.Campaign(t.Context(), "billing")
		require.NoError(t, err)
		require.GreaterOrEqual(t, time.Since(acquiredAt), ttl, "no takeover before the store's expiry")
		require.Less(t, time.Since(acquiredAt), ttl+ttl/10, "the follower retried at the expiry, not blindly")
		require.Greater(t, second.Token(), tokenOf(first))
		<-first.Done()
		require.Zero(t, first.Token())
	})
}

func TestRenewErrorFailsClosedAtOnce(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := newFaulty(t)
		_, l := setupHolding(t, st)
		elapse(time.Second)
		st.failRenew.Store(true)
		start := time.Now()
		<-l.Done()
		require.LessOrEqual(t, time.Since(start), ttl/3, "lost at the first failed renewal")
		require.Equal(t, tenure.LossRenewError, lostReason(t, l))
		require.ErrorIs(t, l.Err(), tenure.ErrUnavailable)
		require.Zero(t, l.Token())
	})
}

func TestStalledRenewalStandsDownBeforeTheStoreExpires(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := newFaulty(t)
		b := setup(t, st, tenure.Config{TTL: ttl, Grace: 5 * time.Second})
		l := b.acquire(t, "billing")
		start := time.Now()
		st.stallRenew.Store(true)
		<-l.Done()
		require.Equal(t, tenure.LossExpiredLocally, lostReason(t, l))
		// Local deadline: TTL − margin (TTL/10) − grace after the send time.
		require.Equal(t, ttl-ttl/10-5*time.Second, time.Since(start))
	})
}

func TestSuspensionRevokesAtTheNextTokenRead(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		clock := &skewClock{base: tenure.NewSystemClock()}
		b := setup(t, nil, tenure.Config{TTL: ttl, Clock: clock})
		l := b.acquire(t, "billing")
		before := b.client.Holder()
		require.Positive(t, l.Token())

		// The VM was paused: its monotonic clock stood still, its wall clock
		// was re-synced on wake.
		clock.offset.Store(int64(5 * time.Second))
		require.Zero(t, l.Token(), "the very next token read fails closed")
		<-l.Done()
		require.Equal(t, tenure.LossSuspended, lostReason(t, l))
		require.NotEqual(t, before.Instance, b.client.Holder().Instance, "identity regenerated on wake")
		require.Equal(t, before.Label, b.client.Holder().Label)
	})
}

func TestStoreClockStepForwardEndsTheTenureAtTheNextRenewal(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var step atomic.Int64
		st := memstore.New(memstore.Config{Clock: func() time.Time { return time.Now().Add(time.Duration(step.Load())) }})
		t.Cleanup(func() { _ = st.Close() })
		b := setup(t, st, tenure.Config{TTL: ttl})
		l := b.acquire(t, "billing")
		start := time.Now()

		// The store's wall clock steps ten seconds forward: its lease now
		// expires ten seconds before the holder's deadline says.
		step.Store(int64(10 * time.Second))
		<-l.Done()
		require.Equal(t, tenure.LossStoreClockAhead, lostReason(t, l))
		require.Equal(t, b.client.Config().RenewInterval, time.Since(start), "noticed at the first renewal after the step")
	})
}

func TestCloneIsDetectedByTheRenewalChain(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b, l := setupHolding(t, nil)
		before := b.client.Holder()

		// A clone restored from the same snapshot renews first with the same
		// holder, token and seq.
		res, err := b.store.Renew(t.Context(), []store.RenewParams{{Name: "billing", Holder: l.Holder(), Token: l.Token(), Seq: l.Seq(), TTL: ttl}})
		require.NoError(t, err)
		require.True(t, res[0].Renewed)

		<-l.Done()
		require.Equal(t, tenure.LossSeqMismatch, lostReason(t, l))
		require.NotEqual(t, before, b.client.Holder())
		rec := b.get(t, "billing")
		require.Equal(t, store.StateHeld, rec.State, "the surviving clone keeps its lease")
	})
}

func TestChainWritesKeepTheLease(t *testing.T) {
	t.Parallel()
	// What a strict fenced write does: advance the chain at the store inside
	// the write's transaction, and tell the client how it ended.
	advance := func(t *testing.T, b *bundle, w *tenure.ChainWrite) int64 {
		l := w.Lease()
		res, err := b.store.Renew(t.Context(), []store.RenewParams{{Name: l.Name(), Holder: l.Holder(), Token: l.Token(), Seq: w.Seq(), TTL: ttl}})
		require.NoError(t, err)
		require.True(t, res[0].Renewed)
		return res[0].Grant.Seq
	}
	t.Run("Committed", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			b, l := setupHolding(t, nil)
			for range 20 {
				w := beginChainWrite(t, l)
				w.Commit(advance(t, b, w))
				elapse(ttl / 7)
			}
			require.NoError(t, l.Err())
			require.Positive(t, l.Token())
			rec := b.get(t, "billing")
			require.Equal(t, rec.Seq, l.Seq())
		})
	})
	t.Run("WaitsForTheRenewalInFlight", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			st := newFaulty(t)
			b, l := setupHolding(t, st)
			st.holdRenew.Store(true) // the next renewal waits in the store
			elapse(ttl/3 + time.Millisecond)
			synctest.Wait()
			begun := beginChainWriteAsync(t, l)
			synctest.Wait()
			require.Empty(t, begun, "no chain write while a renewal is in flight")
			st.release()
			w := <-begun
			require.Equal(t, int64(2), w.Seq(), "the write presents the renewed seq")
			w.Commit(advance(t, b, w))
			elapse(ttl)
			require.NoError(t, l.Err())
		})
	})
	t.Run("ConcurrentWritesTakeTurns", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			b, l := setupHolding(t, nil)
			first := beginChainWrite(t, l)
			begun := beginChainWriteAsync(t, l)
			synctest.Wait()
			require.Empty(t, begun, "a second chain write waits for the first")
			first.Commit(advance(t, b, first))
			second := <-begun
			require.Equal(t, first.Seq()+1, second.Seq(), "the second presents the seq the first committed")
			second.Commit(advance(t, b, second))
			elapse(ttl)
			require.NoError(t, l.Err(), "neither write was taken for a clone's")
		})
	})
	t.Run("RolledBackCostsNothing", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			_, l := setupHolding(t, nil)
			w := beginChainWrite(t, l)
			w.Abort()
			elapse(ttl)
			require.NoError(t, l.Err())
		})
	})
	t.Run("UnknownOutcomeThatCommittedCostsTheTenure", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			b, l := setupHolding(t, nil)
			w := beginChainWrite(t, l)
			advance(t, b, w)
			w.Abort()
			<-l.Done()
			require.Equal(t, tenure.LossSeqMismatch, lostReason(t, l))
			_, err := l.BeginChainWrite()
			require.ErrorIs(t, err, tenure.ErrLost)
		})
	})
}

func TestProgressGate(t *testing.T) {
	t.Parallel()
	const bound = 5 * time.Second
	t.Run("StalledWorkStandsDown", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			b := setup(t, nil, tenure.Config{TTL: ttl, ProgressTimeout: bound})
			l := b.acquire(t, "billing")
			start := time.Now()
			<-l.Done()
			require.Equal(t, bound, time.Since(start))
			require.Equal(t, tenure.LossProgressStalled, lostReason(t, l))
			// The wedged work may still run: nothing renews the lease, and
			// nothing releases it before its owner does; it expires.
			elapse(ttl)
			rec := b.get(t, "billing")
			require.Equal(t, store.StateExpired, rec.State)
		})
	})
	t.Run("ProgressingWorkKeepsIt", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			b := setup(t, nil, tenure.Config{TTL: ttl, ProgressTimeout: bound})
			l := b.acquire(t, "billing")
			for range 60 {
				elapse(time.Second)
				l.Progress()
			}
			require.NoError(t, l.Err())
		})
	})
}

func TestDoCancelsTheWorkOnLoss(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setup(t, nil, tenure.Config{TTL: ttl})
		var cause error
		err := b.client.Do(t.Context(), "billing", func(ctx context.Context, l *tenure.Lease) error {
			require.Positive(t, l.Token())
			b.client.Revoke()
			<-ctx.Done()
			cause = context.Cause(ctx)
			return ctx.Err()
		})
		require.ErrorIs(t, err, tenure.ErrLost)
		require.ErrorIs(t, err, context.Canceled)
		var lost *tenure.LostError
		require.ErrorAs(t, cause, &lost)
		require.Equal(t, tenure.LossRevoked, lost.Reason)
	})
}

func TestDoReleasesWhenTheWorkReturns(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setup(t, nil, tenure.Config{TTL: ttl})
		var tok tenure.Token
		errWork := errors.New("ledger is locked")
		err := b.client.Do(t.Context(), "billing", func(ctx context.Context, l *tenure.Lease) error {
			tok = l.Token()
			return errWork
		})
		require.ErrorIs(t, err, errWork)
		require.NotErrorIs(t, err, tenure.ErrLost)
		rec := b.get(t, "billing")
		require.Equal(t, store.StateReleased, rec.State)
		require.Equal(t, tok, rec.Token)

		l := b.acquire(t, "billing")
		require.Greater(t, l.Token(), tok, "the same holder's next tenure gets a greater token")
	})
}

func TestTransitionsArriveInOrder(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setup(t, nil, tenure.Config{TTL: ttl})
		l1 := b.acquire(t, "billing")
		before := b.client.Holder()
		b.client.Revoke()
		<-l1.Done()
		require.NotEqual(t, before, b.client.Holder(), "a revoke regenerates the identity")
		_, err := b.client.Acquire(t.Context(), "billing")
		var held *tenure.HeldError
		require.ErrorAs(t, err, &held, "a revoke does not release: another copy may hold the lease")
		require.Equal(t, before, held.Holder)
		require.ErrorIs(t, l1.Release(t.Context()), tenure.ErrLost, "nor does its owner")
		l2, err := b.client.Campaign(t.Context(), "billing")
		require.NoError(t, err)
		require.NoError(t, l2.Release(t.Context()))
		synctest.Wait()
		require.Equal(t, []string{
			fmt.Sprintf("acquired billing %d", tokenOf(l1)),
			fmt.Sprintf("lost billing %d revoked", tokenOf(l1)),
			fmt.Sprintf("acquired billing %d", tokenOf(l2)),
			fmt.Sprintf("lost billing %d released", tokenOf(l2)),
		}, b.log.summary())
	})
}

func TestRunReturnReleasesEverything(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New(memstore.Config{})
		defer st.Close()
		c, err := tenure.New(st, tenure.Config{TTL: ttl})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(t.Context())
		ran := make(chan error, 1)
		go func() { ran <- c.Run(ctx) }()
		var leases []*tenure.Lease
		for _, name := range []string{"a", "b", "c"} {
			l, err := c.Acquire(t.Context(), name)
			require.NoError(t, err)
			leases = append(leases, l)
		}
		cancel()
		require.NoError(t, <-ran)
		for _, l := range leases {
			<-l.Done()
			require.Equal(t, tenure.LossClosed, lostReason(t, l))
			rec, err := st.Get(t.Context(), l.Name())
			require.NoError(t, err)
			require.Equal(t, store.StateReleased, rec.State)
		}
		_, err = c.Acquire(t.Context(), "d")
		require.ErrorIs(t, err, tenure.ErrClosed)
		require.Error(t, c.Run(t.Context()), "a client runs once")
	})
}

func TestCampaignHonoursContext(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		a := setup(t, nil, tenure.Config{TTL: ttl})
		b := setup(t, a.store, tenure.Config{TTL: ttl, Label: "follower"})
		a.acquire(t, "billing")
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
		defer cancel()
		_, err := b.client.Campaign(ctx, "billing")
		require.ErrorIs(t, err, context.DeadlineExceeded)
		_, err = b.client.Acquire(t.Context(), "billing")
		require.ErrorIs(t, err, tenure.ErrHeld, "the withdrawn campaign left nothing behind")
		var held *tenure.HeldError
		require.ErrorAs(t, err, &held, "and the answer names the real holder, not a busy campaign")
	})
}

func TestAllLeasesRenewInOneRoundTripPerInterval(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := newFaulty(t)
		b := setup(t, st, tenure.Config{TTL: ttl})
		const n = 1000
		for i := range n {
			_, err := b.client.Acquire(t.Context(), fmt.Sprintf("lease-%04d", i))
			require.NoError(t, err)
		}
		elapse(time.Second)
		synctest.Wait()
		calls0, renewed0 := st.renewCalls.Load(), st.renewed.Load()
		elapse(10 * ttl / 3)
		synctest.Wait()
		require.Equal(t, int64(10), st.renewCalls.Load()-calls0, "one round trip per renew interval")
		require.Equal(t, int64(10*n), st.renewed.Load()-renewed0, "each carrying every lease")
	})
}

func tokenOf(l *tenure.Lease) tenure.Token {
	var lost *tenure.LostError
	if errors.As(l.Err(), &lost) {
		return lost.Token
	}
	return l.Token()
}

func lostReason(t *testing.T, l *tenure.Lease) tenure.LossReason {
	t.Helper()
	var lost *tenure.LostError
	require.ErrorAs(t, l.Err(), &lost)
	return lost.Reason
}

func TestTokenDoesNotAllocate(t *testing.T) { //nolint:paralleltest // AllocsPerRun refuses parallel tests
	synctest.Test(t, func(t *testing.T) {
		_, l := setupHolding(t, nil)
		require.Zero(t, testing.AllocsPerRun(100, func() { _ = l.Token() }))
	})
}

func TestLeaseContextEndsWithTheTenure(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b, l := setupHolding(t, nil)
		ctx, cancel := l.WithContext(t.Context())
		defer cancel()
		elapse(ttl)
		require.NoError(t, ctx.Err(), "alive while the tenure lasts")
		b.client.Revoke()
		<-ctx.Done()
		var lost *tenure.LostError
		require.ErrorAs(t, context.Cause(ctx), &lost)
		require.Equal(t, tenure.LossRevoked, lost.Reason)
	})
}

// elapse moves the bubble's virtual clock forward by d. Inside
// synctest.Test, time.Sleep returns when the fake clock reaches its end,
// after every other goroutine of the bubble is blocked: it is the clock,
// not a stand-in for synchronisation.
func elapse(d time.Duration) { time.Sleep(d) }

func TestAdoptedCloneLosesTheChainRace(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		a := setup(t, nil, tenure.Config{TTL: ttl})
		b := setup(t, a.store, tenure.Config{TTL: ttl})
		original := a.acquire(t, "billing")
		elapse(time.Second)
		clone, err := adoptClone(t, b.client, snapshot.Take(original))
		require.NoError(t, err)
		require.Equal(t, original.Token(), clone.Token(), "a clone carries the very same token")
		require.Equal(t, original.Holder(), clone.Holder())

		elapse(ttl)
		survivors := 0
		for _, l := range []*tenure.Lease{original, clone} {
			if l.Err() == nil {
				survivors++
				continue
			}
			require.Equal(t, tenure.LossSeqMismatch, lostReason(t, l))
		}
		require.Equal(t, 1, survivors, "the renewal chain leaves exactly one of the two")

		_, err = adoptClone(t, b.client, snapshot.Tenure{Name: "other", Holder: original.Holder(), Token: 1, Seq: 1})
		require.ErrorIs(t, err, tenure.ErrInvalid, "a clone of nothing live is refused")
	})
}

// adoptClone makes c hold st as the process it was taken from does.
func adoptClone(t *testing.T, c *tenure.Client, st snapshot.Tenure) (*tenure.Lease, error) {
	l, err := snapshot.Adopt(t.Context(), c, st)
	if err != nil {
		return nil, err
	}
	return l.(*tenure.Lease), nil
}

func TestRemainingCountsDownToTheLocalDeadline(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setup(t, nil, tenure.Config{TTL: ttl, Grace: time.Second})
		l := b.acquire(t, "billing")
		// No time passes in the bubble: the deadline is the grant's TTL
		// less the margin (TTL/10) and the grace.
		require.Equal(t, ttl-ttl/10-time.Second, l.Remaining())
		elapse(time.Second)
		require.Equal(t, ttl-ttl/10-2*time.Second, l.Remaining())
		require.NoError(t, l.Release(t.Context()))
		require.Zero(t, l.Remaining())
	})
}
