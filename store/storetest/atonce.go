package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/storekit"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store"
)

// CallAtOnce makes the acquisitions ps on s at once, each on a goroutine
// of its own, and returns the results in the order of ps. It is for a
// store that sends acquisitions in groups ([storekit.AcquireGroup]),
// whose test holds the store's first round trips: held gets a value for
// each round trip held, and closing release lets them go. CallAtOnce
// waits until the store's round trips are all held and every call is
// made, so that the calls wait their turn together, then closes release.
func CallAtOnce(t *testing.T, s store.Store, held <-chan struct{}, release chan<- struct{}, ps []store.AcquireParams) []store.AcquireResult {
	t.Helper()
	return AtOnce(t, held, release, ps, func(p store.AcquireParams) (r store.AcquireResult) {
		r.Grant, r.Err = s.Acquire(t.Context(), p)
		return r
	})
}

// AtOnce makes the calls call(p), one for each of ps, at once, as
// [CallAtOnce] does for acquisitions, and returns their results in the
// order of ps.
func AtOnce[P, R any](t *testing.T, held <-chan struct{}, release chan<- struct{}, ps []P, call func(P) R) []R {
	t.Helper()
	res := make([]R, len(ps))
	calling := make(chan struct{}, len(ps))
	var wg sync.WaitGroup
	for i, p := range ps {
		wg.Go(func() {
			calling <- struct{}{}
			res[i] = call(p)
		})
	}
	for range storekit.Flights {
		testutil.Receive(t, held, "round trip", eventTimeout)
	}
	for range ps {
		testutil.Receive(t, calling, "call", eventTimeout)
	}
	close(release)
	wg.Wait()
	return res
}

// ManyCallersAtOnce makes, with [CallAtOnce], the Acquire calls of many
// clients sharing s at once: 300 for new leases, each for a holder of
// its own, and 5 contending for one more. It checks that each is answered
// as a lone call would be: every new lease granted to its caller, with its
// payload and a token of its own, as [store.Store.Get] then reports it;
// of the contenders, one granted and the others refused with the winner's
// tenure. It returns how many calls it made, for the caller to check how
// few round trips they took.
func ManyCallersAtOnce(t *testing.T, s store.Store, held <-chan struct{}, release chan<- struct{}) int {
	t.Helper()
	const n, contenders = 300, 5
	ps := make([]store.AcquireParams, 0, n+contenders)
	for i := range n {
		ps = append(ps, store.AcquireParams{
			Name: fmt.Sprintf("together-%03d", i), Holder: testutil.Holder(t, fmt.Sprintf("client-%d", i)),
			TTL: time.Minute, Payload: fmt.Sprintf("addr-%d", i),
		})
	}
	for i := range contenders {
		ps = append(ps, store.AcquireParams{Name: "contended", Holder: testutil.Holder(t, fmt.Sprintf("contender-%d", i)), TTL: time.Minute})
	}

	res := CallAtOnce(t, s, held, release, ps)

	tokens := map[store.Token]string{}
	var winner *store.Grant
	for i, r := range res {
		p := ps[i]
		if p.Name == "contended" && r.Err != nil {
			continue
		}
		require.NoError(t, r.Err, p.Name)
		g := r.Grant
		require.Equal(t, p.Name, g.Name)
		require.Equal(t, p.Holder, g.Holder)
		require.Equal(t, p.Payload, g.Payload)
		require.Equal(t, int64(1), g.Seq)
		require.Positive(t, g.Remaining)
		require.LessOrEqual(t, g.Remaining, p.TTL)
		require.NotContains(t, tokens, g.Token, "a token of its own")
		tokens[g.Token] = p.Name
		rec, err := s.Get(t.Context(), p.Name)
		require.NoError(t, err)
		require.Equal(t, g.Holder, rec.Holder)
		require.Equal(t, g.Token, rec.Token)
		if p.Name == "contended" {
			require.Nil(t, winner, "one call for a name wins")
			winner = &g
		}
	}
	require.NotNil(t, winner, "one call for a name wins")
	for i, r := range res[n:] {
		if r.Err == nil {
			continue
		}
		var he *store.HeldError
		require.ErrorAs(t, r.Err, &he, "contender %d", i)
		require.Equal(t, winner.Holder, he.Holder)
		require.Equal(t, winner.Token, he.Token)
	}
	return len(ps)
}
