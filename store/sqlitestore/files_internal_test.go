package sqlitestore

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store"
)

// TestStoresOfOneFileQueueTogether: two Stores of one process on one file
// take turns at its write lock through one queue, so a write of one
// waits behind a write of the other in that queue (and gives up there
// after the busy timeout) instead of in SQLite's busy handler; a Store on
// another file does not wait. The queue is forgotten once its last Store
// is closed.
func TestStoresOfOneFileQueueTogether(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "leases.db")
	open := func(path string) *Store {
		s, err := Open(t.Context(), path, Config{BusyTimeout: 200 * time.Millisecond})
		require.NoError(t, err)
		return s
	}
	first, second, other := open(path), open(path), open(filepath.Join(dir, "other.db"))

	inside, leave := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- first.writeTx(t.Context(), "hold", func(*write) error {
			close(inside)
			<-leave
			return nil
		})
	}()
	testutil.Receive(t, inside, "the first Store's write", 5*time.Second)

	h := store.Holder{Label: "second", Instance: "1"}
	_, err := second.Acquire(t.Context(), store.AcquireParams{Name: "billing", Holder: h, TTL: time.Minute})
	require.ErrorIs(t, err, store.ErrUnavailable)
	require.ErrorContains(t, err, "other calls of this process kept",
		"the second Store waited in the process's queue, not in SQLite's busy handler")
	_, err = other.Acquire(t.Context(), store.AcquireParams{Name: "billing", Holder: h, TTL: time.Minute})
	require.NoError(t, err, "a Store on another file does not wait")

	close(leave)
	require.NoError(t, testutil.Receive(t, done, "the first Store's write to end", 5*time.Second))
	_, err = second.Acquire(t.Context(), store.AcquireParams{Name: "billing", Holder: h, TTL: time.Minute})
	require.NoError(t, err)

	for _, s := range []*Store{first, second, other} {
		require.NoError(t, s.Close())
	}
	files.Lock()
	defer files.Unlock()
	for _, s := range []*Store{first, other} {
		require.NotContains(t, files.open, s.Path(), "no queue outlives its Stores")
	}
}
