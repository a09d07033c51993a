package consulstore_test

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/internal/snapshot"
	"github.com/tenure-dev/tenure/store"

	"github.com/hashicorp/consul/api"
	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure"
	"github.com/tenure-dev/tenure/internal/testserver/consulserver"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store/consulstore"
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
	data string
}

func setupStrict(t *testing.T) *strictBundle {
	t.Helper()
	b := setup(t, consulstore.Config{})
	data := "tenuredata/" + testutil.UniqueName(t) + "/"
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), 10*time.Second)
		defer cancel()
		_, err := b.client.KV().DeleteTree(data, (&api.WriteOptions{}).WithContext(ctx))
		require.NoError(t, err)
	})
	return &strictBundle{bundle: b, data: data}
}

func set(key, value string) *api.TxnOp {
	return &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVSet, Key: key, Value: []byte(value)}}
}

func (b *strictBundle) put(ctx context.Context, w store.ChainWrite, key, value string) error {
	_, err := b.store.StrictTxn(ctx, w, api.TxnOps{set(b.data+key, value)})
	return err
}

// values reads every data key, without the data prefix.
func (b *strictBundle) values(t *testing.T) map[string]string {
	t.Helper()
	pairs, _, err := b.client.KV().List(b.data, (&api.QueryOptions{RequireConsistent: true}).WithContext(t.Context()))
	require.NoError(t, err)
	m := make(map[string]string)
	for _, p := range pairs {
		m[p.Key[len(b.data):]] = string(p.Value)
	}
	return m
}

func (b *strictBundle) get(t *testing.T) store.Record {
	t.Helper()
	r, err := b.store.Get(t.Context(), b.name)
	require.NoError(t, err)
	return r
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
// because the chain moved on, whether at the read or at the
// compare-and-set.
func TestStrictTxnClonesRace(t *testing.T) {
	t.Parallel()
	b := setupStrict(t)
	g := b.acquire(t, testutil.Holder(t, "a"), longTTL)
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
	r := b.get(t)
	require.Equal(t, g.Seq+1, r.Seq, "the chain advanced once")
	require.Equal(t, store.StateHeld, r.State)

	// The token check cannot tell the refused clones from the winner.
	fence, err := b.store.FenceOps(g.Name, g.Token)
	require.NoError(t, err)
	ok, _, _, err := b.client.Txn().Txn(append(fence, set(b.data+"token", "any clone")), (&api.QueryOptions{}).WithContext(t.Context()))
	require.NoError(t, err)
	require.True(t, ok, "FenceOps passes for every clone")
}

// TestStrictTxnAdvancesChain: a strict write leaves the lease as a
// renewal would, locked by its session: renewable from the new seq only,
// and ended when its session is.
func TestStrictTxnAdvancesChain(t *testing.T) {
	t.Parallel()
	b := setupStrict(t)
	g := b.acquire(t, testutil.Holder(t, "a"), longTTL)
	session := b.session(t, b.key("lease"))

	resp, err := b.store.StrictTxn(t.Context(), &rawWrite{g: g}, api.TxnOps{
		set(b.data+"x", "1"),
		{KV: &api.KVTxnOp{Verb: api.KVGet, Key: b.data + "x"}},
	})
	require.NoError(t, err)
	require.Len(t, resp.Results, 2, "the response holds the results of the caller's operations only")
	require.Equal(t, "1", string(resp.Results[1].KV.Value))
	require.Equal(t, session, b.session(t, b.key("lease")), "the record stays locked by the tenure's session")
	require.Equal(t, g.Seq+1, b.get(t).Seq)

	stale, err := b.store.Renew(t.Context(), []store.RenewParams{{Name: g.Name, Holder: g.Holder, Token: g.Token, Seq: g.Seq, TTL: longTTL}})
	require.NoError(t, err)
	require.False(t, stale[0].Renewed, "a renewal from the old seq is a clone's")
	require.Equal(t, g.Seq+1, stale[0].Grant.Seq)

	// Consul invalidating the session (an expiry) unlocks the record.
	_, err = b.client.Session().Destroy(session, (&api.WriteOptions{}).WithContext(t.Context()))
	require.NoError(t, err)
	require.Equal(t, store.StateExpired, b.get(t).State)
	next := store.Grant{Name: g.Name, Holder: g.Holder, Token: g.Token, Seq: g.Seq + 1}
	requireRefused(t, b.put(t.Context(), &rawWrite{g: next}, "late", "x"), g.Name, g.Token, g.Token, "the lease is not held")
	require.Equal(t, map[string]string{"x": "1"}, b.values(t))
}

// TestStrictTxnStaleToken: after a release the tenure's write is refused,
// and after a takeover too, naming the new token; nothing of it applies.
func TestStrictTxnStaleToken(t *testing.T) {
	t.Parallel()
	b := setupStrict(t)
	old := b.acquire(t, testutil.Holder(t, "a"), longTTL)
	require.NoError(t, b.store.Release(t.Context(), store.ReleaseParams{Name: b.name, Holder: old.Holder, Token: old.Token}))

	err := b.put(t.Context(), &rawWrite{g: old}, "by", "old")
	requireRefused(t, err, b.name, old.Token, old.Token, "the lease is not held")

	cur := b.acquire(t, testutil.Holder(t, "b"), longTTL)
	w := &rawWrite{g: old}
	err = b.put(t.Context(), w, "by", "old")
	requireRefused(t, err, b.name, old.Token, cur.Token, "it was taken over")
	require.Equal(t, int64(-1), w.committed)
	require.NoError(t, b.put(t.Context(), &rawWrite{g: cur}, "by", "new"))
	require.Equal(t, map[string]string{"by": "new"}, b.values(t))
}

// TestStrictTxnRolledBackCostsNothing: a transaction rolled back by one of
// the caller's own operations applies nothing, says which operation
// failed, and leaves the chain where it was.
func TestStrictTxnRolledBackCostsNothing(t *testing.T) {
	t.Parallel()
	b := setupStrict(t)
	g := b.acquire(t, testutil.Holder(t, "a"), longTTL)
	w := &rawWrite{g: g}
	resp, err := b.store.StrictTxn(t.Context(), w, api.TxnOps{
		set(b.data+"other", "x"),
		{KV: &api.KVTxnOp{Verb: api.KVCheckNotExists, Key: b.data + "other"}},
	})
	require.ErrorContains(t, err, "Consul rolled back the transaction")
	require.NotErrorIs(t, err, store.ErrFenced)
	require.NotErrorIs(t, err, store.ErrUnavailable)
	require.NotNil(t, resp)
	require.Len(t, resp.Errors, 1)
	require.Equal(t, 1, resp.Errors[0].OpIndex, "the failed operation is counted among the caller's")
	require.Equal(t, int64(-1), w.committed)
	require.Empty(t, b.values(t))
	require.Equal(t, g.Seq, b.get(t).Seq)
	require.NoError(t, b.put(t.Context(), &rawWrite{g: g}, "by", "a"), "the same seq writes after a rollback")
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
	const ttl = time.Second
	l, err := b.runClient(t, "strict", ttl).Acquire(t.Context(), b.name)
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
		rec, err := b.store.Get(t.Context(), b.name)
		return err == nil && rec.Seq == l.Seq()
	}, 10*ttl, time.Millisecond, "the client is in step with the chain")

	require.NoError(t, l.Release(t.Context()))
	require.ErrorIs(t, b.write(t, l, "late", "x"), tenure.ErrLost, "no write after the tenure ended")
	require.Len(t, b.values(t), n)
}

// TestStrictTxnClones: of an original and its clone (a second client that
// adopted the very same tenure) only the one at the head of the renewal
// chain writes; Consul refuses the other, which still believes it holds
// the tenure.
func TestStrictTxnClones(t *testing.T) {
	t.Parallel()
	b := setupStrict(t)
	original, err := b.runClient(t, "a", time.Minute).Acquire(t.Context(), b.name)
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
	requireRefused(t, b.write(t, original, "by", "original"), b.name, tok, tok, "a clone of this holder wrote or renewed first")
	require.NoError(t, b.write(t, clone, "by", "clone"))
	require.NoError(t, b.write(t, clone, "again", "clone"))
	requireRefused(t, b.write(t, original, "again", "original"), b.name, tok, tok, "a clone of this holder wrote or renewed first")
	require.Equal(t, map[string]string{"by": "clone", "again": "clone"}, b.values(t))
	require.NoError(t, clone.Err())
}

// TestStrictTxnFailureKeepsTenure: a write rolled back by the caller's own
// operation leaves the live holder's chain alone, so it renews and writes
// on.
func TestStrictTxnFailureKeepsTenure(t *testing.T) {
	t.Parallel()
	b := setupStrict(t)
	const ttl = time.Second
	l, err := b.runClient(t, "a", ttl).Acquire(t.Context(), b.name)
	require.NoError(t, err)
	w, err := l.BeginChainWrite()
	require.NoError(t, err)
	_, err = b.store.StrictTxn(t.Context(), w, api.TxnOps{{KV: &api.KVTxnOp{Verb: api.KVCheckIndex, Key: b.data + "absent", Index: 1}}})
	require.ErrorContains(t, err, "Consul rolled back the transaction")
	seq := l.Seq()
	require.Eventually(t, func() bool { return l.Seq() >= seq+2 || l.Err() != nil }, 10*ttl, ttl/20, "two renewals")
	require.NoError(t, l.Err())
	require.NoError(t, b.write(t, l, "by", "a"))
	require.Equal(t, map[string]string{"by": "a"}, b.values(t))
}

func TestStrictTxnInvalid(t *testing.T) {
	t.Parallel()
	b := setupStrict(t)
	g := b.acquire(t, testutil.Holder(t, "a"), longTTL)
	prefix := b.store.Config().KeyPrefix
	put := set(b.data+"x", "v")
	many := make(api.TxnOps, 127)
	for i := range many {
		many[i] = set(b.data+strconv.Itoa(i), "v")
	}
	cases := map[string]struct {
		g   store.Grant
		ops api.TxnOps
	}{
		"no operations":    {g: g},
		"too many":         {g: g, ops: many},
		"nil operation":    {g: g, ops: api.TxnOps{put, nil}},
		"not KV":           {g: g, ops: api.TxnOps{{Node: &api.NodeTxnOp{Verb: api.NodeGet}}}},
		"unknown verb":     {g: g, ops: api.TxnOps{{KV: &api.KVTxnOp{Verb: "frobnicate", Key: b.data + "x"}}}},
		"zero token":       {g: store.Grant{Name: g.Name, Holder: g.Holder, Seq: g.Seq}, ops: api.TxnOps{put}},
		"zero seq":         {g: store.Grant{Name: g.Name, Holder: g.Holder, Token: g.Token}, ops: api.TxnOps{put}},
		"empty name":       {g: store.Grant{Holder: g.Holder, Token: g.Token, Seq: g.Seq}, ops: api.TxnOps{put}},
		"no holder":        {g: store.Grant{Name: g.Name, Token: g.Token, Seq: g.Seq}, ops: api.TxnOps{put}},
		"set in prefix":    {g: g, ops: api.TxnOps{put, set(b.key("lease"), "forged")}},
		"delete in prefix": {g: g, ops: api.TxnOps{{KV: &api.KVTxnOp{Verb: api.KVDelete, Key: b.key("counter")}}}},
		"delete over it":   {g: g, ops: api.TxnOps{{KV: &api.KVTxnOp{Verb: api.KVDeleteTree, Key: "tenuretest"}}}},
		"unlock in prefix": {g: g, ops: api.TxnOps{{KV: &api.KVTxnOp{Verb: api.KVUnlock, Key: b.key("lease")}}}},
	}
	for name, c := range cases {
		w := &rawWrite{g: c.g}
		_, err := b.store.StrictTxn(t.Context(), w, c.ops)
		require.ErrorIs(t, err, store.ErrInvalid, name)
		require.ErrorContains(t, err, "consulstore: strict txn", name)
		require.Equal(t, int64(-1), w.committed, "%s: a refused write aborts", name)
	}
	_, err := b.store.StrictTxn(t.Context(), nil, api.TxnOps{put})
	require.ErrorIs(t, err, store.ErrInvalid, "nil chain write")
	require.Empty(t, b.values(t), "bad input writes nothing")
	require.Equal(t, g.Seq, b.get(t).Seq, "bad input leaves the chain alone")

	_, err = b.store.StrictTxn(t.Context(), &rawWrite{g: g}, api.TxnOps{{KV: &api.KVTxnOp{Verb: api.KVGetTree, Key: prefix}}, put})
	require.NoError(t, err, "reads under the prefix are allowed")
}

// TestStrictTxnClosed: a closed store sends nothing and ends the write.
func TestStrictTxnClosed(t *testing.T) {
	t.Parallel()
	b := setupStrict(t)
	g := b.acquire(t, testutil.Holder(t, "a"), longTTL)
	require.NoError(t, b.store.Close())
	w := &rawWrite{g: g}
	require.ErrorIs(t, b.put(t.Context(), w, "x", "v"), store.ErrClosed)
	require.Equal(t, int64(-1), w.committed)
}

// loseTxnReplies is a transport that, while armed, carries out write
// transactions (PUT /v1/txn without ?consistent, which the store's reads
// carry) and then loses their replies, as a network does after the server
// committed.
type loseTxnReplies struct {
	next  http.RoundTripper
	armed atomic.Bool
	lost  atomic.Int64
}

func (l *loseTxnReplies) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := l.next.RoundTrip(req)
	if err != nil || req.Method != http.MethodPut || req.URL.Path != "/v1/txn" || req.URL.Query().Has("consistent") || !l.armed.Load() {
		return resp, err
	}
	_ = resp.Body.Close()
	l.lost.Add(1)
	return nil, errors.New("the reply was lost")
}

// TestStrictTxnUnknownOutcomeCostsTenure: a strict write that applied but
// whose reply was lost is unavailable, not committed; the holder's next
// renewal finds the chain moved and ends the tenure (the cheap side).
func TestStrictTxnUnknownOutcomeCostsTenure(t *testing.T) {
	t.Parallel()
	b := setupStrict(t)
	tr := &http.Transport{Proxy: nil}
	t.Cleanup(tr.CloseIdleConnections)
	lossy := &loseTxnReplies{next: tr}
	cli, err := api.NewClient(&api.Config{Address: consulserver.SharedConsul(t).HTTPAddr, Scheme: "http", HttpClient: &http.Client{Transport: lossy}})
	require.NoError(t, err)
	writer, err := consulstore.New(cli, b.store.Config())
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, writer.Close()) })

	const ttl = time.Second
	l, err := b.runClient(t, "a", ttl).Acquire(t.Context(), b.name)
	require.NoError(t, err)
	w, err := l.BeginChainWrite()
	require.NoError(t, err)
	lossy.armed.Store(true)
	_, err = writer.StrictTxn(t.Context(), w, api.TxnOps{set(b.data+"by", "a")})
	require.ErrorIs(t, err, store.ErrUnavailable)
	require.Equal(t, int64(1), lossy.lost.Load())
	require.Equal(t, map[string]string{"by": "a"}, b.values(t), "the write applied")
	select {
	case <-l.Done():
	case <-time.After(10 * ttl):
		t.Fatal("the tenure outlived a strict write of unknown outcome that applied")
	}
	var lost *tenure.LostError
	require.ErrorAs(t, l.Err(), &lost)
	require.Equal(t, tenure.LossSeqMismatch, lost.Reason, "the renewal found the chain moved")
}
