package etcdstore_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/testserver/etcdserver"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/etcdstore"
)

// TestSlotsAcrossTransactions: with more slots than one transaction can
// try (two at MaxTxnOps 16), the slots are tried a transaction at a
// time, in order: each is taken once, in slot order, all held are
// refused with every holder, and a slot released in a later transaction's
// range is found.
func TestSlotsAcrossTransactions(t *testing.T) {
	t.Parallel()
	b := setup(t, etcdserver.SharedEtcd(t), etcdstore.Config{MaxTxnOps: 16})
	name := testutil.UniqueName(t)
	const slots = 5
	params := func(label string) store.SlotParams {
		return store.SlotParams{Name: name, Slots: slots, Holder: testutil.Holder(t, label), TTL: longTTL}
	}
	var gs []store.SlotGrant
	for k := range slots {
		g, err := b.store.AcquireSlot(t.Context(), params(fmt.Sprintf("h%d", k)))
		require.NoError(t, err)
		require.Equal(t, k, g.Slot)
		require.Equal(t, g.Token, b.get(t, store.SlotName(name, k)).Token)
		gs = append(gs, g)
	}
	_, err := b.store.AcquireSlot(t.Context(), params("late"))
	var all *store.SlotsHeldError
	require.ErrorAs(t, err, &all)
	require.Len(t, all.Held, slots)
	for k, h := range all.Held {
		require.Equal(t, gs[k].Holder, h.Holder)
		require.Equal(t, gs[k].Token, h.Token)
		require.Positive(t, h.Remaining)
	}
	require.NoError(t, b.store.Release(t.Context(), store.ReleaseParams{Name: gs[3].Name, Holder: gs[3].Holder, Token: gs[3].Token}))
	g, err := b.store.AcquireSlot(t.Context(), params("next"))
	require.NoError(t, err)
	require.Equal(t, 3, g.Slot)
	require.Greater(t, g.Token, gs[3].Token)
}
