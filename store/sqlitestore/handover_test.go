package sqlitestore_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure"
	"github.com/tenure-dev/tenure/internal/testserver/sqliteserver"
	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/sqlitestore"
)

// refusals is a real store that reports each acquisition it refused
// because the lease was held: the event that a campaign is waiting.
type refusals struct {
	*sqlitestore.Store // Listen and the rest are the store's own
	held               chan struct{}
}

func (r refusals) Acquire(ctx context.Context, p store.AcquireParams) (store.Grant, error) {
	g, err := r.Store.Acquire(ctx, p)
	if errors.Is(err, store.ErrHeld) {
		select {
		case r.held <- struct{}{}:
		default:
		}
	}
	return g, err
}

// runClient runs a client on s until the test ends.
func runClient(t testing.TB, s store.Store, label string) *tenure.Client {
	t.Helper()
	c, err := tenure.New(s, tenure.Config{Label: label, TTL: time.Minute})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = c.Run(ctx) }) // Run returns nil once ctx ends.
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	return c
}

// TestHandoverWithoutWaitingForExpiry: a follower in another "process"
// (its own Store on the same file) that is campaigning for a lease held
// with a TTL of one minute takes it over as soon as the holder releases
// it, because Listen tells it of the release, rather than at the expiry
// it was told: its campaign must succeed within 10 s.
func TestHandoverWithoutWaitingForExpiry(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "tenure.db")
	leaderStore := sqliteserver.SQLiteStore(t, path, sqlitestore.Config{})
	follower := refusals{Store: sqliteserver.SQLiteStore(t, path, sqlitestore.Config{}), held: make(chan struct{}, 1)}

	leader := runClient(t, leaderStore, "leader")
	lease, err := leader.Acquire(t.Context(), "nightly")
	require.NoError(t, err)
	first := lease.Token()

	campaign := make(chan *tenure.Lease, 1)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	client := runClient(t, follower, "follower")
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		l, err := client.Campaign(ctx, "nightly")
		if err != nil {
			t.Errorf("campaign: %v", err)
		}
		campaign <- l
	})
	select {
	case <-follower.held: // the campaign was told the lease is held for a minute
	case <-ctx.Done():
		t.Fatal("the follower's campaign never asked for the lease")
	}
	require.NoError(t, lease.Release(t.Context()))

	next := <-campaign
	require.NotNil(t, next, "the follower did not take over before its 10 s deadline; the TTL is 1 minute")
	require.Greater(t, next.Token(), first)
}
