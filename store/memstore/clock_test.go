package memstore_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/store"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store/memstore"
)

// fakeClock is a clock that moves only when told to.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func TestInjectedClock(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{now: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}
	s := memstore.New(memstore.Config{Clock: clock.Now})
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	ctx := t.Context()
	a, b := testutil.Holder(t, "a"), testutil.Holder(t, "b")
	const ttl = 10 * time.Second

	g, err := s.Acquire(ctx, store.AcquireParams{Name: "job", Holder: a, TTL: ttl})
	require.NoError(t, err)
	require.Equal(t, store.Grant{Name: "job", Holder: a, Token: 1, Seq: 1, Remaining: ttl, At: clock.Now()}, g, "the grant reports the store's clock")
	r, err := s.Get(ctx, "job")
	require.NoError(t, err)
	require.Equal(t, clock.Now(), r.AcquiredAt)

	clock.Advance(ttl - time.Millisecond)
	_, err = s.Acquire(ctx, store.AcquireParams{Name: "job", Holder: b, TTL: ttl})
	require.Equal(t, &store.HeldError{Name: "job", Holder: a, Token: 1, Seq: 1, Remaining: time.Millisecond}, err)

	clock.Advance(time.Millisecond)
	r, err = s.Get(ctx, "job")
	require.NoError(t, err)
	require.Equal(t, store.StateExpired, r.State, "a lease expires at its expiry, not after")
	rs, err := s.Renew(ctx, []store.RenewParams{{Name: "job", Holder: a, Token: 1, Seq: 1, TTL: ttl}})
	require.NoError(t, err)
	require.Equal(t, []store.RenewResult{{Grant: store.Grant{Name: "job", Token: 1, Seq: 1}}}, rs)

	g, err = s.Acquire(ctx, store.AcquireParams{Name: "job", Holder: b, TTL: ttl})
	require.NoError(t, err)
	require.Equal(t, store.Token(2), g.Token)

	clock.Advance(4 * time.Second)
	rs, err = s.Renew(ctx, []store.RenewParams{{Name: "job", Holder: b, Token: 2, Seq: 1, TTL: 2 * ttl}})
	require.NoError(t, err)
	require.Equal(t, []store.RenewResult{{Renewed: true, Grant: store.Grant{Name: "job", Holder: b, Token: 2, Seq: 2, Remaining: 2 * ttl, At: clock.Now()}}}, rs,
		"a renewal sets the expiry to the store's now plus the new TTL")
}

func TestCancelledContext(t *testing.T) {
	t.Parallel()
	s := memstore.New(memstore.Config{})
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	h := testutil.Holder(t, "a")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()

	_, err := s.Acquire(ctx, store.AcquireParams{Name: "job", Holder: h, TTL: time.Minute})
	requireNotAttempted(t, err)
	_, err = s.Renew(ctx, []store.RenewParams{{Name: "job", Holder: h, Token: 1, Seq: 1, TTL: time.Minute}})
	requireNotAttempted(t, err)
	requireNotAttempted(t, s.Release(ctx, store.ReleaseParams{Name: "job", Holder: h, Token: 1}))
	_, err = s.Get(ctx, "job")
	requireNotAttempted(t, err)
	_, err = s.List(ctx)
	requireNotAttempted(t, err)

	_, err = s.Get(t.Context(), "job")
	require.ErrorIs(t, err, store.ErrNotFound, "a call with a done context changes nothing")
}

func requireNotAttempted(t *testing.T, err error) {
	t.Helper()
	require.ErrorIs(t, err, store.ErrUnavailable)
	require.ErrorIs(t, err, context.Canceled)
}

func TestSlowListenerDoesNotBlock(t *testing.T) {
	t.Parallel()
	s := memstore.New(memstore.Config{})
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	ctx := t.Context()
	h := testutil.Holder(t, "a")

	entered := make(chan struct{})
	unblock := make(chan struct{})
	var mu sync.Mutex
	var got []string
	delivered := make(chan struct{}, 1)
	notify := func(n store.Notice) {
		mu.Lock()
		got = append(got, n.Name)
		first := len(got) == 1
		mu.Unlock()
		if first {
			close(entered)
			<-unblock
		}
		select {
		case delivered <- struct{}{}:
		default:
		}
	}
	listenCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Listen(listenCtx, notify) }()
	t.Cleanup(func() {
		stop()
		require.ErrorIs(t, <-done, context.Canceled)
	})

	cycle := func(name string) {
		g, err := s.Acquire(ctx, store.AcquireParams{Name: name, Holder: h, TTL: time.Minute})
		require.NoError(t, err)
		require.NoError(t, s.Release(ctx, store.ReleaseParams{Name: name, Holder: h, Token: g.Token}))
	}
	// Listen may not have subscribed yet: release until it has.
	for waiting := true; waiting; {
		cycle("warmup")
		select {
		case <-entered:
			waiting = false
		case <-time.After(10 * time.Millisecond):
		}
	}

	var want []string
	for i := range 100 {
		name := fmt.Sprintf("lease-%03d", i)
		cycle(name)
		want = append(want, name, name) // acquired, released
	}
	close(unblock)

	// The notices of the warmup and the subscription's empty notice come
	// first; those of the leases follow, each acquired then released.
	timeout := time.After(10 * time.Second)
	for {
		mu.Lock()
		var leases []string
		for _, name := range got {
			if strings.HasPrefix(name, "lease-") {
				leases = append(leases, name)
			}
		}
		n := len(leases)
		mu.Unlock()
		if n >= len(want) {
			require.Equal(t, want, leases, "every notification arrives, in order")
			return
		}
		select {
		case <-delivered:
		case <-timeout:
			t.Fatalf("only %d notifications arrived", n)
		}
	}
}

func TestListenInput(t *testing.T) {
	t.Parallel()
	s := memstore.New(memstore.Config{})
	require.ErrorIs(t, s.Listen(t.Context(), nil), store.ErrInvalid)
	require.NoError(t, s.Close())
	require.NoError(t, s.Close(), "closing twice is harmless")
	require.ErrorIs(t, s.Listen(t.Context(), func(store.Notice) {}), store.ErrClosed)
}
