package tenure_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure"
	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/memstore"
)

// attemptCounter counts the acquisitions each holder label sends.
type attemptCounter struct {
	store.Store
	mu       sync.Mutex
	attempts map[string]int
}

func (s *attemptCounter) Acquire(ctx context.Context, p store.AcquireParams) (store.Grant, error) {
	s.mu.Lock()
	s.attempts[p.Holder.Label]++
	s.mu.Unlock()
	return s.Store.Acquire(ctx, p)
}

// take returns the attempts counted since the last call, and starts over.
func (s *attemptCounter) take() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	got := s.attempts
	s.attempts = make(map[string]int)
	return got
}

// Listen passes the store's announcements on: the embedded interface alone
// would hide them.
func (s *attemptCounter) Listen(ctx context.Context, notify func(store.Notice)) error {
	return s.Store.(store.Notifier).Listen(ctx, notify)
}

// lineup starts a holder of "billing" over holderStore (st when nil) and n
// followers over st that campaign for it one after the other, so that the
// store's line is follower-0 … follower-n-1. Each follower's lease arrives
// on its channel.
func lineup(t *testing.T, st *attemptCounter, holderStore store.Store, n int) (*tenure.Lease, []chan *tenure.Lease) {
	t.Helper()
	if holderStore == nil {
		holderStore = st
	}
	holder := setup(t, holderStore, tenure.Config{TTL: ttl, Label: "holder"}).acquire(t, "billing")
	won := make([]chan *tenure.Lease, n)
	for i := range won {
		f := setup(t, st, tenure.Config{TTL: ttl, Label: fmt.Sprintf("follower-%d", i)})
		won[i] = make(chan *tenure.Lease, 1)
		go func() {
			l, err := f.client.Campaign(t.Context(), "billing")
			if err == nil {
				won[i] <- l
			}
		}()
		synctest.Wait() // refused, and in line
	}
	// A client's listener announces its subscription, which brings its
	// campaign forward once more (it may have missed a release): let those
	// retries pass.
	elapse(time.Second)
	synctest.Wait()
	return holder, won
}

// awaitLease returns the lease that arrives on won within two TTLs of
// virtual time.
func awaitLease(t *testing.T, won <-chan *tenure.Lease, who string) *tenure.Lease {
	t.Helper()
	select {
	case l := <-won:
		return l
	case <-time.After(2 * ttl):
		t.Fatalf("%s did not get the lease within %s", who, 2*ttl)
		return nil
	}
}

func newAttemptCounter(t *testing.T) *attemptCounter {
	m := memstore.New(memstore.Config{})
	t.Cleanup(func() { _ = m.Close() })
	return &attemptCounter{Store: m, attempts: make(map[string]int)}
}

func TestReleaseHandsOverToTheNextInLineAlone(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := newAttemptCounter(t)
		current, won := lineup(t, st, nil, 10)
		for i := range 3 {
			st.take()
			start := time.Now()
			require.NoError(t, current.Release(t.Context()))
			next := awaitLease(t, won[i], fmt.Sprintf("follower-%d", i))
			require.Zero(t, time.Since(start), "the next in line tries as soon as it hears of the release")
			elapse(2 * store.Handoff)
			synctest.Wait()
			require.Equal(t, map[string]int{fmt.Sprintf("follower-%d", i): 1}, st.take(),
				"a handover costs the next in line's acquisition and nothing else")
			for _, w := range won[i+1:] {
				require.Empty(t, w, "the others keep waiting")
			}
			current = next
		}
	})
}

func TestExpiryHandsOverToTheNextInLineAlone(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := newAttemptCounter(t)
		crashing := &faultyStore{Store: st, held: make(chan struct{})}
		start := time.Now() // the holder's acquisition: no virtual time passes before it
		holder, won := lineup(t, st, crashing, 5)
		st.take()
		crashing.stallRenew.Store(true) // the holder's renewals never arrive
		next := awaitLease(t, won[0], "follower-0")
		require.Equal(t, ttl, time.Since(start), "the next in line tries exactly at the store's expiry")
		elapse(2 * store.Handoff)
		synctest.Wait()
		require.Equal(t, map[string]int{"follower-0": 1}, st.take(), "the others hear of the new tenure and keep waiting")
		require.Greater(t, next.Token(), tokenOf(holder))
	})
}

// batchCounter records the sizes of the acquisition batches sent to it and
// counts single acquisitions.
type batchCounter struct {
	*memstore.Store
	mu      sync.Mutex
	batches []int
	singles int
}

func (s *batchCounter) Acquire(ctx context.Context, p store.AcquireParams) (store.Grant, error) {
	s.mu.Lock()
	s.singles++
	s.mu.Unlock()
	return s.Store.Acquire(ctx, p)
}

func (s *batchCounter) AcquireBatch(ctx context.Context, ps []store.AcquireParams) ([]store.AcquireResult, error) {
	s.mu.Lock()
	s.batches = append(s.batches, len(ps))
	s.mu.Unlock()
	return s.Store.AcquireBatch(ctx, ps)
}

func TestAttemptsDueTogetherGoInOneBatch(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		m := memstore.New(memstore.Config{})
		t.Cleanup(func() { _ = m.Close() })
		crashing := &faultyStore{Store: m, held: make(chan struct{})}
		holder := setup(t, crashing, tenure.Config{TTL: ttl, Label: "holder"})
		counted := &batchCounter{Store: m}
		follower := setup(t, counted, tenure.Config{TTL: ttl, Label: "follower"})

		const n = 50
		names := make([]string, n)
		for i := range names {
			names[i] = fmt.Sprintf("shard-%02d", i)
			holder.acquire(t, names[i])
		}
		won := make(chan *tenure.Lease, n)
		for _, name := range names {
			go func() {
				l, err := follower.client.Campaign(t.Context(), name)
				if err == nil {
					won <- l
				}
			}()
		}
		synctest.Wait()
		counted.mu.Lock()
		counted.batches, counted.singles = nil, 0
		counted.mu.Unlock()

		crashing.stallRenew.Store(true) // every lease expires at once
		for range n {
			awaitLease(t, won, "the follower")
		}
		counted.mu.Lock()
		defer counted.mu.Unlock()
		require.Equal(t, []int{n}, counted.batches, "the attempts due at the common expiry go in one batch")
		require.Zero(t, counted.singles)
	})
}

// slowAcquires is a memstore whose every acquisition round trip takes
// delay, unless its context ends first.
type slowAcquires struct {
	*memstore.Store
	delay time.Duration
}

func (s slowAcquires) Acquire(ctx context.Context, p store.AcquireParams) (store.Grant, error) {
	if err := s.wait(ctx); err != nil {
		return store.Grant{}, err
	}
	return s.Store.Acquire(ctx, p)
}

func (s slowAcquires) AcquireBatch(ctx context.Context, ps []store.AcquireParams) ([]store.AcquireResult, error) {
	if err := s.wait(ctx); err != nil {
		return nil, err
	}
	return s.Store.AcquireBatch(ctx, ps)
}

// wait is the round trip's delay.
func (s slowAcquires) wait(ctx context.Context) error {
	select {
	case <-time.After(s.delay):
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", store.ErrUnavailable, ctx.Err())
	}
}

// TestQueuedAttemptsTrustFromTheirRoundTrip: thousands of Acquire calls
// made at once wait in the client for the round trips ahead of them; each
// attempt's trust window starts with its own round trip, so none is given
// back as too late however long it waited. Each round trip takes 900 ms
// (under the renew interval, TTL/3, that bounds it); two go at a time, of
// up to 1,000 attempts each, so the last of 7,000 is answered 3.6 s after
// the calls were made, past the TTL of 3 s.
func TestQueuedAttemptsTrustFromTheirRoundTrip(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		m := memstore.New(memstore.Config{})
		t.Cleanup(func() { _ = m.Close() })
		b := setup(t, slowAcquires{Store: m, delay: 900 * time.Millisecond}, tenure.Config{TTL: 3 * time.Second, Label: "many"})

		const n = 7000
		errs := make(chan error, n)
		for i := range n {
			go func() {
				_, err := b.client.Acquire(t.Context(), fmt.Sprintf("shard-%04d", i))
				errs <- err
			}()
		}
		for range n {
			require.NoError(t, <-errs)
		}
	})
}

// gatedBatches is a memstore whose acquisitions wait at a gate: each
// round trip (a lone Acquire or an AcquireBatch) is counted, then held
// until the test opens the gate.
type gatedBatches struct {
	batchCounter
	gate chan struct{}
}

func (s *gatedBatches) Acquire(ctx context.Context, p store.AcquireParams) (store.Grant, error) {
	s.mu.Lock()
	s.singles++
	s.mu.Unlock()
	<-s.gate
	return s.Store.Acquire(ctx, p)
}

func (s *gatedBatches) AcquireBatch(ctx context.Context, ps []store.AcquireParams) ([]store.AcquireResult, error) {
	s.mu.Lock()
	s.batches = append(s.batches, len(ps))
	s.mu.Unlock()
	<-s.gate
	return s.Store.AcquireBatch(ctx, ps)
}

func TestAcquireCallsMadeMeanwhileGoTogether(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		m := memstore.New(memstore.Config{})
		t.Cleanup(func() { _ = m.Close() })
		gated := &gatedBatches{batchCounter: batchCounter{Store: m}, gate: make(chan struct{})}
		b := setup(t, gated, tenure.Config{TTL: ttl, Label: "many"})

		const n = 300
		won := make(chan *tenure.Lease, n)
		acquire := func(i int) {
			l, err := b.client.Acquire(t.Context(), fmt.Sprintf("shard-%03d", i))
			if err == nil {
				won <- l
			}
		}
		go acquire(0)
		synctest.Wait()
		go acquire(1)
		synctest.Wait()
		for i := 2; i < n; i++ {
			go acquire(i)
		}
		synctest.Wait()
		gated.mu.Lock()
		require.Equal(t, 2, gated.singles, "the first two calls go at once, each alone")
		require.Empty(t, gated.batches, "the others wait while two round trips are out")
		gated.mu.Unlock()

		close(gated.gate)
		for range n {
			awaitLease(t, won, "the client")
		}
		gated.mu.Lock()
		defer gated.mu.Unlock()
		require.Equal(t, []int{n - 2}, gated.batches, "the calls made meanwhile go in one round trip")
	})
}
