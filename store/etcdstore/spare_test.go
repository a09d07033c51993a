package etcdstore_test

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/store"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/tenure-dev/tenure/internal/testserver/etcdserver"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store/etcdstore"
)

// calls counts the unary calls of an etcd client, by method.
type calls struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *calls) count(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoke grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	c.mu.Lock()
	c.n[method]++
	c.mu.Unlock()
	return invoke(ctx, method, req, reply, cc, opts...)
}

// take returns the calls counted since the last take, and forgets them.
func (c *calls) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := maps.Clone(c.n)
	clear(c.n)
	return n
}

// countedStore is a store with a client of its own whose calls are
// counted, under prefix (a fresh one when empty).
func countedStore(t *testing.T, prefix string) (*etcdstore.Store, *calls) {
	t.Helper()
	c := &calls{n: make(map[string]int)}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{etcdserver.SharedEtcd(t).Endpoint},
		DialTimeout: eventTimeout,
		Logger:      zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(c.count)},
	})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, cli.Close()) })
	return etcdserver.EtcdStore(t, cli, etcdstore.Config{KeyPrefix: prefix}), c
}

const (
	grantCall = "/etcdserverpb.Lease/LeaseGrant"
	txnCall   = "/etcdserverpb.KV/Txn"
	ttlCall   = "/etcdserverpb.Lease/LeaseTimeToLive"
)

// Once a store has acquired a lease with a TTL, its next acquisition with
// that TTL is one round trip: the etcd lease comes from the spare granted
// in the background, and the tenure is reported shorter by the spare's
// age. A refused acquisition keeps its etcd lease as the spare and
// revokes nothing; the next acquisition takes it.
func TestAcquireTakesTheSpareLease(t *testing.T) {
	t.Parallel()
	s, c := countedStore(t, "")
	const ttl = 10 * time.Second
	holder, other := testutil.Holder(t, "holder"), testutil.Holder(t, "other")
	name := testutil.UniqueName(t)
	acquire := func(n string, h store.Holder) (store.Grant, error) {
		return s.Acquire(t.Context(), store.AcquireParams{Name: n, Holder: h, TTL: ttl})
	}

	g, err := acquire(name+"-1", holder)
	require.NoError(t, err)
	require.Equal(t, ttl, g.Remaining, "a lease granted by the acquisition")
	etcdstore.WaitForSpares(s)
	require.Equal(t, map[string]int{grantCall: 2, txnCall: 1}, c.take(), "the acquisition, and the spare granted after it")

	g, err = acquire(name+"-2", holder)
	require.NoError(t, err)
	require.Less(t, g.Remaining, ttl, "the tenure is reported shorter by the spare's age")
	require.Greater(t, g.Remaining, ttl*3/4)
	etcdstore.WaitForSpares(s)
	require.Equal(t, map[string]int{txnCall: 1, grantCall: 1}, c.take(), "the transaction alone, and the next spare")

	_, err = acquire(name+"-2", other)
	require.ErrorIs(t, err, store.ErrHeld)
	etcdstore.WaitForSpares(s)
	require.Equal(t, map[string]int{txnCall: 1, ttlCall: 1}, c.take(), "a refusal keeps the spare: no grant, no revocation")

	_, err = acquire(name+"-3", other)
	require.NoError(t, err)
	etcdstore.WaitForSpares(s)
	require.Equal(t, map[string]int{txnCall: 1, grantCall: 1}, c.take(), "the spare the refusal gave back, and the next")
}

// The etcd lease of a refused acquisition that granted it becomes the
// spare, aged from its grant: the next acquisition takes it, reporting
// the tenure shorter by that age, and grants none on its path.
func TestRefusedAcquisitionLeavesItsLeaseAsTheSpare(t *testing.T) {
	t.Parallel()
	prefix := "tenure-test/" + testutil.UniqueName(t) + "/"
	s, c := countedStore(t, prefix)
	other, _ := countedStore(t, prefix)
	const ttl = 10 * time.Second
	name := testutil.UniqueName(t)
	_, err := other.Acquire(t.Context(), store.AcquireParams{Name: name, Holder: testutil.Holder(t, "holder"), TTL: ttl})
	require.NoError(t, err)

	me := testutil.Holder(t, "me")
	_, err = s.Acquire(t.Context(), store.AcquireParams{Name: name, Holder: me, TTL: ttl})
	require.ErrorIs(t, err, store.ErrHeld)
	require.Equal(t, 1, c.take()[grantCall], "the refused acquisition granted its etcd lease")
	g, err := s.Acquire(t.Context(), store.AcquireParams{Name: name + "-free", Holder: me, TTL: ttl})
	require.NoError(t, err)
	require.Less(t, g.Remaining, ttl, "the tenure is reported shorter by the age of the lease's grant")
	require.Greater(t, g.Remaining, ttl*3/4)
	etcdstore.WaitForSpares(s)
	require.Equal(t, map[string]int{txnCall: 1, grantCall: 1}, c.take(), "the transaction on the spare, and the next spare")
}

// A batch of 1,000 leases, as one client holds them, is one transaction
// at etcd's default --max-txn-ops: acquired in one (with one grant) and
// renewed in one (with one grant), the entries in nested groups. An
// error here names the server's refusal (too many operations, a request
// too large).
func TestThousandLeasesInOneTransaction(t *testing.T) {
	t.Parallel()
	s, c := countedStore(t, "")
	h := testutil.Holder(t, "holder")
	ps := make([]store.AcquireParams, 1000) // names as short as a service's, under the store's prefix
	for i := range ps {
		ps[i] = store.AcquireParams{Name: fmt.Sprintf("l%04d", i), Holder: h, TTL: longTTL}
	}
	res, err := s.AcquireBatch(t.Context(), ps)
	require.NoError(t, err)
	rps := make([]store.RenewParams, len(res))
	for i, r := range res {
		require.NoError(t, r.Err, "lease %q", ps[i].Name)
		require.Equal(t, ps[i].Name, r.Grant.Name, "results come back in the order of the batch")
		rps[i] = renewParams(r.Grant, longTTL)
	}
	require.Equal(t, res[0].Grant.Token, res[len(res)-1].Grant.Token, "one transaction, one revision")
	require.Equal(t, map[string]int{grantCall: 1, txnCall: 1}, c.take())

	rs, err := s.Renew(t.Context(), rps)
	require.NoError(t, err)
	for i, r := range rs {
		require.True(t, r.Renewed, "lease %q", rps[i].Name)
		require.Equal(t, rps[i].Name, r.Grant.Name)
		require.Equal(t, int64(2), r.Grant.Seq)
	}
	require.Equal(t, map[string]int{grantCall: 1, txnCall: 1}, c.take())
}
