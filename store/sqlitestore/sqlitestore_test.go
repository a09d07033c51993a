package sqlitestore_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/tenure-dev/tenure/store"

	"github.com/stretchr/testify/require"

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
	return storetest.Capabilities{Notify: true, Line: true, RoundTrip: func(ctx context.Context) error {
		var one int
		return h.base.DB().QueryRowContext(ctx, "SELECT 1").Scan(&one)
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
