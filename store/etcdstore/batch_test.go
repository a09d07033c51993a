package etcdstore_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/testserver/etcdserver"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/etcdstore"
)

// TestBatchesManyTransactions acquires and releases batches larger than
// one transaction holds, with a lease held by another holder in the
// acquire batch (the caller waits in line for it) and, in the release
// batch, that lease released by its holder naming the caller as next, and
// a stale tenure.
func TestBatchesManyTransactions(t *testing.T) {
	t.Parallel()
	// Two acquisitions (7 writes each) or three releases (6) per transaction.
	b := setup(t, etcdserver.SharedEtcd(t), etcdstore.Config{MaxTxnOps: 9})
	me, other := testutil.Holder(t, "me"), testutil.Holder(t, "other")
	prefix := testutil.UniqueName(t)
	held := b.acquire(t, prefix+"_held", other, longTTL)
	before := b.acquire(t, prefix+"_before", other, longTTL)

	var ps []store.AcquireParams
	for i := range 7 {
		ps = append(ps, store.AcquireParams{Name: fmt.Sprintf("%s_%d", prefix, i), Holder: me, TTL: longTTL + longTTL*time.Duration(i%2)})
	}
	ps = append(ps, store.AcquireParams{Name: held.Name, Holder: me, TTL: longTTL, Wait: true})
	res, err := b.store.AcquireBatch(t.Context(), ps)
	require.NoError(t, err)
	require.Len(t, res, len(ps))
	for i, r := range res[:7] {
		require.NoError(t, r.Err, "lease %q is free", ps[i].Name)
		require.Equal(t, ps[i].Name, r.Grant.Name, "results come back in the order of the batch")
		require.Equal(t, me, r.Grant.Holder)
		require.Equal(t, int64(1), r.Grant.Seq)
		require.Equal(t, ps[i].TTL, r.Grant.Remaining)
		require.Greater(t, r.Grant.Token, before.Token, "tokens go up")
		require.Equal(t, r.Grant.Token, b.get(t, ps[i].Name).Token)
	}
	require.Equal(t, res[0].Grant.Token, res[1].Grant.Token, "leases taken in one transaction share its revision")
	require.NotEqual(t, res[1].Grant.Token, res[2].Grant.Token, "the next transaction has a revision of its own")
	var he *store.HeldError
	require.ErrorAs(t, res[7].Err, &he)
	require.Equal(t, other, he.Holder)
	require.Equal(t, held.Token, he.Token)
	require.Equal(t, 1, he.Position, "the refused entry waits in line")

	rps := []store.ReleaseParams{{Name: held.Name, Holder: other, Token: held.Token}}
	for _, r := range res[:7] {
		rps = append(rps, store.ReleaseParams{Name: r.Grant.Name, Holder: me, Token: r.Grant.Token})
	}
	rps = append(rps, store.ReleaseParams{Name: before.Name, Holder: other, Token: before.Token - 1})
	errs, err := b.store.ReleaseBatch(t.Context(), rps)
	require.NoError(t, err)
	require.Len(t, errs, len(rps))
	for i, err := range errs[:8] {
		require.NoError(t, err, "release of %q", rps[i].Name)
		require.Equal(t, store.StateReleased, b.get(t, rps[i].Name).State)
	}
	require.ErrorIs(t, errs[8], store.ErrNotHeld, "a stale tenure is not released")
	require.Equal(t, store.StateHeld, b.get(t, before.Name).State)

	g, err := b.store.Acquire(t.Context(), store.AcquireParams{Name: held.Name, Holder: me, TTL: longTTL})
	require.NoError(t, err, "the follower named by the release takes the lease")
	require.Greater(t, g.Token, held.Token)
}

// TestBatchesFillTransactions acquires and releases batches of several
// full transactions at etcd's default --max-txn-ops, which refuses a
// transaction whose nested entries, counted as etcd counts them, exceed
// it.
func TestBatchesFillTransactions(t *testing.T) {
	t.Parallel()
	b := setup(t, etcdserver.SharedEtcd(t), etcdstore.Config{})
	h := testutil.Holder(t, "holder")
	prefix := testutil.UniqueName(t)
	ps := make([]store.AcquireParams, 3*etcdstore.DefaultMaxTxnOps)
	for i := range ps {
		ps[i] = store.AcquireParams{Name: fmt.Sprintf("%s_%03d", prefix, i), Holder: h, TTL: longTTL}
	}
	res, err := b.store.AcquireBatch(t.Context(), ps)
	require.NoError(t, err)
	rps := make([]store.ReleaseParams, len(res))
	for i, r := range res {
		require.NoError(t, r.Err, "lease %q", ps[i].Name)
		rps[i] = store.ReleaseParams{Name: r.Grant.Name, Holder: h, Token: r.Grant.Token}
	}
	errs, err := b.store.ReleaseBatch(t.Context(), rps)
	require.NoError(t, err)
	for i, err := range errs {
		require.NoError(t, err, "lease %q", rps[i].Name)
	}
	require.Equal(t, store.StateReleased, b.get(t, rps[len(rps)-1].Name).State)
}
