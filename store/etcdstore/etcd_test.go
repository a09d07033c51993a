package etcdstore_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/store"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-dev/tenure/internal/testserver/etcdserver"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store/etcdstore"
)

const (
	// longTTL is the lease length of tests that must not see an expiry.
	longTTL = time.Minute
	// eventTimeout bounds every wait for an event.
	eventTimeout = 15 * time.Second
)

// bundle is what one test works with.
type bundle struct {
	cli   *clientv3.Client
	store *etcdstore.Store
}

func setup(t *testing.T, srv *etcdserver.Etcd, cfg etcdstore.Config) *bundle {
	t.Helper()
	cli := srv.Client(t)
	return &bundle{cli: cli, store: etcdserver.EtcdStore(t, cli, cfg)}
}

func (b *bundle) acquire(t *testing.T, name string, h store.Holder, ttl time.Duration) store.Grant {
	t.Helper()
	g, err := b.store.Acquire(t.Context(), store.AcquireParams{Name: name, Holder: h, TTL: ttl})
	require.NoError(t, err, "acquire %q", name)
	return g
}

func (b *bundle) get(t *testing.T, name string) store.Record {
	t.Helper()
	r, err := b.store.Get(t.Context(), name)
	require.NoError(t, err, "get %q", name)
	return r
}

func renewParams(g store.Grant, ttl time.Duration) store.RenewParams {
	return store.RenewParams{Name: g.Name, Holder: g.Holder, Token: g.Token, Seq: g.Seq, TTL: ttl}
}

// waitExpiry waits until a lease with remaining time left by the store's
// clock has expired: passing the store's TTL is the event itself.
func waitExpiry(remaining time.Duration) {
	time.Sleep(remaining + etcdserver.EtcdExpiryLag + 50*time.Millisecond)
}

func TestNew(t *testing.T) {
	t.Parallel()
	cli := etcdserver.SharedEtcd(t).Client(t)

	_, err := etcdstore.New(nil, etcdstore.Config{})
	require.ErrorIs(t, err, store.ErrInvalid, "nil client")

	for _, ops := range []int{-1, 1, 3} {
		_, err := etcdstore.New(cli, etcdstore.Config{MaxTxnOps: ops})
		require.ErrorIs(t, err, store.ErrInvalid, "MaxTxnOps %d", ops)
		require.ErrorContains(t, err, fmt.Sprintf("MaxTxnOps (%d)", ops))
	}
	for _, ops := range []int{0, 4, 128, 10_000} {
		s, err := etcdstore.New(cli, etcdstore.Config{MaxTxnOps: ops})
		require.NoError(t, err, "MaxTxnOps %d", ops)
		require.NoError(t, s.Close())
	}
}

func TestDefaultKeyPrefix(t *testing.T) {
	t.Parallel()
	cli := etcdserver.SharedEtcd(t).Client(t)
	s, err := etcdstore.New(cli, etcdstore.Config{})
	require.NoError(t, err)
	name := testutil.UniqueName(t)
	t.Cleanup(func() {
		require.NoError(t, s.Close())
		ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), 5*time.Second)
		defer cancel()
		for _, dir := range []string{"held/", "claim/", "start/", "seq/", "released/", "announce/"} {
			_, err := cli.Delete(ctx, etcdstore.DefaultKeyPrefix+dir+name)
			require.NoError(t, err)
		}
	})

	g, err := s.Acquire(t.Context(), store.AcquireParams{Name: name, Holder: testutil.Holder(t, "holder"), TTL: longTTL})
	require.NoError(t, err)
	resp, err := cli.Get(t.Context(), etcdstore.DefaultKeyPrefix+"held/"+name)
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1, "the lease lives under the default prefix %q", etcdstore.DefaultKeyPrefix)
	require.Equal(t, int64(g.Token), resp.Kvs[0].CreateRevision, "the token is the held key's create revision")
	require.Equal(t, g.Seq, resp.Kvs[0].Version, "the seq is the held key's version")
}

func TestTTLLimits(t *testing.T) {
	t.Parallel()
	b := setup(t, etcdserver.SharedEtcd(t), etcdstore.Config{})
	h := testutil.Holder(t, "holder")

	t.Run("AcquireRefused", func(t *testing.T) {
		t.Parallel()
		name := testutil.UniqueName(t)
		for _, ttl := range []time.Duration{store.MinTTL, time.Second, etcdstore.MinTTL - time.Millisecond, etcdstore.MaxTTL + time.Second} {
			_, err := b.store.Acquire(t.Context(), store.AcquireParams{Name: name, Holder: h, TTL: ttl})
			require.ErrorIs(t, err, store.ErrInvalid, "TTL %s", ttl)
			require.ErrorContains(t, err, "etcd's m", "TTL %s: the error names etcd's limit", ttl)
		}
		_, err := b.store.Get(t.Context(), name)
		require.ErrorIs(t, err, store.ErrNotFound, "a refused acquisition creates nothing")
	})

	t.Run("RenewRefused", func(t *testing.T) {
		t.Parallel()
		g := b.acquire(t, testutil.UniqueName(t), h, longTTL)
		good := renewParams(g, longTTL)
		bad := renewParams(g, etcdstore.MinTTL-time.Millisecond)
		bad.Name += "_other"
		rs, err := b.store.Renew(t.Context(), []store.RenewParams{good, bad})
		require.ErrorIs(t, err, store.ErrInvalid)
		require.ErrorContains(t, err, "below etcd's minimum lease TTL of 2s")
		require.Empty(t, rs)
		require.Equal(t, int64(1), b.get(t, g.Name).Seq, "a refused batch renews nothing")
	})

	t.Run("RoundedUpToSeconds", func(t *testing.T) {
		t.Parallel()
		g := b.acquire(t, testutil.UniqueName(t), h, 2500*time.Millisecond)
		require.Equal(t, 3*time.Second, g.Remaining, "etcd leases last whole seconds")
		rs, err := b.store.Renew(t.Context(), []store.RenewParams{renewParams(g, etcdstore.MinTTL+time.Nanosecond)})
		require.NoError(t, err)
		require.True(t, rs[0].Renewed)
		require.Equal(t, 3*time.Second, rs[0].Grant.Remaining)
		r := b.get(t, g.Name)
		require.Positive(t, r.Remaining)
		require.LessOrEqual(t, r.Remaining, 3*time.Second)
	})
}

// TestRenewLeavesOthers checks that a renewal extends only the leases in its
// batch, even when others share the etcd lease they were renewed onto last
// time: a holder that stops renewing one lease loses it at its expiry while
// it keeps the rest.
func TestRenewLeavesOthers(t *testing.T) {
	t.Parallel()
	b := setup(t, etcdserver.SharedEtcd(t), etcdstore.Config{})
	h := testutil.Holder(t, "holder")
	prefix := testutil.UniqueName(t)
	kept := b.acquire(t, prefix+"_kept", h, longTTL)
	dropped := b.acquire(t, prefix+"_dropped", h, longTTL)

	rs, err := b.store.Renew(t.Context(), []store.RenewParams{renewParams(kept, etcdstore.MinTTL), renewParams(dropped, etcdstore.MinTTL)})
	require.NoError(t, err)
	require.True(t, rs[0].Renewed)
	require.True(t, rs[1].Renewed)
	resp, err := b.cli.Txn(t.Context()).Then(
		clientv3.OpGet(keyOf(t, b, kept.Name)), clientv3.OpGet(keyOf(t, b, dropped.Name)),
	).Commit()
	require.NoError(t, err)
	shared := resp.Responses[0].GetResponseRange().Kvs[0].Lease
	require.Equal(t, shared, resp.Responses[1].GetResponseRange().Kvs[0].Lease, "one renewal puts its leases on one etcd lease")

	rs, err = b.store.Renew(t.Context(), []store.RenewParams{renewParams(rs[0].Grant, longTTL)})
	require.NoError(t, err)
	require.True(t, rs[0].Renewed)

	waitExpiry(etcdstore.MinTTL)
	r := b.get(t, dropped.Name)
	require.Equal(t, store.StateExpired, r.State, "a lease left out of a renewal expires")
	require.Equal(t, int64(2), r.Seq, "an expired lease reports the seq of its last renewal")
	require.Equal(t, dropped.Token, r.Token)
	r = b.get(t, kept.Name)
	require.Equal(t, store.StateHeld, r.State)
	require.Equal(t, int64(3), r.Seq)
}

// keyOf returns the held/ key of name by finding it under the store's
// prefix, so that the test does not restate the layout.
func keyOf(t *testing.T, b *bundle, name string) string {
	t.Helper()
	resp, err := b.cli.Get(t.Context(), "tenure-test/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	require.NoError(t, err)
	for _, kv := range resp.Kvs {
		if k := string(kv.Key); strings.HasSuffix(k, "/held/"+name) {
			return k
		}
	}
	t.Fatalf("no held key for lease %q", name)
	return ""
}

// TestRenewManyTransactions renews a batch larger than one transaction
// holds, with two TTLs and entries that do not match.
func TestRenewManyTransactions(t *testing.T) {
	t.Parallel()
	b := setup(t, etcdserver.SharedEtcd(t), etcdstore.Config{MaxTxnOps: 5}) // two leases per transaction
	h := testutil.Holder(t, "holder")
	prefix := testutil.UniqueName(t)
	var ps []store.RenewParams
	var want []bool
	for i := range 9 {
		g := b.acquire(t, fmt.Sprintf("%s_%d", prefix, i), h, longTTL)
		p := renewParams(g, longTTL+time.Duration(i%2)*longTTL)
		if i%4 == 3 {
			p.Seq++ // a seq the store never saw
		}
		ps = append(ps, p)
		want = append(want, i%4 != 3)
	}
	rs, err := b.store.Renew(t.Context(), ps)
	require.NoError(t, err)
	require.Len(t, rs, len(ps))
	for i, res := range rs {
		require.Equal(t, ps[i].Name, res.Grant.Name, "results come back in the order of the batch")
		require.Equal(t, want[i], res.Renewed, "lease %q", ps[i].Name)
		require.Equal(t, h, res.Grant.Holder)
		require.Equal(t, ps[i].Token, res.Grant.Token)
		if want[i] {
			require.Equal(t, int64(2), res.Grant.Seq)
			require.Equal(t, ps[i].TTL, res.Grant.Remaining)
		} else {
			require.Equal(t, int64(1), res.Grant.Seq)
			require.Positive(t, res.Grant.Remaining)
		}
	}
}

// TestMaxTxnOpsAboveServer checks that a batch the server refuses as too
// large is an error that says which setting to change, not a store outage.
func TestMaxTxnOpsAboveServer(t *testing.T) {
	t.Parallel()
	b := setup(t, etcdserver.SharedEtcd(t), etcdstore.Config{MaxTxnOps: 1000}) // the server allows 128
	h := testutil.Holder(t, "holder")
	prefix := testutil.UniqueName(t)
	ps := make([]store.RenewParams, 130)
	for i := range ps {
		ps[i] = renewParams(b.acquire(t, fmt.Sprintf("%s_%03d", prefix, i), h, longTTL), longTTL)
	}
	rs, err := b.store.Renew(t.Context(), ps)
	require.Error(t, err)
	require.NotErrorIs(t, err, store.ErrUnavailable)
	require.ErrorContains(t, err, "Config.MaxTxnOps")
	require.Empty(t, rs)
	require.Equal(t, int64(1), b.get(t, ps[0].Name).Seq, "the refused transaction renewed nothing")
}

// TestTokenGrowsAcrossDeletesAndCompaction checks promise P2 where a
// counter kept in a key would fail: the tokens are revisions, which grow
// with every write to the cluster, even when every key of the lease was
// deleted and the history compacted.
func TestTokenGrowsAcrossDeletesAndCompaction(t *testing.T) {
	t.Parallel()
	srv := etcdserver.OwnEtcd(t) // compaction would disturb the watches of other tests
	prefix := "tenure-test/" + testutil.UniqueName(t) + "/"
	b := setup(t, srv, etcdstore.Config{KeyPrefix: prefix})
	name := testutil.UniqueName(t)
	h := testutil.Holder(t, "holder")

	first := b.acquire(t, name, h, longTTL)
	require.NoError(t, b.store.Release(t.Context(), store.ReleaseParams{Name: name, Holder: h, Token: first.Token}))

	_, err := b.cli.Delete(t.Context(), prefix, clientv3.WithPrefix())
	require.NoError(t, err, "an operator wipes every key of the store")
	_, err = b.store.Get(t.Context(), name)
	require.ErrorIs(t, err, store.ErrNotFound)
	second := b.acquire(t, name, h, longTTL)
	require.Greater(t, second.Token, first.Token, "a token after the keys were deleted")

	resp, err := b.cli.Get(t.Context(), name)
	require.NoError(t, err)
	_, err = b.cli.Compact(t.Context(), resp.Header.Revision, clientv3.WithCompactPhysical())
	require.NoError(t, err)
	require.NoError(t, b.store.Release(t.Context(), store.ReleaseParams{Name: name, Holder: h, Token: second.Token}))
	third := b.acquire(t, name, testutil.Holder(t, "other"), longTTL)
	require.Greater(t, third.Token, second.Token, "a token after the history was compacted")
	require.Equal(t, third.Token, b.get(t, name).Token)
}

// TestIsOwner checks the fence etcd users put in their own transactions.
func TestIsOwner(t *testing.T) {
	t.Parallel()
	b := setup(t, etcdserver.SharedEtcd(t), etcdstore.Config{})
	// write makes a write to key fenced by the tenure name/token and
	// reports whether it was accepted.
	write := func(t *testing.T, key, name string, token store.Token) bool {
		t.Helper()
		resp, err := b.cli.Txn(t.Context()).
			If(b.store.IsOwner(name, token)).
			Then(clientv3.OpPut(key, token.String())).
			Commit()
		require.NoError(t, err)
		return resp.Succeeded
	}
	// resource returns a key of the test's own to write to.
	resource := func(t *testing.T) string {
		key := "tenure-test/" + testutil.UniqueName(t) + "/data"
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), 5*time.Second)
			defer cancel()
			_, err := b.cli.Delete(ctx, key)
			require.NoError(t, err)
		})
		return key
	}

	t.Run("StaleHolder", func(t *testing.T) {
		t.Parallel()
		key, name := resource(t), testutil.UniqueName(t)
		old := b.acquire(t, name, testutil.Holder(t, "old"), longTTL)
		require.True(t, write(t, key, name, old.Token), "the current tenure writes")
		require.False(t, write(t, key, name, old.Token+1), "a token that was never handed out")
		require.False(t, write(t, key, name, old.Token-1), "an older token")

		require.NoError(t, b.store.Release(t.Context(), store.ReleaseParams{Name: name, Holder: old.Holder, Token: old.Token}))
		require.False(t, write(t, key, name, old.Token), "a released tenure")
		current := b.acquire(t, name, testutil.Holder(t, "current"), longTTL)
		require.False(t, write(t, key, name, old.Token), "the stale holder after a takeover")
		require.True(t, write(t, key, name, current.Token))

		resp, err := b.cli.Get(t.Context(), key)
		require.NoError(t, err)
		require.Equal(t, current.Token.String(), string(resp.Kvs[0].Value), "the last accepted write is the current tenure's")
	})

	t.Run("NotTrusted", func(t *testing.T) {
		t.Parallel()
		key, name := resource(t), testutil.UniqueName(t)
		require.False(t, write(t, key, name, 0), "token 0 on a lease that never existed")
		require.False(t, write(t, key, name, -1))
		g := b.acquire(t, name, testutil.Holder(t, "holder"), longTTL)
		require.False(t, write(t, key, name, 0), "token 0 while the lease is held")
		require.True(t, write(t, key, name, g.Token))
	})

	t.Run("Expired", func(t *testing.T) {
		t.Parallel()
		key, name := resource(t), testutil.UniqueName(t)
		g := b.acquire(t, name, testutil.Holder(t, "holder"), etcdstore.MinTTL)
		require.True(t, write(t, key, name, g.Token))
		waitExpiry(g.Remaining)
		require.False(t, write(t, key, name, g.Token), "an expired tenure, before anyone took over")
	})
}

func TestListen(t *testing.T) {
	t.Parallel()
	b := setup(t, etcdserver.SharedEtcd(t), etcdstore.Config{})

	t.Run("NilNotify", func(t *testing.T) {
		t.Parallel()
		err := b.store.Listen(t.Context(), nil)
		require.ErrorIs(t, err, store.ErrInvalid)
	})

	t.Run("ExpiryAnnounced", func(t *testing.T) {
		t.Parallel()
		rec := listen(t, b)
		// One lease is left to expire; the other is renewed and released
		// meanwhile. The deletions of both reach the listener in revision
		// order, so by the time it hears of the expiry it has seen the
		// release's deletion too.
		g := b.acquire(t, testutil.UniqueName(t), testutil.Holder(t, "crashed"), etcdstore.MinTTL)
		other := b.acquire(t, testutil.UniqueName(t)+"_other", testutil.Holder(t, "holder"), longTTL)
		rs, err := b.store.Renew(t.Context(), []store.RenewParams{renewParams(other, longTTL)})
		require.NoError(t, err)
		require.True(t, rs[0].Renewed)
		require.NoError(t, b.store.Release(t.Context(), store.ReleaseParams{Name: other.Name, Holder: other.Holder, Token: other.Token}))

		require.True(t, rec.WaitFor(func(n store.Notice) bool { return n.Name == g.Name && n.Kind == store.NoticeChanged }, eventTimeout),
			"no notification of the expiry of lease %q within %s", g.Name, eventTimeout)
		require.Equal(t, store.StateExpired, b.get(t, g.Name).State, "the notification came when etcd deleted the expired lease")
		acquired := store.Notice{Name: g.Name, Kind: store.NoticeAcquired, Holder: g.Holder, Remaining: etcdstore.MinTTL}
		require.Equal(t, []store.Notice{acquired, {Name: g.Name, Kind: store.NoticeChanged}}, rec.Of(g.Name),
			"etcd expiring a lease is announced once, naming nobody")
		require.True(t, rec.WaitFor(func(n store.Notice) bool { return n.Name == other.Name && n.Kind == store.NoticeReleased }, eventTimeout),
			"no release notice within %s", eventTimeout)
		require.Equal(t, []store.Notice{
			{Name: other.Name, Kind: store.NoticeAcquired, Holder: other.Holder, Remaining: longTTL},
			{Name: other.Name, Kind: store.NoticeReleased},
		}, rec.Of(other.Name), "the renewal is not announced, and the release is not taken for an expiry")

		next := testutil.Holder(t, "next")
		b.acquire(t, g.Name, next, longTTL)
		require.True(t, rec.WaitFor(func(n store.Notice) bool { return n.Name == g.Name && n.Holder == next }, eventTimeout),
			"no notice of the takeover within %s", eventTimeout)
		require.Equal(t, []store.Notice{
			acquired,
			{Name: g.Name, Kind: store.NoticeChanged},
			{Name: g.Name, Kind: store.NoticeAcquired, Holder: next, Remaining: longTTL},
		}, rec.Of(g.Name), "the takeover is announced after the expiry")
	})

	t.Run("RenewalsAndLineUnannounced", func(t *testing.T) {
		t.Parallel()
		rec := listen(t, b)
		g := b.acquire(t, testutil.UniqueName(t), testutil.Holder(t, "holder"), longTTL)
		rs, err := b.store.Renew(t.Context(), []store.RenewParams{renewParams(g, longTTL)})
		require.NoError(t, err)
		require.True(t, rs[0].Renewed)
		next := testutil.Holder(t, "next")
		_, err = b.store.Acquire(t.Context(), store.AcquireParams{Name: g.Name, Holder: next, TTL: longTTL, Wait: true})
		require.ErrorIs(t, err, store.ErrHeld)
		require.NoError(t, b.store.Release(t.Context(), store.ReleaseParams{Name: g.Name, Holder: g.Holder, Token: g.Token}))
		require.True(t, rec.WaitFor(func(n store.Notice) bool { return n.Name == g.Name && n.Kind == store.NoticeReleased }, eventTimeout),
			"no release notice within %s", eventTimeout)
		require.Equal(t, []store.Notice{
			{Name: g.Name, Kind: store.NoticeAcquired, Holder: g.Holder, Remaining: longTTL},
			{Name: g.Name, Kind: store.NoticeReleased, Next: next},
		}, rec.Of(g.Name), "only the acquisition and the release are announced, in order")
	})

	t.Run("ContextDone", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- b.store.Listen(ctx, func(store.Notice) {}) }()
		cancel()
		select {
		case err := <-done:
			require.ErrorIs(t, err, context.Canceled)
		case <-time.After(eventTimeout):
			t.Fatalf("Listen did not return within %s of its context ending", eventTimeout)
		}
	})
}

// listen starts a listener on b's store and returns once it hears; it stops
// the listener when the test ends.
func listen(t *testing.T, b *bundle) *testutil.Notifications {
	t.Helper()
	r := testutil.NewNotifications()
	testutil.RunListener(t, t.Context(), b.store.Listen, r.Notify, eventTimeout)
	// A listener cannot say when its watch is in place: release a lease of
	// its own until it hears of it.
	warmup := testutil.UniqueName(t) + "_warmup"
	h := testutil.Holder(t, "warmup")
	deadline := time.Now().Add(eventTimeout)
	for time.Now().Before(deadline) {
		g := b.acquire(t, warmup, h, longTTL)
		require.NoError(t, b.store.Release(t.Context(), store.ReleaseParams{Name: warmup, Holder: h, Token: g.Token}))
		if r.Wait(warmup, 50*time.Millisecond) {
			return r
		}
	}
	t.Fatalf("the listener heard no release within %s", eventTimeout)
	return nil
}
