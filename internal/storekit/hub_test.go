package storekit_test

import (
	"context"
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

// listen runs hub.Listen until the returned stop is called, which waits
// for it to return.
func listen(t *testing.T, hub *storekit.Hub) (*testutil.Notifications, func()) {
	t.Helper()
	r := testutil.NewNotifications()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		hub.Listen(ctx, r.Notify)
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
		b := &backend{send: make(chan store.Notice)}
		hub := storekit.NewHub(b.run)
		first, stopFirst := listen(t, hub)
		require.True(t, first.Wait("", time.Minute), "the first listener hears the subscription")
		second, stopSecond := listen(t, hub)
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

		third, _ := listen(t, hub)
		require.True(t, third.Wait("", time.Minute))
		require.Equal(t, int32(2), b.runs.Load(), "a listener after the last one left starts the loop again")
	})

	t.Run("SlowListenerIsToldWhatItMissed", func(t *testing.T) {
		t.Parallel()
		b := &backend{send: make(chan store.Notice)}
		hub := storekit.NewHub(b.run)
		later := testutil.NewNotifications()
		release := make(chan struct{})
		subscribed := make(chan struct{})
		first := true
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			hub.Listen(ctx, func(n store.Notice) {
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
		const sent = 1500 // more than a listener's queue holds
		for range sent {
			b.send <- store.Notice{Name: "lease", Kind: store.NoticeAcquired, Remaining: time.Second}
		}
		close(release)
		require.True(t, later.Wait("", time.Minute), "the listener that fell behind hears that it missed notices")
		require.Less(t, later.Count("lease"), sent-1, "what did not fit was dropped, not queued without bound")
	})
}
