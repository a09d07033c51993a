package storekit_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/storekit"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/memstore"
)

// trip is one round trip of a group, held until the test lets it go.
type trip struct {
	ctx     context.Context
	ps      []store.AcquireParams
	release chan struct{}
}

func (tr *trip) names() []string {
	names := make([]string, len(tr.ps))
	for i, p := range tr.ps {
		names[i] = p.Name
	}
	return names
}

// groupBundle is a group over a memstore whose round trips the test sees
// and lets go one by one.
type groupBundle struct {
	store *memstore.Store
	group *storekit.AcquireGroup
	trips chan *trip
}

func setupGroup(t *testing.T) *groupBundle {
	t.Helper()
	b := &groupBundle{store: memstore.New(memstore.Config{}), trips: make(chan *trip, 16)}
	b.group = storekit.NewAcquireGroup("kitstore", func(ctx context.Context, ps []store.AcquireParams) []store.AcquireResult {
		tr := &trip{ctx: ctx, ps: slices.Clone(ps), release: make(chan struct{})}
		b.trips <- tr
		res := make([]store.AcquireResult, len(ps))
		select {
		case <-tr.release:
		case <-ctx.Done():
			for i, p := range ps {
				res[i].Err = fmt.Errorf("kitstore: acquire lease %q: %w: %w", p.Name, store.ErrUnavailable, ctx.Err())
			}
			return res
		}
		got, err := b.store.AcquireBatch(ctx, ps)
		if err != nil {
			for i, p := range ps {
				res[i].Err = fmt.Errorf("kitstore: acquire lease %q: %w", p.Name, err)
			}
			return res
		}
		return got
	})
	return b
}

// next returns the round trip that went since the test last looked, once
// every goroutine of the bubble is blocked; it fails when none went.
func (b *groupBundle) next(t *testing.T) *trip {
	t.Helper()
	synctest.Wait()
	select {
	case tr := <-b.trips:
		return tr
	default:
		t.Fatal("no round trip went")
		return nil
	}
}

// noTrip fails when a round trip went that the test has not seen.
func (b *groupBundle) noTrip(t *testing.T) {
	t.Helper()
	synctest.Wait()
	require.Empty(t, b.trips, "no other round trip went")
}

// call is one Acquire made on a goroutine of its own.
type call struct {
	p    store.AcquireParams
	g    store.Grant
	err  error
	done chan struct{}
}

func (b *groupBundle) acquire(ctx context.Context, p store.AcquireParams) *call {
	c := &call{p: p, done: make(chan struct{})}
	go func() {
		c.g, c.err = b.group.Acquire(ctx, p)
		close(c.done)
	}()
	return c
}

// acquireInOrder makes one call per name, each after the last is waiting.
func (b *groupBundle) acquireInOrder(ctx context.Context, h store.Holder, names ...string) []*call {
	calls := make([]*call, len(names))
	for i, name := range names {
		calls[i] = b.acquire(ctx, params(name, h))
		synctest.Wait()
	}
	return calls
}

func (c *call) returned() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// granted fails unless c has returned with a grant of its lease.
func (c *call) granted(t *testing.T) store.Grant {
	t.Helper()
	require.True(t, c.returned(), "%s returned", c.p.Name)
	require.NoError(t, c.err, c.p.Name)
	require.Equal(t, c.p.Name, c.g.Name)
	require.Equal(t, c.p.Holder, c.g.Holder)
	require.Positive(t, c.g.Token)
	return c.g
}

func params(name string, h store.Holder) store.AcquireParams {
	return store.AcquireParams{Name: name, Holder: h, TTL: time.Minute}
}

// fill makes Flights lone calls and returns them with their round
// trips, all held.
func (b *groupBundle) fill(t *testing.T, h store.Holder) ([]*call, []*trip) {
	t.Helper()
	calls := make([]*call, storekit.Flights)
	trips := make([]*trip, storekit.Flights)
	for i := range calls {
		calls[i] = b.acquire(t.Context(), params(fmt.Sprintf("lone-%d", i), h))
		trips[i] = b.next(t)
		require.Equal(t, []string{calls[i].p.Name}, trips[i].names(), "a call goes at once while fewer than %d are out", storekit.Flights)
	}
	return calls, trips
}

type ctxKey struct{}

func TestAcquireGroupLoneCallGoesAtOnce(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setupGroup(t)
		ctx := context.WithValue(t.Context(), ctxKey{}, "caller")
		c := b.acquire(ctx, params("alone", testutil.Holder(t, "me")))
		tr := b.next(t)
		require.Equal(t, []string{"alone"}, tr.names())
		require.Equal(t, "caller", tr.ctx.Value(ctxKey{}), "a lone call runs under its caller's context")
		close(tr.release)
		synctest.Wait()
		c.granted(t)
		b.noTrip(t)
	})
}

func TestAcquireGroupSendsCallsMadeAtOnceTogether(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setupGroup(t)
		h := testutil.Holder(t, "many")
		lone, held := b.fill(t, h)
		names := make([]string, 10)
		calls := make([]*call, len(names))
		for i := range names {
			names[i] = fmt.Sprintf("queued-%d", i)
			calls[i] = b.acquire(context.WithValue(t.Context(), ctxKey{}, names[i]), params(names[i], h))
		}
		b.noTrip(t)
		for _, c := range calls {
			require.False(t, c.returned(), "%s waits while %d round trips are out", c.p.Name, storekit.Flights)
		}

		close(held[0].release)
		together := b.next(t)
		lone[0].granted(t)
		require.ElementsMatch(t, names, together.names(), "the calls made meanwhile go in one round trip")
		require.Nil(t, together.ctx.Value(ctxKey{}), "no caller's context carries a round trip of many")
		_, hasDeadline := together.ctx.Deadline()
		require.False(t, hasDeadline)
		b.noTrip(t)

		close(together.release)
		close(held[1].release)
		synctest.Wait()
		tokens := map[store.Token]string{lone[0].granted(t).Token: "lone-0", lone[1].granted(t).Token: "lone-1"}
		for _, c := range calls {
			g := c.granted(t)
			require.NotContains(t, tokens, g.Token, "every lease its own tenure")
			tokens[g.Token] = c.p.Name
			rec, err := b.store.Get(t.Context(), c.p.Name)
			require.NoError(t, err)
			require.Equal(t, g.Token, rec.Token, "the grant is the store's")
		}
		b.noTrip(t)
	})
}

func TestAcquireGroupCapsARoundTrip(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setupGroup(t)
		h := testutil.Holder(t, "flood")
		_, held := b.fill(t, h)
		n := 2*storekit.AcquireBatchMax + storekit.AcquireBatchMax/2
		calls := make([]*call, n)
		for i := range calls {
			calls[i] = b.acquire(t.Context(), params(fmt.Sprintf("flood-%04d", i), h))
		}
		synctest.Wait()

		close(held[0].release)
		first := b.next(t)
		require.Len(t, first.ps, storekit.AcquireBatchMax)
		close(held[1].release)
		second := b.next(t)
		require.Len(t, second.ps, storekit.AcquireBatchMax)
		b.noTrip(t)
		close(first.release)
		third := b.next(t)
		require.Len(t, third.ps, n-2*storekit.AcquireBatchMax)
		close(second.release)
		close(third.release)
		synctest.Wait()
		for _, c := range calls {
			c.granted(t)
		}
		b.noTrip(t)
	})
}

func TestAcquireGroupSendsANameOnceARoundTrip(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setupGroup(t)
		first, second := testutil.Holder(t, "first"), testutil.Holder(t, "second")
		_, held := b.fill(t, first)
		calls := b.acquireInOrder(t.Context(), first, "x", "y")
		calls = append(calls, b.acquireInOrder(t.Context(), second, "x", "z")...)

		close(held[0].release)
		tr := b.next(t)
		require.Equal(t, []string{"x", "y", "z"}, tr.names(), "the second call for x waits for the next round trip")
		require.Equal(t, first, tr.ps[0].Holder)
		require.False(t, calls[2].returned())

		close(tr.release)
		again := b.next(t)
		require.Equal(t, []string{"x"}, again.names())
		require.Equal(t, second, again.ps[0].Holder)
		close(again.release)
		close(held[1].release)
		synctest.Wait()
		g := calls[0].granted(t)
		var he *store.HeldError
		require.ErrorAs(t, calls[2].err, &he, "the later call for x finds it held")
		require.Equal(t, first, he.Holder)
		require.Equal(t, g.Token, he.Token)
		calls[1].granted(t)
		calls[3].granted(t)
		b.noTrip(t)
	})
}

func TestAcquireGroupCallerLeavesTheQueue(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setupGroup(t)
		h := testutil.Holder(t, "me")
		_, held := b.fill(t, h)
		leaving, leave := context.WithCancel(t.Context())
		a := b.acquireInOrder(t.Context(), h, "a")[0]
		gone := b.acquire(leaving, params("gone", h))
		c := b.acquireInOrder(t.Context(), h, "c")[0]

		leave()
		synctest.Wait()
		require.True(t, gone.returned(), "a caller whose context ends leaves at once")
		require.ErrorIs(t, gone.err, store.ErrUnavailable)
		require.ErrorIs(t, gone.err, context.Canceled)
		require.EqualError(t, gone.err, `kitstore: acquire lease "gone" not attempted (it waited for a round trip): tenure: store unavailable: context canceled`)
		require.False(t, a.returned())
		require.False(t, c.returned())

		close(held[0].release)
		tr := b.next(t)
		require.Equal(t, []string{"a", "c"}, tr.names(), "the others go without it")
		close(tr.release)
		close(held[1].release)
		synctest.Wait()
		a.granted(t)
		c.granted(t)
		_, err := b.store.Get(t.Context(), "gone")
		require.ErrorIs(t, err, store.ErrNotFound, "a call that left the queue was never attempted")
		b.noTrip(t)
	})
}

func TestAcquireGroupCallersLeaveTheirRoundTrip(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setupGroup(t)
		h := testutil.Holder(t, "me")
		_, held := b.fill(t, h)
		cancelled, cancel := context.WithCancel(t.Context())
		shortLived, stop := context.WithTimeout(t.Context(), time.Second)
		defer stop()
		a := b.acquire(cancelled, params("a", h))
		synctest.Wait()
		short := b.acquire(shortLived, params("short", h))
		synctest.Wait()
		stays := b.acquireInOrder(t.Context(), h, "stays")[0]
		close(held[0].release)
		tr := b.next(t)
		require.Equal(t, []string{"a", "short", "stays"}, tr.names())

		cancel()
		synctest.Wait()
		require.True(t, a.returned(), "a caller whose context ends while its round trip is out returns at once")
		require.ErrorIs(t, a.err, store.ErrUnavailable)
		require.ErrorIs(t, a.err, context.Canceled)
		require.EqualError(t, a.err, `kitstore: acquire lease "a": tenure: store unavailable (it may have been applied): context canceled`)
		require.NoError(t, tr.ctx.Err(), "the round trip goes on for the others")

		time.Sleep(2 * time.Second) // the bubble's clock: past the short-lived caller's deadline
		synctest.Wait()
		require.True(t, short.returned())
		require.ErrorIs(t, short.err, store.ErrUnavailable)
		require.ErrorIs(t, short.err, context.DeadlineExceeded)
		require.NoError(t, tr.ctx.Err(), "one member's deadline does not cut the round trip short")

		close(tr.release)
		synctest.Wait()
		stays.granted(t)
		rec, err := b.store.Get(t.Context(), "a")
		require.NoError(t, err, "what a caller that left had sent was applied")
		require.Equal(t, h, rec.Holder)

		// A round trip all of whose callers left is cancelled.
		b.acquire(t.Context(), params("lone-2", h))
		filler := b.next(t)
		lastOne, leave := context.WithCancel(t.Context())
		last := b.acquire(lastOne, params("last", h))
		synctest.Wait()
		close(held[1].release)
		forLast := b.next(t)
		require.Equal(t, []string{"last"}, forLast.names())
		leave()
		synctest.Wait()
		require.ErrorIs(t, last.err, context.Canceled)
		require.ErrorIs(t, forLast.ctx.Err(), context.Canceled, "nothing runs for callers that have all gone")
		close(filler.release)
		b.noTrip(t)
	})
}

func TestAcquireGroupAnswersEachCallItsOwnResult(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setupGroup(t)
		h, other := testutil.Holder(t, "me"), testutil.Holder(t, "other")
		taken, err := b.store.Acquire(t.Context(), params("taken", other))
		require.NoError(t, err)
		_, held := b.fill(t, h)
		calls := b.acquireInOrder(t.Context(), h, "free", "taken")

		close(held[0].release)
		tr := b.next(t)
		close(tr.release)
		synctest.Wait()
		calls[0].granted(t)
		var he *store.HeldError
		require.ErrorAs(t, calls[1].err, &he, "a refusal reaches the call it answers")
		require.Equal(t, taken.Token, he.Token)

		// A round trip that fails as a whole fails every call it carries,
		// each with its own lease named.
		close(held[1].release)
		synctest.Wait()
		_, held = b.fill(t, h)
		calls = b.acquireInOrder(t.Context(), h, "p", "q", "r")
		require.NoError(t, b.store.Close())
		close(held[0].release)
		close(held[1].release)
		tr = b.next(t)
		require.Equal(t, []string{"p", "q", "r"}, tr.names())
		close(tr.release)
		synctest.Wait()
		for _, c := range calls {
			require.True(t, c.returned())
			require.ErrorIs(t, c.err, store.ErrClosed)
			require.ErrorContains(t, c.err, fmt.Sprintf("acquire lease %q", c.p.Name))
		}
		b.noTrip(t)
	})
}
