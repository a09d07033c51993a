package tenure_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
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
