package sqlitestore_test

import (
	"context"
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/store"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store/sqlitestore"
	"github.com/tenure-dev/tenure/store/storetest"
)

// harness gives the conformance suite a store on a fresh file per call.
// base is a store of its own, for the round trip benchmarks compare with.
type harness struct{ base *sqlitestore.Store }

func newHarness(tb testing.TB) harness {
	return harness{base: openStore(tb, filepath.Join(tb.TempDir(), "base.db"), sqlitestore.Config{})}
}

func (harness) NewStore(tb testing.TB) store.Store {
	return openStore(tb, filepath.Join(tb.TempDir(), "tenure.db"), sqlitestore.Config{})
}

func (h harness) Capabilities() storetest.Capabilities {
	return storetest.Capabilities{
		Notify: true,
		Line:   true,
		RoundTrip: func(ctx context.Context) error {
			var one int
			return h.base.DB().QueryRowContext(ctx, "SELECT 1").Scan(&one)
		},
		Faults: storetest.Faults{
			NoCut:    "an SQLite store is a file this process opens: there is no connection to cut",
			NewStore: newFaultyStore,
		},
	}
}

// newFaultyStore returns a store on a file of its own, whose restart is a
// restart of the process: the store is closed and the file opened again.
func newFaultyStore(tb testing.TB) (store.Store, storetest.Fault) {
	path := filepath.Join(tb.TempDir(), "tenure.db")
	st, err := sqlitestore.Open(tb.Context(), path, sqlitestore.Config{})
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = st.Close() })
	return st, storetest.Fault{Restart: func(tb testing.TB) store.Store {
		require.NoError(tb, st.Close())
		return openStore(tb, path, sqlitestore.Config{})
	}}
}

func TestStore(t *testing.T) {
	t.Parallel()
	storetest.Run(t, newHarness(t))
}

func BenchmarkStore(b *testing.B) { storetest.Benchmark(b, newHarness(b)) }

// openStore opens path and closes the store when tb ends.
func openStore(tb testing.TB, path string, cfg sqlitestore.Config) *sqlitestore.Store {
	tb.Helper()
	st, err := sqlitestore.Open(tb.Context(), path, cfg)
	require.NoError(tb, err)
	tb.Cleanup(func() { require.NoError(tb, st.Close()) })
	return st
}

// TestAcquireBatchReportsEachRefusalInPlace sends a batch whose middle
// entry has a TTL too long to store: it is refused in its place, nothing
// is written for it, and the entries around it are granted in the same
// transaction.
func TestAcquireBatchReportsEachRefusalInPlace(t *testing.T) {
	t.Parallel()
	st := openStore(t, filepath.Join(t.TempDir(), "tenure.db"), sqlitestore.Config{})
	h := testutil.Holder(t, "holder")
	res, err := st.AcquireBatch(t.Context(), []store.AcquireParams{
		{Name: "first", Holder: h, TTL: time.Minute},
		{Name: "forever", Holder: h, TTL: math.MaxInt64},
		{Name: "last", Holder: h, TTL: time.Minute},
	})
	require.NoError(t, err)
	require.Len(t, res, 3)
	require.NoError(t, res[0].Err)
	require.ErrorIs(t, res[1].Err, store.ErrInvalid)
	require.Contains(t, res[1].Err.Error(), "too long to store")
	require.NoError(t, res[2].Err)
	require.Greater(t, res[2].Grant.Token, res[0].Grant.Token)
	_, err = st.Get(t.Context(), "forever")
	require.ErrorIs(t, err, store.ErrNotFound, "nothing is written for the refused entry")
}
