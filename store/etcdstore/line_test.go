package etcdstore_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure"
	"github.com/tenure-dev/tenure/internal/testserver"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/etcdstore"
)

// tally counts the acquisitions each holder label sends.
type tally struct {
	mu       sync.Mutex
	attempts map[string]int
}

// take returns the attempts counted since the last call, and starts over.
func (t *tally) take() map[string]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	got := maps.Clone(t.attempts)
	clear(t.attempts)
	return got
}

// follower is one client's view of the store: it counts the client's
// acquisitions, and reports each place in line the store gives it (and
// when the refusal said the lease would expire, on this process's clock,
// no earlier than the store's), its listener's subscription and each
// acquisition of lease it hears of.
type follower struct {
	store.Store
	tally      *tally
	lease      string
	placed     chan int
	told       chan time.Time
	subscribed chan struct{}
	heard      chan store.Holder
}

func newFollower(st store.Store, t *tally, lease string) *follower {
	return &follower{
		Store: st, tally: t, lease: lease,
		placed:     make(chan int, 16),
		told:       make(chan time.Time, 16),
		subscribed: make(chan struct{}, 1),
		heard:      make(chan store.Holder, 16),
	}
}

func (f *follower) Acquire(ctx context.Context, p store.AcquireParams) (store.Grant, error) {
	f.tally.mu.Lock()
	f.tally.attempts[p.Holder.Label]++
	f.tally.mu.Unlock()
	g, err := f.Store.Acquire(ctx, p)
	if held := (*store.HeldError)(nil); errors.As(err, &held) && held.Position > 0 {
		offer(f.told, time.Now().Add(held.Remaining))
		offer(f.placed, held.Position)
	}
	return g, err
}

// Listen passes the store's announcements on (the embedded interface alone
// would hide them), reporting the subscription and every acquisition.
func (f *follower) Listen(ctx context.Context, notify func(store.Notice)) error {
	return f.Store.(store.Notifier).Listen(ctx, func(n store.Notice) {
		switch {
		case n.Name == "":
			offer(f.subscribed, struct{}{})
		case n.Name == f.lease && n.Kind == store.NoticeAcquired:
			offer(f.heard, n.Holder)
		}
		notify(n)
	})
}

// offer sends v on ch unless ch is full: a test that needs more of them
// than the buffer holds fails waiting for them.
func offer[T any](ch chan<- T, v T) {
	select {
	case ch <- v:
	default:
	}
}

// runClient starts a tenure client over st, stopped when the test ends.
func runClient(t *testing.T, st store.Store, label string) *tenure.Client {
	t.Helper()
	c, err := tenure.New(st, tenure.Config{Label: label, TTL: 20 * time.Second})
	require.NoError(t, err)
	ctx, stop := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- c.Run(ctx) }()
	t.Cleanup(func() { stop(); require.NoError(t, <-ran) })
	return c
}

// TestReleaseHandsOverToTheNextInLineAlone: tenure clients campaign for a
// lease one after the other, so that the store's line is follower-0 …
// follower-4. Each release is taken by the next in line with a single
// acquisition; the others hear of the new tenure and send nothing.
func TestReleaseHandsOverToTheNextInLineAlone(t *testing.T) {
	t.Parallel()
	const name, followers = "billing", 5
	st := newStore(t, testserver.SharedEtcd(t).Client(t), etcdstore.Config{})
	counts := &tally{attempts: make(map[string]int)}

	current, err := runClient(t, newFollower(st, counts, name), "holder").Acquire(t.Context(), name)
	require.NoError(t, err)
	fs := make([]*follower, followers)
	won := make([]chan *tenure.Lease, followers)
	for i := range fs {
		fs[i] = newFollower(st, counts, name)
		c := runClient(t, fs[i], fmt.Sprintf("follower-%d", i))
		// Subscribed before it campaigns, so that the subscription brings
		// no attempt forward later.
		testutil.Receive(t, fs[i].subscribed, "the listener's subscription", eventTimeout)
		won[i] = make(chan *tenure.Lease, 1)
		go func() {
			if l, err := c.Campaign(t.Context(), name); err == nil {
				won[i] <- l
			}
		}()
		require.Equal(t, i+1, testutil.Receive(t, fs[i].placed, "follower's place in line", eventTimeout))
	}

	for i := range 3 {
		counts.take()
		require.NoError(t, current.Release(t.Context()))
		next := testutil.Receive(t, won[i], fmt.Sprintf("follower-%d's lease", i), eventTimeout)
		for _, f := range fs[i+1:] {
			require.Equal(t, next.Holder(), testutil.Receive(t, f.heard, "the new tenure's announcement", eventTimeout),
				"the followers behind hear of the new tenure")
		}
		require.Equal(t, map[string]int{fmt.Sprintf("follower-%d", i): 1}, counts.take(),
			"a handover costs the next in line's acquisition and nothing else")
		current = next
	}
}

// TestExpiryHandsOverAtOnce: the holder shortens its lease to etcd's
// minimum and stops renewing it (it crashed) after two followers were
// refused and told it had a minute left. When etcd expires the lease, the
// listeners hear of it and the followers try at once: one of them takes
// the lease long before the expiry it was told, and the takeover costs
// each follower one acquisition.
func TestExpiryHandsOverAtOnce(t *testing.T) {
	t.Parallel()
	const name, followers = "reconcile", 2
	st := newStore(t, testserver.SharedEtcd(t).Client(t), etcdstore.Config{})
	counts := &tally{attempts: make(map[string]int)}

	crashed := testutil.Holder(t, "crashed")
	g, err := st.Acquire(t.Context(), store.AcquireParams{Name: name, Holder: crashed, TTL: longTTL})
	require.NoError(t, err)
	fs := make([]*follower, followers)
	won := make(chan *tenure.Lease, followers)
	var told time.Time
	for i := range fs {
		fs[i] = newFollower(st, counts, name)
		c := runClient(t, fs[i], fmt.Sprintf("follower-%d", i))
		testutil.Receive(t, fs[i].subscribed, "the listener's subscription", eventTimeout)
		go func() {
			if l, err := c.Campaign(t.Context(), name); err == nil {
				won <- l
			}
		}()
		require.Equal(t, i+1, testutil.Receive(t, fs[i].placed, "follower's place in line", eventTimeout))
		if at := testutil.Receive(t, fs[i].told, "the expiry the follower was told", eventTimeout); told.IsZero() || at.Before(told) {
			told = at
		}
	}

	counts.take()
	rs, err := st.Renew(t.Context(), []store.RenewParams{{Name: name, Holder: crashed, Token: g.Token, Seq: g.Seq, TTL: etcdstore.MinTTL}})
	require.NoError(t, err)
	require.True(t, rs[0].Renewed, "the holder's last renewal")

	next := testutil.Receive(t, won, "a follower's lease", eventTimeout)
	require.True(t, time.Now().Before(told),
		"the takeover came when etcd expired the lease, before the earliest expiry a follower was told (%s)", told.Format(time.StampMilli))
	require.Greater(t, next.Token(), g.Token)
	// An expiry is announced as a change: every follower may try, once;
	// one that hears of the new tenure before its try comes does not.
	attempts := counts.take()
	require.Equal(t, 1, attempts[next.Holder().Label], "the new holder tried once: %v", attempts)
	for label, n := range attempts {
		require.LessOrEqual(t, n, 1, "%s tried at most once after the expiry: %v", label, attempts)
	}
}
