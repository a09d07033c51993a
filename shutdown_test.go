package tenure_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure"
	"github.com/tenure-dev/tenure/internal/testserver"
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
			st := testserver.PostgresHarness{Owner: testserver.PostgresPool(t, pgx.QueryExecModeCacheStatement, "")}.NewStore(t)
			return st.(batchStore)
		}},
		{"Redis", func(t *testing.T) batchStore {
			return testserver.RedisHarness{Client: testserver.RedisClient(t)}.NewStore(t).(batchStore)
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
