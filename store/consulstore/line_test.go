package consulstore_test

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
	"github.com/tenure-dev/tenure/store/consulstore"
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

// client is one tenure client's view of the store: it counts the
// client's acquisitions, and reports each place in line the store gives
// it, its listener's subscription and each acquisition of lease it hears
// of.
type client struct {
	store.Store
	tally      *tally
	lease      string
	placed     chan int
	subscribed chan struct{}
	heard      chan store.Holder
}

func newClient(st store.Store, t *tally, lease string) *client {
	return &client{
		Store: st, tally: t, lease: lease,
		placed:     make(chan int, 16),
		subscribed: make(chan struct{}, 1),
		heard:      make(chan store.Holder, 16),
	}
}

func (f *client) Acquire(ctx context.Context, p store.AcquireParams) (store.Grant, error) {
	f.tally.mu.Lock()
	f.tally.attempts[p.Holder.Label]++
	f.tally.mu.Unlock()
	g, err := f.Store.Acquire(ctx, p)
	if held := (*store.HeldError)(nil); errors.As(err, &held) && held.Position > 0 {
		offer(f.placed, held.Position)
	}
	return g, err
}

// Listen passes the store's announcements on (the embedded interface alone
// would hide them), reporting the subscription and every acquisition.
func (f *client) Listen(ctx context.Context, notify func(store.Notice)) error {
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
// follower-4. Each release names the head of the line, which takes the
// lease with a single acquisition; the others hear of the new tenure and
// send nothing. Without the line every follower would try at each release.
func TestReleaseHandsOverToTheNextInLineAlone(t *testing.T) {
	t.Parallel()
	const name, followers = "billing", 5
	st, _ := testserver.ConsulHarness{Agent: testserver.SharedConsul(t)}.New(t)
	counts := &tally{attempts: make(map[string]int)}

	current, err := runClient(t, newClient(st, counts, name), "holder").Acquire(t.Context(), name)
	require.NoError(t, err)
	fs := make([]*client, followers)
	won := make([]chan *tenure.Lease, followers)
	for i := range fs {
		fs[i] = newClient(st, counts, name)
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

// TestLineRoundTrips counts the requests of the line on the caller's path:
// an acquisition of a free lease costs what it did before the line (a
// read, a session, a transaction), a follower's first place a session and
// a transaction more than the refusal's read, keeping it a session
// renewal, and the release that names the head of the line a read and a
// transaction. The head's acquisition takes it out of the line, and the
// session that kept its place is destroyed.
func TestLineRoundTrips(t *testing.T) {
	t.Parallel()
	b := setup(t, consulstore.Config{})
	s, counted := countedStore(t, b.store.Config().KeyPrefix)
	holder, first, second := testutil.Holder(t, "holder"), testutil.Holder(t, "first"), testutil.Holder(t, "second")
	acquire := func(h store.Holder, wait bool) (store.Grant, error) {
		return s.Acquire(t.Context(), store.AcquireParams{Name: b.name, Holder: h, TTL: longTTL, Wait: wait})
	}
	waitFor := func(h store.Holder) int {
		t.Helper()
		_, err := acquire(h, true)
		var held *store.HeldError
		require.ErrorAs(t, err, &held)
		return held.Position
	}

	g, err := acquire(holder, false)
	require.NoError(t, err)
	require.Equal(t, map[string]int{"PUT /v1/txn": 2, "PUT /v1/session/create": 1}, onCallersPath(counted.take()),
		"an acquisition when nobody waits")

	require.Equal(t, 1, waitFor(first))
	require.Equal(t, map[string]int{"PUT /v1/txn": 2, "PUT /v1/session/create": 1}, onCallersPath(counted.take()),
		"a refusal that takes a place in line")
	require.Equal(t, 2, waitFor(second))
	counted.take()
	require.Equal(t, 1, waitFor(first), "asking again keeps the place")
	require.Equal(t, map[string]int{"PUT /v1/txn": 1, "PUT /v1/session/renew": 1}, onCallersPath(counted.take()),
		"a refusal that keeps a place in line")
	_, err = acquire(testutil.Holder(t, "passer-by"), false)
	require.ErrorIs(t, err, store.ErrHeld)
	require.Equal(t, map[string]int{"PUT /v1/txn": 1}, onCallersPath(counted.take()), "a refusal without waiting")

	line := b.store.Config().KeyPrefix + b.name + "/wait/"
	pairs, _, err := b.client.KV().List(line, nil)
	require.NoError(t, err)
	require.Len(t, pairs, 2, "one key per follower")
	kept := map[string]bool{}
	for _, p := range pairs {
		require.NotEmpty(t, p.Session, "key %q is locked by the session that keeps the follower's place", p.Key)
		kept[p.Session] = true
	}
	require.Len(t, kept, 2, "each follower's place is kept by a session of its own")

	require.NoError(t, s.Release(t.Context(), store.ReleaseParams{Name: b.name, Holder: holder, Token: g.Token}))
	require.Equal(t, map[string]int{"PUT /v1/txn": 2}, onCallersPath(counted.take()), "a release naming the head of the line")
	_, err = acquire(first, true)
	require.NoError(t, err)
	require.Equal(t, map[string]int{"PUT /v1/txn": 2, "PUT /v1/session/create": 1}, onCallersPath(counted.take()),
		"the head's acquisition")
	pairs, _, err = b.client.KV().List(line, nil)
	require.NoError(t, err)
	require.Len(t, pairs, 1, "the new holder left the line")
	for id := range kept {
		if id != pairs[0].Session {
			b.awaitSessionGone(t, id)
		}
	}
}
