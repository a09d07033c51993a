package etcdstore_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/internal/snapshot"
	"github.com/tenure-dev/tenure/store"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tenure-dev/tenure"
	"github.com/tenure-dev/tenure/internal/testserver/etcdserver"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store/etcdstore"
)

var _ store.ChainWrite = (*tenure.ChainWrite)(nil)

// rawWrite is a chain write made by hand: the identity of a grant, as a
// clone of its holder would present it, and what StrictTxn reported.
type rawWrite struct {
	g store.Grant
	// committed is the seq Commit reported, -1 after Abort, 0 before.
	committed int64
	ends      int
}

func (w *rawWrite) Name() string         { return w.g.Name }
func (w *rawWrite) Holder() store.Holder { return w.g.Holder }
func (w *rawWrite) Token() store.Token   { return w.g.Token }
func (w *rawWrite) Seq() int64           { return w.g.Seq }
func (w *rawWrite) Commit(seq int64)     { w.committed, w.ends = seq, w.ends+1 }
func (w *rawWrite) Abort()               { w.committed, w.ends = -1, w.ends+1 }

// strictBundle is a store on a key prefix of its own with data keys
// outside it.
type strictBundle struct {
	*bundle
	prefix, data string
}

func setupStrict(t *testing.T) *strictBundle {
	t.Helper()
	prefix := "tenure-test/" + testutil.UniqueName(t) + "/"
	b := setup(t, etcdserver.SharedEtcd(t), etcdstore.Config{KeyPrefix: prefix})
	data := "tenure-data/" + testutil.UniqueName(t) + "/"
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), 5*time.Second)
		defer cancel()
		_, err := b.cli.Delete(ctx, data, clientv3.WithPrefix())
		require.NoError(t, err)
	})
	return &strictBundle{bundle: b, prefix: prefix, data: data}
}

func (b *strictBundle) put(ctx context.Context, w store.ChainWrite, key, value string) error {
	_, err := b.store.StrictTxn(ctx, w, clientv3.OpPut(b.data+key, value))
	return err
}

// values reads every data key, without the data prefix.
func (b *strictBundle) values(t *testing.T) map[string]string {
	t.Helper()
	resp, err := b.cli.Get(t.Context(), b.data, clientv3.WithPrefix())
	require.NoError(t, err)
	m := make(map[string]string)
	for _, kv := range resp.Kvs {
		m[string(kv.Key)[len(b.data):]] = string(kv.Value)
	}
	return m
}

// held reads the lease's held/ key.
func (b *strictBundle) held(t *testing.T, name string) (version, lease int64) {
	t.Helper()
	resp, err := b.cli.Get(t.Context(), b.prefix+"held/"+name)
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1)
	return resp.Kvs[0].Version, resp.Kvs[0].Lease
}

// requireRefused checks that err is the strict fence's refusal of a write
// with tok, the lease's token now being recorded, for the reason want.
func requireRefused(t *testing.T, err error, name string, tok, recorded store.Token, want string) {
	t.Helper()
	require.ErrorIs(t, err, store.ErrFenced)
	var fe *store.FencedError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, store.FencedError{Resource: "lease:" + name, Offered: tok, Recorded: recorded}, *fe)
	require.ErrorContains(t, err, want)
}

// TestStrictTxnClonesRace: byte-identical clones (same holder, token and
// seq) write at once; exactly one write lands and every other is refused
// because the chain moved on.
func TestStrictTxnClonesRace(t *testing.T) {
	t.Parallel()
	b := setupStrict(t)
	g := b.acquire(t, testutil.UniqueName(t), testutil.Holder(t, "a"), longTTL)
	const clones = 8
	writes := make([]*rawWrite, clones)
	errs := make([]error, clones)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range clones {
		writes[i] = &rawWrite{g: g}
		wg.Go(func() {
			<-start
			errs[i] = b.put(t.Context(), writes[i], "by", strconv.Itoa(i))
		})
	}
	close(start)
	wg.Wait()
	winner := -1
	for i, err := range errs {
		require.Equal(t, 1, writes[i].ends, "clone %d: the write was ended once", i)
		if err == nil {
			require.Equal(t, -1, winner, "clones %d and %d both wrote", winner, i)
			winner = i
			require.Equal(t, g.Seq+1, writes[i].committed)
			continue
		}
		requireRefused(t, err, g.Name, g.Token, g.Token, "a clone of this holder wrote or renewed first")
		require.Equal(t, int64(-1), writes[i].committed, "clone %d: a refused write aborts", i)
	}
	require.NotEqual(t, -1, winner, "one clone wrote")
	require.Equal(t, map[string]string{"by": strconv.Itoa(winner)}, b.values(t))
	r := b.get(t, g.Name)
	require.Equal(t, g.Seq+1, r.Seq, "the chain advanced once")
	require.Equal(t, store.StateHeld, r.State)

	// The token check cannot tell the refused clones from the winner.
	resp, err := b.cli.Txn(t.Context()).If(b.store.IsOwner(g.Name, g.Token)).Then(clientv3.OpPut(b.data+"token", "any clone")).Commit()
	require.NoError(t, err)
	require.True(t, resp.Succeeded, "IsOwner passes for every clone")
}

// TestStrictTxnAdvancesChain: a strict write leaves the lease as a
// renewal would, on its etcd lease: renewable from the new seq only, and
// expiring when the etcd lease does.
func TestStrictTxnAdvancesChain(t *testing.T) {
	t.Parallel()
	b := setupStrict(t)
	g := b.acquire(t, testutil.UniqueName(t), testutil.Holder(t, "a"), etcdstore.MinTTL)
	_, leaseBefore := b.held(t, g.Name)

	resp, err := b.store.StrictTxn(t.Context(), &rawWrite{g: g},
		clientv3.OpPut(b.data+"x", "1"), clientv3.OpGet(b.data+"x"))
	require.NoError(t, err)
	require.Len(t, resp.Responses, 2, "the response holds the caller's operations only")
	require.Equal(t, "1", string(resp.Responses[1].GetResponseRange().Kvs[0].Value))
	version, leaseAfter := b.held(t, g.Name)
	require.Equal(t, g.Seq+1, version)
	require.Equal(t, leaseBefore, leaseAfter, "the held key stays on its etcd lease")

	stale, err := b.store.Renew(t.Context(), []store.RenewParams{renewParams(g, etcdstore.MinTTL)})
	require.NoError(t, err)
	require.False(t, stale[0].Renewed, "a renewal from the old seq is a clone's")
	require.Equal(t, g.Seq+1, stale[0].Grant.Seq)

	r := b.get(t, g.Name)
	waitExpiry(r.Remaining)
	r = b.get(t, g.Name)
	require.Equal(t, store.StateExpired, r.State, "the lease expires with its etcd lease")
	require.Equal(t, g.Seq+1, r.Seq, "an expired lease reports the seq the strict write left")
	err = b.put(t.Context(), &rawWrite{g: store.Grant{Name: g.Name, Holder: g.Holder, Token: g.Token, Seq: g.Seq + 1}}, "late", "x")
	requireRefused(t, err, g.Name, g.Token, g.Token, "the lease is not held")
	require.Equal(t, map[string]string{"x": "1"}, b.values(t))
}

// TestStrictTxnStaleToken: after a takeover the old tenure's write is
// refused, naming the new token; nothing of it applies.
func TestStrictTxnStaleToken(t *testing.T) {
	t.Parallel()
	b := setupStrict(t)
	name := testutil.UniqueName(t)
	old := b.acquire(t, name, testutil.Holder(t, "a"), longTTL)
	require.NoError(t, b.store.Release(t.Context(), store.ReleaseParams{Name: name, Holder: old.Holder, Token: old.Token}))

	err := b.put(t.Context(), &rawWrite{g: old}, "by", "old")
	requireRefused(t, err, name, old.Token, old.Token, "the lease is not held")

	cur := b.acquire(t, name, testutil.Holder(t, "b"), longTTL)
	w := &rawWrite{g: old}
	err = b.put(t.Context(), w, "by", "old")
	requireRefused(t, err, name, old.Token, cur.Token, "it was taken over")
	require.Equal(t, int64(-1), w.committed)
	require.NoError(t, b.put(t.Context(), &rawWrite{g: cur}, "by", "new"))
	require.Equal(t, map[string]string{"by": "new"}, b.values(t))
}

// TestStrictTxnFailureCostsNothing: a transaction etcd refuses (two writes
// to one key) applies nothing and leaves the chain where it was.
func TestStrictTxnFailureCostsNothing(t *testing.T) {
	t.Parallel()
	b := setupStrict(t)
	g := b.acquire(t, testutil.UniqueName(t), testutil.Holder(t, "a"), longTTL)
	w := &rawWrite{g: g}
	_, err := b.store.StrictTxn(t.Context(), w,
		clientv3.OpPut(b.data+"other", "x"), clientv3.OpPut(b.data+"dup", "1"), clientv3.OpPut(b.data+"dup", "2"))
	require.ErrorContains(t, err, "duplicate key")
	require.NotErrorIs(t, err, store.ErrFenced)
	require.NotErrorIs(t, err, store.ErrUnavailable)
	require.Equal(t, int64(-1), w.committed)
	require.Empty(t, b.values(t))
	require.Equal(t, g.Seq, b.get(t, g.Name).Seq)
	require.NoError(t, b.put(t.Context(), &rawWrite{g: g}, "by", "a"), "the same seq writes after a failure")
}

// runClient starts a tenure client over the bundle's store, stopped when
// the test ends.
func (b *strictBundle) runClient(t *testing.T, label string, ttl time.Duration) *tenure.Client {
	t.Helper()
	c, err := tenure.New(b.store, tenure.Config{Label: label, TTL: ttl})
	require.NoError(t, err)
	ctx, stop := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- c.Run(ctx) }()
	t.Cleanup(func() { stop(); require.NoError(t, <-ran) })
	return c
}

// write makes one strict write under l, as an application does.
func (b *strictBundle) write(t *testing.T, l *tenure.Lease, key, value string) error {
	t.Helper()
	w, err := l.BeginChainWrite()
	if err != nil {
		return err
	}
	return b.put(t.Context(), w, key, value)
}

// TestStrictTxnInStepWithRenewals writes back to back for two TTLs: the
// renewals in between carry the seq the writes advanced, so the holder's
// own writes are never taken for a clone's.
func TestStrictTxnInStepWithRenewals(t *testing.T) {
	t.Parallel()
	b := setupStrict(t)
	const ttl = etcdstore.MinTTL
	name := testutil.UniqueName(t)
	l, err := b.runClient(t, "strict", ttl).Acquire(t.Context(), name)
	require.NoError(t, err)
	n := 0
	for start := time.Now(); time.Since(start) < 2*ttl; n++ {
		require.NoError(t, b.write(t, l, "w"+strconv.Itoa(n), l.Token().String()), "write %d", n)
	}
	require.NoError(t, l.Err(), "the holder's own writes were taken for a clone's")
	require.Len(t, b.values(t), n)
	seq := l.Seq()
	require.Eventually(t, func() bool { return l.Seq() >= seq+2 || l.Err() != nil }, 10*ttl, ttl/20, "two renewals after the writes")
	require.NoError(t, l.Err())
	require.Eventually(t, func() bool {
		rec, err := b.store.Get(t.Context(), name)
		return err == nil && rec.Seq == l.Seq()
	}, 10*ttl, time.Millisecond, "the client is in step with the chain")

	require.NoError(t, l.Release(t.Context()))
	require.ErrorIs(t, b.write(t, l, "late", "x"), tenure.ErrLost, "no write after the tenure ended")
	require.Len(t, b.values(t), n)
}

// TestStrictTxnClones: of an original and its clone (a second client that
// adopted the very same tenure) only the one at the head of the renewal
// chain writes; etcd refuses the other, which still believes it holds the
// tenure.
func TestStrictTxnClones(t *testing.T) {
	t.Parallel()
	b := setupStrict(t)
	name := testutil.UniqueName(t)
	original, err := b.runClient(t, "a", time.Minute).Acquire(t.Context(), name)
	require.NoError(t, err)
	st := snapshot.Take(original)
	adopted, err := snapshot.Adopt(t.Context(), b.runClient(t, "restored", time.Minute), st)
	require.NoError(t, err)
	clone := adopted.(*tenure.Lease)
	// The clone's client renews at once: from then on the clone is at the
	// head of the chain and the original, which cannot know it until its
	// own next renewal, is behind.
	require.Eventually(t, func() bool { return clone.Seq() > st.Seq || clone.Err() != nil }, eventTimeout, time.Millisecond)
	require.NoError(t, clone.Err())
	require.Equal(t, original.Token(), clone.Token(), "a clone carries the very same token")

	tok := original.Token()
	requireRefused(t, b.write(t, original, "by", "original"), name, tok, tok, "a clone of this holder wrote or renewed first")
	require.NoError(t, b.write(t, clone, "by", "clone"))
	require.NoError(t, b.write(t, clone, "again", "clone"))
	requireRefused(t, b.write(t, original, "again", "original"), name, tok, tok, "a clone of this holder wrote or renewed first")
	require.Equal(t, map[string]string{"by": "clone", "again": "clone"}, b.values(t))
	require.NoError(t, clone.Err())
}

// TestStrictTxnFailureKeepsTenure: a write etcd refuses leaves the live
// holder's chain alone, so it renews and writes on.
func TestStrictTxnFailureKeepsTenure(t *testing.T) {
	t.Parallel()
	b := setupStrict(t)
	const ttl = etcdstore.MinTTL
	l, err := b.runClient(t, "a", ttl).Acquire(t.Context(), testutil.UniqueName(t))
	require.NoError(t, err)
	w, err := l.BeginChainWrite()
	require.NoError(t, err)
	_, err = b.store.StrictTxn(t.Context(), w, clientv3.OpPut(b.data+"dup", "1"), clientv3.OpPut(b.data+"dup", "2"))
	require.ErrorContains(t, err, "duplicate key")
	seq := l.Seq()
	require.Eventually(t, func() bool { return l.Seq() >= seq+2 || l.Err() != nil }, 10*ttl, ttl/20, "two renewals")
	require.NoError(t, l.Err())
	require.NoError(t, b.write(t, l, "by", "a"))
	require.Equal(t, map[string]string{"by": "a"}, b.values(t))
}

func TestStrictTxnInvalid(t *testing.T) {
	t.Parallel()
	b := setupStrict(t)
	g := b.acquire(t, testutil.UniqueName(t), testutil.Holder(t, "a"), longTTL)
	prefix := b.prefix
	put := clientv3.OpPut(b.data+"x", "v")
	many := make([]clientv3.Op, etcdstore.DefaultMaxTxnOps-1)
	for i := range many {
		many[i] = clientv3.OpPut(b.data+strconv.Itoa(i), "v")
	}
	cases := map[string]struct {
		g   store.Grant
		ops []clientv3.Op
	}{
		"no operations":     {g: g},
		"too many":          {g: g, ops: many},
		"zero operation":    {g: g, ops: []clientv3.Op{put, {}}},
		"zero token":        {g: store.Grant{Name: g.Name, Holder: g.Holder, Seq: g.Seq}, ops: []clientv3.Op{put}},
		"zero seq":          {g: store.Grant{Name: g.Name, Holder: g.Holder, Token: g.Token}, ops: []clientv3.Op{put}},
		"empty name":        {g: store.Grant{Holder: g.Holder, Token: g.Token, Seq: g.Seq}, ops: []clientv3.Op{put}},
		"no holder":         {g: store.Grant{Name: g.Name, Token: g.Token, Seq: g.Seq}, ops: []clientv3.Op{put}},
		"put in prefix":     {g: g, ops: []clientv3.Op{put, clientv3.OpPut(prefix+"held/"+g.Name, "forged")}},
		"delete in prefix":  {g: g, ops: []clientv3.Op{clientv3.OpDelete(prefix + "start/" + g.Name)}},
		"delete over it":    {g: g, ops: []clientv3.Op{clientv3.OpDelete(prefix[:len(prefix)-1], clientv3.WithPrefix())}},
		"delete from below": {g: g, ops: []clientv3.Op{clientv3.OpDelete("\x00", clientv3.WithFromKey())}},
		"delete range":      {g: g, ops: []clientv3.Op{clientv3.OpDelete("a", clientv3.WithRange(prefix+"x"))}},
		"nested put":        {g: g, ops: []clientv3.Op{clientv3.OpTxn(nil, nil, []clientv3.Op{clientv3.OpPut(prefix+"seq/"+g.Name, "9")})}},
	}
	for name, c := range cases {
		w := &rawWrite{g: c.g}
		_, err := b.store.StrictTxn(t.Context(), w, c.ops...)
		require.ErrorIs(t, err, store.ErrInvalid, name)
		require.ErrorContains(t, err, "etcdstore: strict txn", name)
		require.Equal(t, int64(-1), w.committed, "%s: a refused write aborts", name)
	}
	_, err := b.store.StrictTxn(t.Context(), nil, put)
	require.ErrorIs(t, err, store.ErrInvalid, "nil chain write")
	require.Empty(t, b.values(t), "bad input writes nothing")
	require.Equal(t, g.Seq, b.get(t, g.Name).Seq, "bad input leaves the chain alone")

	_, err = b.store.StrictTxn(t.Context(), &rawWrite{g: g}, clientv3.OpGet(prefix, clientv3.WithPrefix()), put)
	require.NoError(t, err, "reads under the prefix are allowed")
}

// TestStrictTxnClosed: a closed store sends nothing and ends the write.
func TestStrictTxnClosed(t *testing.T) {
	t.Parallel()
	b := setupStrict(t)
	g := b.acquire(t, testutil.UniqueName(t), testutil.Holder(t, "a"), longTTL)
	require.NoError(t, b.store.Close())
	w := &rawWrite{g: g}
	err := b.put(t.Context(), w, "x", "v")
	require.ErrorIs(t, err, store.ErrClosed)
	require.Equal(t, int64(-1), w.committed)
}

// TestStrictTxnUnknownOutcomeCostsTenure: a strict write that applied but
// whose reply was lost is unavailable, not committed; the holder's next
// renewal finds the chain moved and ends the tenure (the cheap side).
func TestStrictTxnUnknownOutcomeCostsTenure(t *testing.T) {
	t.Parallel()
	b := setupStrict(t)
	var armed atomic.Bool
	var lost atomic.Int64
	// Carry out transactions, then lose their replies while armed, as a
	// network does after the server committed.
	loseTxnReplies := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoke grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		err := invoke(ctx, method, req, reply, cc, opts...)
		if err != nil || method != "/etcdserverpb.KV/Txn" || !armed.Load() {
			return err
		}
		lost.Add(1)
		return status.Error(codes.Unavailable, "the reply was lost")
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{etcdserver.SharedEtcd(t).Endpoint},
		DialTimeout: eventTimeout,
		Logger:      zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(loseTxnReplies)},
	})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, cli.Close()) })
	writer, err := etcdstore.New(cli, etcdstore.Config{KeyPrefix: b.prefix})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, writer.Close()) })

	const ttl = etcdstore.MinTTL
	l, err := b.runClient(t, "a", ttl).Acquire(t.Context(), testutil.UniqueName(t))
	require.NoError(t, err)
	w, err := l.BeginChainWrite()
	require.NoError(t, err)
	armed.Store(true)
	_, err = writer.StrictTxn(t.Context(), w, clientv3.OpPut(b.data+"by", "a"))
	require.ErrorIs(t, err, store.ErrUnavailable)
	require.Equal(t, int64(1), lost.Load())
	require.Equal(t, map[string]string{"by": "a"}, b.values(t), "the write applied")
	select {
	case <-l.Done():
	case <-time.After(10 * ttl):
		t.Fatal("the tenure outlived a strict write of unknown outcome that applied")
	}
	var gone *tenure.LostError
	require.ErrorAs(t, l.Err(), &gone)
	require.Equal(t, tenure.LossSeqMismatch, gone.Reason, "the renewal found the chain moved")
}
