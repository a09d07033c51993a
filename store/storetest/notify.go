package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/store"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/testutil"
)

// warmupWait is how long one round of [bundle.ready] waits for its own
// notification before trying again.
const warmupWait = 50 * time.Millisecond

func testNotify(t *testing.T, h Harness) {
	if !h.Capabilities().Notify {
		t.Skip("storetest: the backend does not notify (Capabilities.Notify is false)")
	}

	t.Run("OnRelease", func(t *testing.T) {
		t.Parallel()
		b := setup(t, h)
		r := b.listen(t)
		g := b.acquire(t, name(t), testutil.Holder(t, "holder"), longTTL)
		b.release(t, g)
		await(t, r, g.Name)
	})

	t.Run("OnTakeover", func(t *testing.T) {
		t.Parallel()
		b := setup(t, h)
		g := b.acquire(t, name(t), testutil.Holder(t, "previous"), b.expiring())
		r := b.listen(t)
		b.waitExpiry(t, g.Remaining)
		b.acquire(t, g.Name, testutil.Holder(t, "next"), longTTL)
		await(t, r, g.Name)
	})

	t.Run("AnnouncesSubscription", func(t *testing.T) {
		t.Parallel()
		b := setup(t, h)
		r := b.listen(t)
		// Listen reports with the empty name that it has subscribed (so
		// that callers look again at what they wait for); b.listen has
		// seen it deliver, so it has subscribed.
		await(t, r, "")
	})

	t.Run("SubscriptionHearsWhatItFollows", func(t *testing.T) {
		t.Parallel()
		b := setup(t, h)
		s, ok := b.store.(store.Subscriber)
		if !ok {
			t.Skip("storetest: the backend has no subscriptions (store.Subscriber); a client filters its notices itself")
		}
		sub := s.Subscribe()
		warmup, followed, other := name(t), name(t), name(t)
		sub.Follow(warmup)
		sub.Follow(followed)
		r := b.listenOn(t, sub.Listen, warmup)
		holder := testutil.Holder(t, "holder")
		// Announcements come in the order of the changes: once a lease
		// changed after them is heard of, every earlier one has come.
		mark := func() {
			m := name(t)
			sub.Follow(m)
			b.release(t, b.acquire(t, m, holder, longTTL))
			await(t, r, m)
		}
		b.release(t, b.acquire(t, other, holder, longTTL))
		b.release(t, b.acquire(t, followed, holder, longTTL))
		mark()
		require.Zero(t, r.Count(other), "the subscription heard of a name it does not follow")
		heard := r.Count(followed)
		require.NotZero(t, heard, "the subscription did not hear of a name it follows")

		sub.Unfollow(followed)
		b.release(t, b.acquire(t, followed, holder, longTTL))
		mark()
		require.Equal(t, heard, r.Count(followed), "the subscription heard of a name after Unfollow")
	})

	t.Run("ReturnsOnClose", func(t *testing.T) {
		t.Parallel()
		b := setup(t, h)
		n := b.notifier(t)
		done := make(chan error, 1)
		go func() { done <- n.Listen(context.WithoutCancel(t.Context()), func(store.Notice) {}) }()
		require.NoError(t, b.store.Close())
		select {
		case <-done:
		case <-time.After(eventTimeout):
			t.Fatalf("Listen did not return within %s of Close", eventTimeout)
		}
	})
}

func (b *bundle) notifier(t *testing.T) store.Notifier {
	t.Helper()
	n, ok := b.store.(store.Notifier)
	require.True(t, ok, "Capabilities.Notify is set but %T does not implement store.Notifier", b.store)
	return n
}

// await waits for r to report name.
func await(t *testing.T, r *testutil.Notifications, name string) {
	t.Helper()
	require.True(t, r.Wait(name, eventTimeout), "no notification for lease %q within %s", name, eventTimeout)
}

// listen starts listening on the store and returns once the listener is
// known to receive notifications; it stops it when the test ends.
func (b *bundle) listen(t *testing.T) *testutil.Notifications {
	t.Helper()
	return b.listenOn(t, b.notifier(t).Listen, name(t))
}

// listenOn runs listen (the store's, or a subscription's that follows
// warmup) as [bundle.listen] does, warming up with lease warmup.
func (b *bundle) listenOn(t *testing.T, listen func(context.Context, func(store.Notice)) error, warmup string) *testutil.Notifications {
	t.Helper()
	r := testutil.NewNotifications()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- listen(ctx, r.Notify) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(eventTimeout):
			t.Errorf("Listen did not return within %s of its context ending", eventTimeout)
		}
	})
	b.ready(t, r, done, warmup)
	return r
}

// ready releases lease warmup until the listener reports it, since a
// listener cannot say when it has subscribed.
func (b *bundle) ready(t *testing.T, r *testutil.Notifications, done <-chan error, warmup string) {
	t.Helper()
	holder := testutil.Holder(t, "warmup")
	deadline := time.Now().Add(eventTimeout)
	for time.Now().Before(deadline) {
		select {
		case err := <-done:
			t.Fatalf("Listen returned before the test ended: %v", err)
		default:
		}
		g, err := b.store.Acquire(t.Context(), store.AcquireParams{Name: warmup, Holder: holder, TTL: longTTL})
		require.NoError(t, err)
		b.release(t, g)
		if r.Wait(warmup, warmupWait) {
			return
		}
	}
	t.Fatalf("the listener saw no release within %s", eventTimeout)
}
