package tenure_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure"
	"github.com/tenure-dev/tenure/internal/testserver/pgserver"
	"github.com/tenure-dev/tenure/internal/testserver/redisserver"
	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/memstore"
)

// batchCounting counts how a store is asked to release.
type batchCounting struct {
	batchStore
	releases, batches, batched atomic.Int64
}

type batchStore interface {
	store.Store
	store.BatchReleaser
}

func (s *batchCounting) Release(ctx context.Context, p store.ReleaseParams) error {
	s.releases.Add(1)
	return s.batchStore.Release(ctx, p)
}

func (s *batchCounting) ReleaseBatch(ctx context.Context, ps []store.ReleaseParams) ([]error, error) {
	s.batches.Add(1)
	s.batched.Add(int64(len(ps)))
	return s.batchStore.ReleaseBatch(ctx, ps)
}

// TestShutdownReleasesInOneBatch: a client that stops gives back every
// lease it holds in one call to a store that releases in batches.
func TestShutdownReleasesInOneBatch(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		open func(t *testing.T) batchStore
	}{
		{"Memory", func(t *testing.T) batchStore {
			m := memstore.New(memstore.Config{})
			t.Cleanup(func() { _ = m.Close() })
			return m
		}},
		{"Postgres", func(t *testing.T) batchStore {
			st := pgserver.PostgresHarness{Owner: pgserver.PostgresPool(t, pgx.QueryExecModeCacheStatement, "")}.NewStore(t)
			return st.(batchStore)
		}},
		{"Redis", func(t *testing.T) batchStore {
			return redisserver.RedisHarness{Client: redisserver.RedisClient(t)}.NewStore(t).(batchStore)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st := &batchCounting{batchStore: tc.open(t)}
			c, err := tenure.New(st, tenure.Config{Label: "worker"})
			require.NoError(t, err)
			ctx, cancel := context.WithCancel(t.Context())
			ran := make(chan error, 1)
			go func() { ran <- c.Run(ctx) }()

			const n = 50
			tokens := make(map[string]store.Token, n)
			for i := range n {
				l, err := c.Acquire(t.Context(), fmt.Sprintf("job-%02d", i))
				require.NoError(t, err)
				tokens[l.Name()] = l.Token()
			}
			cancel()
			require.NoError(t, <-ran)

			require.Equal(t, int64(1), st.batches.Load(), "one batch")
			require.Equal(t, int64(n), st.batched.Load(), "of every lease")
			require.Zero(t, st.releases.Load(), "and no release one by one")
			for name, token := range tokens {
				rec, err := st.Get(t.Context(), name)
				require.NoError(t, err)
				require.Equal(t, store.StateReleased, rec.State, name)
				require.Equal(t, token, rec.Token, name)
			}
		})
	}
}

// slowBatches takes a while over each batch of releases.
type slowBatches struct {
	*memstore.Store
	each time.Duration
}

func (s slowBatches) ReleaseBatch(ctx context.Context, ps []store.ReleaseParams) ([]error, error) {
	select {
	case <-time.After(s.each):
		return s.Store.ReleaseBatch(ctx, ps)
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: %w", store.ErrUnavailable, ctx.Err())
	}
}

// TestShutdownGivesEachBatchItsOwnTime: a shutdown that gives back more
// leases than one batch carries bounds each batch's wait for the store,
// not the whole, so the last batch is released too when every batch
// alone answers in time.
func TestShutdownGivesEachBatchItsOwnTime(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		m := memstore.New(memstore.Config{})
		defer m.Close()
		c, err := tenure.New(slowBatches{Store: m, each: 3 * time.Second}, tenure.Config{})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(t.Context())
		ran := make(chan error, 1)
		go func() { ran <- c.Run(ctx) }()

		n := store.MaxRenewBatch + 1
		names := make(chan string, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				l, err := c.Acquire(t.Context(), fmt.Sprintf("job-%05d", i))
				if assert.NoError(t, err) {
					names <- l.Name()
				}
			})
		}
		wg.Wait()
		close(names)
		cancel()
		require.NoError(t, <-ran)
		released := 0
		for name := range names {
			rec, err := m.Get(t.Context(), name)
			require.NoError(t, err)
			if rec.State == store.StateReleased {
				released++
			}
		}
		require.Equal(t, n, released, "two batches of 3 s each, every lease released")
	})
}

// startRun starts c's Run and returns what stops it: cancel, then the
// channel Run's result arrives on.
func startRun(c *tenure.Client) (context.CancelFunc, <-chan error) {
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- c.Run(ctx) }()
	return cancel, ran
}

// TestShutdownReleasesDoOnlyAfterItsWorkReturned: a Run that ends while
// a Do callback runs cancels the callback and releases the lease only
// once the callback has returned, not before.
func TestShutdownReleasesDoOnlyAfterItsWorkReturned(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		m := memstore.New(memstore.Config{})
		defer m.Close()
		c, err := tenure.New(m, tenure.Config{TTL: ttl})
		require.NoError(t, err)
		stop, ran := startRun(c)

		const slowness = 2 * time.Second
		working := make(chan struct{})
		var returnedAt time.Time
		var cause error
		done := make(chan error, 1)
		go func() {
			done <- c.Do(t.Context(), "billing", func(ctx context.Context, l *tenure.Lease) error {
				close(working)
				<-ctx.Done()
				cause = context.Cause(ctx)
				time.Sleep(slowness) // the work takes a while to stop
				returnedAt = time.Now()
				return nil
			})
		}()
		<-working
		stop()

		synctest.Wait()
		require.Equal(t, store.StateHeld, getRecord(t, m, "billing").State, "not released while the work runs")
		require.NoError(t, <-ran)
		err = <-done
		require.ErrorIs(t, err, tenure.ErrLost)
		var lost *tenure.LostError
		require.ErrorAs(t, cause, &lost, "the work's ctx ends with the tenure")
		require.Equal(t, tenure.LossClosed, lost.Reason)

		require.Equal(t, store.StateReleased, getRecord(t, m, "billing").State, "released once the work returned")
		released := historyOf(t, m, "billing", store.EventReleased)
		require.Len(t, released, 1)
		require.False(t, released[0].At.Before(returnedAt), "released at %s, before the work returned at %s", released[0].At, returnedAt)
	})
}

// TestShutdownLeavesOverdueWorkToExpire: a Do callback that has not
// returned by its tenure's local deadline keeps the lease from being
// released: Run returns at that deadline and the lease expires at the
// store by its TTL, even when the callback returns later.
func TestShutdownLeavesOverdueWorkToExpire(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		m := memstore.New(memstore.Config{})
		defer m.Close()
		c, err := tenure.New(m, tenure.Config{TTL: ttl})
		require.NoError(t, err)
		stop, ran := startRun(c)

		working := make(chan *tenure.Lease, 1)
		finish := make(chan struct{})
		done := make(chan error, 1)
		go func() {
			done <- c.Do(t.Context(), "billing", func(ctx context.Context, l *tenure.Lease) error {
				working <- l
				<-finish // ignores its ctx
				return nil
			})
		}()
		l := <-working
		trusted := l.Remaining()
		stop()
		stoppedAt := time.Now()
		require.NoError(t, <-ran)
		waited := time.Since(stoppedAt)
		require.Equal(t, trusted, waited, "Run waits for the work exactly until the tenure's local deadline")
		require.Less(t, waited, ttl)
		require.Equal(t, store.StateHeld, getRecord(t, m, "billing").State, "not released: the work may still run")

		close(finish)
		err = <-done
		require.ErrorIs(t, err, tenure.ErrLost)
		require.Empty(t, historyOf(t, m, "billing", store.EventReleased), "never released")
		time.Sleep(ttl)
		require.Equal(t, store.StateExpired, getRecord(t, m, "billing").State, "left to expire")
	})
}

func getRecord(t *testing.T, s store.Store, name string) store.Record {
	t.Helper()
	rec, err := s.Get(t.Context(), name)
	require.NoError(t, err)
	return rec
}

// historyOf returns the events of kind the store recorded for name.
func historyOf(t *testing.T, m *memstore.Store, name string, kind store.EventKind) []store.HistoryEvent {
	t.Helper()
	evs, err := m.History(t.Context(), store.HistoryParams{Name: name})
	require.NoError(t, err)
	var of []store.HistoryEvent
	for _, ev := range evs {
		if ev.Kind == kind {
			of = append(of, ev)
		}
	}
	return of
}

// recorder keeps events in the order they happened.
type recorder struct {
	mu  sync.Mutex
	evs []string
}

func (r *recorder) add(ev string) {
	r.mu.Lock()
	r.evs = append(r.evs, ev)
	r.mu.Unlock()
}

func (r *recorder) events() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.evs)
}

// TestShutdownHandsOverOnlyAfterDoReturnedPostgres: on PostgreSQL, a
// holder whose Run ends while its Do callback takes 2 s to notice lets
// the next holder in only after the callback has returned, while the
// next holder waits for the release (not for the TTL: it hears the
// release at once).
func TestShutdownHandsOverOnlyAfterDoReturnedPostgres(t *testing.T) {
	t.Parallel()
	st := pgserver.PostgresHarness{Owner: pgserver.PostgresPool(t, pgx.QueryExecModeCacheStatement, "")}.NewStore(t)
	const (
		lease    = "invoice-run"
		slowness = 2 * time.Second
		longTTL  = time.Minute // the handover comes from the release, never from an expiry
	)
	first, err := tenure.New(st, tenure.Config{Label: "first", TTL: longTTL})
	require.NoError(t, err)
	next, err := tenure.New(st, tenure.Config{Label: "next", TTL: longTTL})
	require.NoError(t, err)
	stopFirst, firstRan := startRun(first)
	stopNext, nextRan := startRun(next)
	defer func() {
		stopNext()
		require.NoError(t, <-nextRan)
	}()

	var rec recorder
	working := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- first.Do(t.Context(), lease, func(ctx context.Context, l *tenure.Lease) error {
			close(working)
			<-ctx.Done()
			time.Sleep(slowness) // the work notices its end late
			rec.add("first returned")
			return nil
		})
	}()
	<-working
	nextHeld := make(chan *tenure.Lease, 1)
	go func() {
		l, err := next.Campaign(t.Context(), lease)
		if assert.NoError(t, err) {
			rec.add("next wrote")
			nextHeld <- l
		}
	}()
	stopFirst()

	ctx, cancel := context.WithTimeout(t.Context(), longTTL/2)
	defer cancel()
	select {
	case l := <-nextHeld:
		require.NoError(t, l.Release(t.Context()))
	case <-ctx.Done():
		t.Fatalf("the next holder did not get the lease within %s of the first's shutdown: it was not released", longTTL/2)
	}
	require.ErrorIs(t, <-done, tenure.ErrLost)
	require.NoError(t, <-firstRan)
	require.Equal(t, []string{"first returned", "next wrote"}, rec.events(), "the next holder's first write comes after the first's work returned")
}
