package sqlitestore_test

import (
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/store"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/testserver/sqliteserver"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store/sqlitestore"
	"github.com/tenure-dev/tenure/store/storetest"
)

func newHarness(tb testing.TB) sqliteserver.SQLiteHarness {
	return sqliteserver.SQLiteHarness{Probe: sqliteserver.SQLiteStore(tb, filepath.Join(tb.TempDir(), "base.db"), sqlitestore.Config{})}
}

func TestStore(t *testing.T) {
	t.Parallel()
	storetest.Run(t, newHarness(t))
}

func BenchmarkStore(b *testing.B) { storetest.Benchmark(b, newHarness(b)) }

// TestAcquireBatchReportsEachRefusalInPlace sends a batch whose middle
// entry has a TTL too long to store: it is refused in its place, nothing
// is written for it, and the entries around it are granted in the same
// transaction.
func TestAcquireBatchReportsEachRefusalInPlace(t *testing.T) {
	t.Parallel()
	st := sqliteserver.SQLiteStore(t, filepath.Join(t.TempDir(), "tenure.db"), sqlitestore.Config{})
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
