// Package ttltest checks, with a real tenure client over a real store,
// that a TTL the store keeps in a coarser unit never leaves the client
// waiting: a TTL with a fraction either acquires at the first attempt or
// is refused when the client is made, with the store's unit and the TTLs
// to use in the message. The store packages' tests call it; it imports
// testing and is for tests only.
package ttltest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store"
)

// acquireTimeout bounds the one acquisition each case makes: far more
// than a round trip, far less than a silent wait.
const acquireTimeout = 15 * time.Second

// Run checks that st keeps TTLs in unit ([store.TTLUnitOf]) and, for a
// TTL with a fraction of a second and one with a fraction of a
// microsecond (both above the store's floor), that a client either
// acquires with it at the first attempt, granted at most that TTL, or is
// refused at [tenure.New] with an error that names the unit, because the
// TTL is no whole number of it.
func Run(t *testing.T, st store.Store, unit time.Duration) {
	t.Helper()
	require.Equal(t, unit, store.TTLUnitOf(st), "the unit the store keeps TTLs in")
	base := store.MinTTLOf(st) + 1250*time.Millisecond
	for _, tc := range []struct {
		name string
		ttl  time.Duration
	}{
		{"FractionOfASecond", base},
		{"FractionOfAMicrosecond", base + 500*time.Nanosecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			check(t, st, tc.ttl, unit)
		})
	}
}

func check(t *testing.T, st store.Store, ttl, unit time.Duration) {
	c, err := tenure.New(st, tenure.Config{Label: "ttl", TTL: ttl})
	if ttl%unit != 0 {
		require.ErrorIs(t, err, tenure.ErrInvalid, "TTL %s on a store that keeps %s", ttl, unit)
		var ue *store.TTLUnitError
		require.ErrorAs(t, err, &ue)
		require.Equal(t, unit, ue.Unit)
		require.Contains(t, err.Error(), "TTL "+ttl.String()+": the store keeps TTLs in ")
		up := (ttl.Truncate(unit) + unit).String()
		require.Contains(t, err.Error(), "; use ", "the TTLs to use instead")
		require.Contains(t, err.Error(), up, "the next TTL the store keeps as asked")
		return
	}
	require.NoError(t, err, "TTL %s on a store that keeps %s", ttl, unit)
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- c.Run(ctx) }()
	defer func() {
		cancel()
		require.NoError(t, <-ran)
	}()
	actx, stop := context.WithTimeout(t.Context(), acquireTimeout)
	defer stop()
	l, err := c.Acquire(actx, testutil.UniqueName(t))
	require.NoError(t, err, "one attempt acquires a free lease with TTL %s", ttl)
	require.Positive(t, l.Token())
	require.LessOrEqual(t, l.Remaining(), ttl, "trusted for at most the TTL asked")
	require.NoError(t, l.Release(t.Context()))
}
