package sqliteserver

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/sqlitestore"
	"github.com/tenure-dev/tenure/store/storetest"
)

// SQLiteHarness gives the conformance suite sqlitestore stores, each on a
// file of its own.
type SQLiteHarness struct {
	// Probe is a store of its own for the benchmark's round trip; nil
	// leaves the round trip unmeasured.
	Probe *sqlitestore.Store
}

// NewStore implements [storetest.Harness].
func (SQLiteHarness) NewStore(tb testing.TB) store.Store {
	tb.Helper()
	return SQLiteStore(tb, filepath.Join(tb.TempDir(), "tenure.db"), sqlitestore.Config{})
}

// Capabilities implements [storetest.Harness]: SQLite notifies (in this
// process at once, across processes by polling), keeps followers in line
// and expires exactly; a restart is a restart of the process.
func (h SQLiteHarness) Capabilities() storetest.Capabilities {
	caps := storetest.Capabilities{
		Notify: true,
		Line:   true,
		Faults: storetest.Faults{
			NoCut:    "an SQLite store is a file this process opens: there is no connection to cut",
			NewStore: sqliteFaultyStore,
		},
	}
	if h.Probe != nil {
		caps.RoundTrip = func(ctx context.Context) error {
			var one int
			return h.Probe.DB().QueryRowContext(ctx, "SELECT 1").Scan(&one)
		}
	}
	return caps
}

// sqliteFaultyStore returns a store on a file of its own, whose restart is
// a restart of the process: the store is closed and the file opened again.
func sqliteFaultyStore(tb testing.TB) (store.Store, storetest.Fault) {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "tenure.db")
	s := SQLiteStore(tb, path, sqlitestore.Config{})
	return s, storetest.Fault{Restart: func(tb testing.TB) store.Store {
		tb.Helper()
		if err := s.Close(); err != nil {
			tb.Fatalf("testserver: close %s: %v", path, err)
		}
		return SQLiteStore(tb, path, sqlitestore.Config{})
	}}
}

// SQLiteStore opens the store at path and closes it when tb ends (a
// store the test closed first included).
func SQLiteStore(tb testing.TB, path string, cfg sqlitestore.Config) *sqlitestore.Store {
	tb.Helper()
	s, err := sqlitestore.Open(tb.Context(), path, cfg)
	if err != nil {
		tb.Fatalf("testserver: %v", err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("testserver: close %s: %v", path, err)
		}
	})
	return s
}
