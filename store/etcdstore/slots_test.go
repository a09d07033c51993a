package etcdstore_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

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

// countingKV counts the transactions sent through it.
type countingKV struct {
	clientv3.KV
	txns atomic.Int32
}

func (c *countingKV) Txn(ctx context.Context) clientv3.Txn {
	c.txns.Add(1)
	return c.KV.Txn(ctx)
}

// TestAcquireSlotIsOneTransaction: taking the last free of three slots,
// and being refused when all are held, are one etcd transaction each.
func TestAcquireSlotIsOneTransaction(t *testing.T) {
	t.Parallel()
	srv := etcdserver.SharedEtcd(t)
	cli := srv.Client(t)
	kv := &countingKV{KV: cli.KV}
	cli.KV = kv
	s := etcdserver.EtcdStore(t, cli, etcdstore.Config{KeyPrefix: "tenure-test/" + testutil.UniqueName(t) + "/"})
	p := store.SlotParams{Name: "jobs", Slots: 3, Holder: testutil.Holder(t, "me"), TTL: longTTL}
	for k := range 2 {
		h := testutil.Holder(t, fmt.Sprintf("h%d", k))
		_, err := s.AcquireSlot(t.Context(), store.SlotParams{Name: p.Name, Slots: p.Slots, Holder: h, TTL: p.TTL})
		require.NoError(t, err)
	}
	kv.txns.Store(0)
	g, err := s.AcquireSlot(t.Context(), p)
	require.NoError(t, err)
	require.Equal(t, 2, g.Slot)
	require.Equal(t, int32(1), kv.txns.Load(), "the last free slot is taken in one transaction")
	_, err = s.AcquireSlot(t.Context(), p)
	var all *store.SlotsHeldError
	require.ErrorAs(t, err, &all)
	require.Equal(t, int32(2), kv.txns.Load(), "all held is one transaction too")
}
