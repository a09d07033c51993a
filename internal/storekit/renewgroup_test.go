package storekit_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/storekit"
	"github.com/tenure-dev/tenure/store"
)

// renewTrip is one round trip of a renew group, held until the test
// answers it: with the renewals, or with an error for the whole trip.
type renewTrip struct {
	ps     []store.RenewParams
	answer chan error
}

// renewCall is one Renew made on a goroutine of its own.
type renewCall struct {
	res  []store.RenewResult
	err  error
	done chan struct{}
}

// setupRenewGroup returns a renew group whose round trips the test sees on
// trips and answers one by one: each lease renewed, seq 1 to 2.
func setupRenewGroup() (*storekit.RenewGroup, chan *renewTrip) {
	trips := make(chan *renewTrip, 16)
	g := storekit.NewRenewGroup("kitstore", func(ctx context.Context, ps []store.RenewParams) ([]store.RenewResult, error) {
		tr := &renewTrip{ps: ps, answer: make(chan error)}
		trips <- tr
		if err := <-tr.answer; err != nil {
			return nil, err
		}
		res := make([]store.RenewResult, len(ps))
		for i, p := range ps {
			res[i] = store.RenewResult{Renewed: true, Grant: store.Grant{Name: p.Name, Holder: p.Holder, Token: p.Token, Seq: p.Seq + 1}}
		}
		return res, nil
	})
	return g, trips
}

func renew(g *storekit.RenewGroup, ps []store.RenewParams) *renewCall {
	c := &renewCall{done: make(chan struct{})}
	go func() {
		c.res, c.err = g.Renew(context.Background(), ps)
		close(c.done)
	}()
	synctest.Wait()
	return c
}

// round returns a client's renewal round of n leases.
func round(client string, n int) []store.RenewParams {
	ps := make([]store.RenewParams, n)
	for i := range ps {
		ps[i] = store.RenewParams{Name: fmt.Sprintf("%s-%05d", client, i), Holder: store.Holder{Label: client, Instance: "i"}, Token: 7, Seq: 1}
	}
	return ps
}

func nextTrip(t *testing.T, trips chan *renewTrip) *renewTrip {
	t.Helper()
	synctest.Wait()
	select {
	case tr := <-trips:
		return tr
	default:
		t.Fatal("no round trip went")
		return nil
	}
}

// fillRenew makes Flights lone rounds and returns their round trips, all
// held.
func fillRenew(t *testing.T, g *storekit.RenewGroup, trips chan *renewTrip) []*renewTrip {
	t.Helper()
	var lone []*renewTrip
	for i := range storekit.Flights {
		renew(g, round(fmt.Sprintf("lone%d", i), 1))
		tr := nextTrip(t, trips)
		require.Len(t, tr.ps, 1, "a round goes at once while fewer than %d are out", storekit.Flights)
		lone = append(lone, tr)
	}
	return lone
}

// TestRenewGroupSplitsItsAnswerAmongItsCalls: rounds made while the group's
// round trips are out go together, in the order they came, up to
// RenewBatchMax renewals; a round that would not fit waits for the next
// trip; each round gets its own leases' results, in its order.
func TestRenewGroupSplitsItsAnswerAmongItsCalls(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		g, trips := setupRenewGroup()
		lone := fillRenew(t, g, trips)
		third := storekit.RenewBatchMax / 3
		a, b := renew(g, round("a", third)), renew(g, round("b", third))
		big := renew(g, round("big", storekit.RenewBatchMax))
		c := renew(g, round("c", third))
		synctest.Wait()
		require.Empty(t, trips, "rounds wait while %d round trips are out", storekit.Flights)

		lone[0].answer <- nil
		together := nextTrip(t, trips)
		require.Len(t, together.ps, 3*third, "a, b and c go together; big does not fit beside them and waits")
		together.answer <- nil
		synctest.Wait()
		for name, call := range map[string]*renewCall{"a": a, "b": b, "c": c} {
			require.NoError(t, call.err, name)
			require.Len(t, call.res, third, name)
			for i, r := range call.res {
				require.Equal(t, fmt.Sprintf("%s-%05d", name, i), r.Grant.Name, "%s gets its own results in order", name)
				require.True(t, r.Renewed)
				require.Equal(t, int64(2), r.Grant.Seq)
			}
		}
		alone := nextTrip(t, trips)
		require.Len(t, alone.ps, storekit.RenewBatchMax, "big goes next, alone")
		alone.answer <- nil
		lone[1].answer <- nil
		synctest.Wait()
		require.NoError(t, big.err)
		require.Len(t, big.res, storekit.RenewBatchMax)
	})
}

// TestRenewGroupFailsEveryCallOfAFailedTrip: a round trip that fails as a
// whole fails each round it carried with its error.
func TestRenewGroupFailsEveryCallOfAFailedTrip(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		g, trips := setupRenewGroup()
		lone := fillRenew(t, g, trips)
		a, b := renew(g, round("a", 3)), renew(g, round("b", 4))
		lone[0].answer <- nil
		lone[1].answer <- nil
		together := nextTrip(t, trips)
		require.Len(t, together.ps, 7)
		cut := fmt.Errorf("kitstore: renew 7 leases: %w: connection reset", store.ErrUnavailable)
		together.answer <- cut
		synctest.Wait()
		for _, call := range []*renewCall{a, b} {
			require.True(t, errors.Is(call.err, store.ErrUnavailable), "%v", call.err)
			require.Nil(t, call.res)
		}
	})
}
