package storekit_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/storekit"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store"
)

// backend is a shared loop for a hub: it counts its runs, reports its
// subscription, and passes on what the test sends.
type backend struct {
	runs    atomic.Int32
	running atomic.Int32
	send    chan store.Notice
}

func (b *backend) run(ctx context.Context, notify func(store.Notice)) {
	b.runs.Add(1)
	b.running.Add(1)
	defer b.running.Add(-1)
	notify(store.Notice{})
	for {
		select {
		case <-ctx.Done():
			return
		case n := <-b.send:
			notify(n)
		}
	}
}

// listen runs listen (a hub's or a subscription's) until the returned stop
// is called, which waits for it to return.
func listen(t *testing.T, run func(context.Context, func(store.Notice))) (*testutil.Notifications, func()) {
	t.Helper()
	r := testutil.NewNotifications()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		run(ctx, r.Notify)
	}()
	stop := func() {
		cancel()
		<-done
	}
	t.Cleanup(stop)
	return r, stop
}

func TestHub(t *testing.T) {
	t.Parallel()

	t.Run("OneBackendForEveryListener", func(t *testing.T) {
		t.Parallel()
		b, hub := newHub()
		first, stopFirst := listen(t, hub.Listen)
		require.True(t, first.Wait("", time.Minute), "the first listener hears the subscription")
		second, stopSecond := listen(t, hub.Listen)
		require.True(t, second.Wait("", time.Minute), "a later listener is told at once that the loop is subscribed")

		b.send <- store.Notice{Name: "billing", Kind: store.NoticeReleased}
		require.True(t, first.Wait("billing", time.Minute))
		require.True(t, second.Wait("billing", time.Minute))
		require.Equal(t, int32(1), b.runs.Load(), "one backend loop serves both")

		stopFirst()
		b.send <- store.Notice{Name: "payroll"}
		require.True(t, second.Wait("payroll", time.Minute), "the loop serves whoever still listens")
		stopSecond()
		require.Zero(t, b.running.Load(), "the loop stops with the last listener")

		third, _ := listen(t, hub.Listen)
		require.True(t, third.Wait("", time.Minute))
		require.Equal(t, int32(2), b.runs.Load(), "a listener after the last one left starts the loop again")
	})

	t.Run("SlowListenerIsToldWhatItMissed", func(t *testing.T) {
		t.Parallel()
		b, hub := newHub()
		overflow(t, b, hub.Listen)
	})
}

// stalled runs run (a hub's or a subscription's Listen) with a notify that
// stalls on the subscription's notice until release is closed, and records
// what comes after it. It returns once the listener has stalled.
func stalled(t *testing.T, run func(context.Context, func(store.Notice))) (later *testutil.Notifications, release chan struct{}) {
	t.Helper()
	later = testutil.NewNotifications()
	release = make(chan struct{})
	subscribed := make(chan struct{})
	first := true
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		run(ctx, func(n store.Notice) {
			if first { // the subscription: the listener stalls here
				first = false
				close(subscribed)
				<-release
				return
			}
			later.Notify(n)
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
	<-subscribed
	return later, release
}

// newHub returns a hub over a backend whose notices the test sends.
func newHub() (*backend, *storekit.Hub) {
	b := &backend{send: make(chan store.Notice)}
	return b, storekit.NewHub(b.run)
}

// overflow checks that a listener (run, a hub's or a subscription's
// Listen) that falls behind while b announces lease more often than its
// queue holds drops what did not fit and hears that it missed notices.
func overflow(t *testing.T, b *backend, run func(context.Context, func(store.Notice))) {
	t.Helper()
	later, release := stalled(t, run)
	const sent = 1500 // more than a listener's queue holds
	for range sent {
		b.send <- store.Notice{Name: "lease", Kind: store.NoticeAcquired, Remaining: time.Second}
	}
	close(release)
	require.True(t, later.Wait("", time.Minute), "the listener that fell behind hears that it missed notices")
	require.Less(t, later.Count("lease"), sent-1, "what did not fit was dropped, not queued without bound")
}

// heardOnly checks that r heard want, in order, and nothing else: call it
// once the last of want has arrived, since a listener hears in order.
func heardOnly(t *testing.T, r *testutil.Notifications, want ...string) {
	t.Helper()
	var got []string
	for _, n := range r.All() {
		got = append(got, n.Name)
	}
	require.Equal(t, want, got)
}

func TestHubSubscription(t *testing.T) {
	t.Parallel()

	t.Run("HearsWhatItFollowsAndTheEmptyNotice", func(t *testing.T) {
		t.Parallel()
		b, hub := newHub()
		sub := hub.Subscribe()
		sub.Follow("billing") // before Listen: indexed when it starts
		r, _ := listen(t, sub.Listen)
		require.True(t, r.Wait("", time.Minute))
		sub.Follow("payroll")
		sub.Follow("payroll") // a second Follow changes nothing
		everything, _ := listen(t, hub.Listen)
		require.True(t, everything.Wait("", time.Minute))

		for _, name := range []string{"reports", "billing", "audit", "payroll"} {
			b.send <- store.Notice{Name: name, Kind: store.NoticeReleased}
		}
		b.send <- store.Notice{} // as after a reconnection
		require.True(t, everything.WaitCount("", 2, time.Minute))
		require.True(t, r.WaitCount("", 2, time.Minute))
		heardOnly(t, r, "", "billing", "payroll", "")
		heardOnly(t, everything, "", "reports", "billing", "audit", "payroll", "")

		sub.Unfollow("billing")
		sub.Unfollow("billing") // unfollowing what is not followed changes nothing
		b.send <- store.Notice{Name: "billing"}
		b.send <- store.Notice{Name: "payroll"}
		require.True(t, r.WaitCount("payroll", 2, time.Minute))
		heardOnly(t, r, "", "billing", "payroll", "", "payroll")
	})

	t.Run("EveryListenCallHearsTheNamesFollowed", func(t *testing.T) {
		t.Parallel()
		b, hub := newHub()
		sub := hub.Subscribe()
		sub.Follow("billing")
		first, stopFirst := listen(t, sub.Listen)
		second, _ := listen(t, sub.Listen)
		require.True(t, first.Wait("", time.Minute))
		require.True(t, second.Wait("", time.Minute))
		b.send <- store.Notice{Name: "billing"}
		require.True(t, first.Wait("billing", time.Minute))
		require.True(t, second.Wait("billing", time.Minute))

		stopFirst()
		third, _ := listen(t, sub.Listen)
		require.True(t, third.Wait("", time.Minute))
		sub.Follow("payroll")
		b.send <- store.Notice{Name: "payroll"}
		require.True(t, second.Wait("payroll", time.Minute))
		require.True(t, third.Wait("payroll", time.Minute))
		heardOnly(t, third, "", "payroll")
	})

	t.Run("FollowWhileNoticesFlow", func(t *testing.T) {
		t.Parallel()
		b, hub := newHub()
		sub := hub.Subscribe()
		r, _ := listen(t, sub.Listen)
		require.True(t, r.Wait("", time.Minute))
		// Meanwhile other goroutines change what it follows (names never
		// announced) and what another subscription follows, and announce
		// those names.
		other := hub.Subscribe()
		listen(t, other.Listen)
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		t.Cleanup(func() { cancel(); wg.Wait() })
		for g := range 4 {
			wg.Go(func() {
				for i := 0; ctx.Err() == nil; i++ {
					quiet, noisy := fmt.Sprintf("quiet-%d-%d", g, i%8), fmt.Sprintf("noisy-%d-%d", g, i%8)
					sub.Follow(quiet)
					other.Follow(noisy)
					select {
					case b.send <- store.Notice{Name: noisy}:
					case <-ctx.Done():
					}
					sub.Unfollow(quiet)
					other.Unfollow(noisy)
				}
			})
		}
		for i := range 200 {
			name := fmt.Sprintf("lease-%d", i)
			sub.Follow(name)
			b.send <- store.Notice{Name: name}
			require.True(t, r.Wait(name, time.Minute), "a notice sent after Follow returned arrives")
			sub.Unfollow(name)
			b.send <- store.Notice{Name: name}
			b.send <- store.Notice{} // a marker: what was sent before it has been handed out
			require.True(t, r.WaitCount("", i+2, time.Minute))
			require.Equal(t, 1, r.Count(name), "a notice sent after Unfollow returned does not")
		}
	})

	t.Run("OverflowTellsWhatItMissed", func(t *testing.T) {
		t.Parallel()
		b, hub := newHub()
		sub := hub.Subscribe()
		sub.Follow("lease")
		overflow(t, b, sub.Listen)
	})

	t.Run("NamesNotFollowedFillNoQueue", func(t *testing.T) {
		t.Parallel()
		b, hub := newHub()
		sub := hub.Subscribe()
		sub.Follow("lease")
		later, release := stalled(t, sub.Listen)
		for range 1500 {
			b.send <- store.Notice{Name: "other", Kind: store.NoticeAcquired, Remaining: time.Second}
		}
		b.send <- store.Notice{Name: "lease"}
		close(release)
		require.True(t, later.Wait("lease", time.Minute))
		heardOnly(t, later, "lease")
	})
}
