// Package linetest checks, with real tenure clients over a real store,
// that a store's line of followers makes a handover cost one acquisition:
// the one by the follower at the head of the line. The store packages'
// tests call it; it imports testing and is for tests only.
package linetest

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
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store"
)

// eventTimeout bounds every wait for an event.
const eventTimeout = 15 * time.Second

// Tally counts the acquisitions each holder label sends.
type Tally struct {
	mu       sync.Mutex
	attempts map[string]int
}

// NewTally returns an empty tally.
func NewTally() *Tally { return &Tally{attempts: make(map[string]int)} }

// Take returns the attempts counted since the last call, and starts over.
func (t *Tally) Take() map[string]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	got := maps.Clone(t.attempts)
	clear(t.attempts)
	return got
}

// Follower is one client's view of a store: it counts the client's
// acquisitions in a [Tally], and reports each place in line the store
// gives it (Placed) with the time the refusal said the lease would expire,
// on this process's clock (Told), its listener's subscription
// (Subscribed) and the holder of each acquisition of the lease it hears of
// (Heard).
type Follower struct {
	store.Store
	tally      *Tally
	lease      string
	Placed     chan int
	Told       chan time.Time
	Subscribed chan struct{}
	Heard      chan store.Holder
}

// NewFollower wraps st for one client that follows lease.
func NewFollower(st store.Store, t *Tally, lease string) *Follower {
	return &Follower{
		Store: st, tally: t, lease: lease,
		Placed:     make(chan int, 16),
		Told:       make(chan time.Time, 16),
		Subscribed: make(chan struct{}, 1),
		Heard:      make(chan store.Holder, 16),
	}
}

// Acquire counts the attempt and reports the place a refusal gives.
func (f *Follower) Acquire(ctx context.Context, p store.AcquireParams) (store.Grant, error) {
	f.tally.mu.Lock()
	f.tally.attempts[p.Holder.Label]++
	f.tally.mu.Unlock()
	g, err := f.Store.Acquire(ctx, p)
	if held := (*store.HeldError)(nil); errors.As(err, &held) && held.Position > 0 {
		offer(f.Told, time.Now().Add(held.Remaining))
		offer(f.Placed, held.Position)
	}
	return g, err
}

// Listen passes the store's announcements on (the embedded interface alone
// would hide them), reporting the subscription and every acquisition once
// the client has it: a client queues what it hears and what its callers
// ask in one line, so a campaign begun after Subscribed arrives comes
// after the subscription's notice, which then brings no attempt forward.
func (f *Follower) Listen(ctx context.Context, notify func(store.Notice)) error {
	return f.Store.(store.Notifier).Listen(ctx, func(n store.Notice) {
		notify(n)
		switch {
		case n.Name == "":
			offer(f.Subscribed, struct{}{})
		case n.Name == f.lease && n.Kind == store.NoticeAcquired:
			offer(f.Heard, n.Holder)
		}
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

// RunClient starts a tenure client over st, stopped when the test ends.
func RunClient(t *testing.T, st store.Store, label string) *tenure.Client {
	t.Helper()
	c, err := tenure.New(st, tenure.Config{Label: label, TTL: 20 * time.Second})
	require.NoError(t, err)
	ctx, stop := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- c.Run(ctx) }()
	t.Cleanup(func() { stop(); require.NoError(t, <-ran) })
	return c
}

// ReleaseHandsOverToTheNextInLineAlone has five tenure clients over st
// campaign for a lease one after the other, so that the store's line is
// follower-0 … follower-4, then releases it three times: each release is
// taken by the next in line with a single acquisition, and the followers
// behind hear of the new tenure and send nothing. Without the line every
// follower would try at each release. st must keep a line and announce
// acquisitions.
func ReleaseHandsOverToTheNextInLineAlone(t *testing.T, st store.Store) {
	t.Helper()
	const name, followers = "billing", 5
	counts := NewTally()
	current, err := RunClient(t, NewFollower(st, counts, name), "holder").Acquire(t.Context(), name)
	require.NoError(t, err)
	fs := make([]*Follower, followers)
	won := make([]chan *tenure.Lease, followers)
	for i := range fs {
		fs[i] = NewFollower(st, counts, name)
		c := RunClient(t, fs[i], fmt.Sprintf("follower-%d", i))
		// Subscribed before it campaigns, so that the subscription brings
		// no attempt forward later.
		testutil.Receive(t, fs[i].Subscribed, "the listener's subscription", eventTimeout)
		won[i] = make(chan *tenure.Lease, 1)
		go func() {
			if l, err := c.Campaign(t.Context(), name); err == nil {
				won[i] <- l
			}
		}()
		require.Equal(t, i+1, testutil.Receive(t, fs[i].Placed, "follower's place in line", eventTimeout))
	}

	for i := range 3 {
		counts.Take()
		require.NoError(t, current.Release(t.Context()))
		next := testutil.Receive(t, won[i], fmt.Sprintf("follower-%d's lease", i), eventTimeout)
		for _, f := range fs[i+1:] {
			require.Equal(t, next.Holder(), testutil.Receive(t, f.Heard, "the new tenure's announcement", eventTimeout),
				"the followers behind hear of the new tenure")
		}
		require.Equal(t, map[string]int{fmt.Sprintf("follower-%d", i): 1}, counts.Take(),
			"a handover costs the next in line's acquisition and nothing else")
		current = next
	}
}
