package consulstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/store"

	"github.com/hashicorp/consul/api"
	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/testserver/consulserver"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store/consulstore"
	"github.com/tenure-dev/tenure/store/storetest"
)

const (
	// longTTL is the lease length of tests that must not see an expiry.
	longTTL = time.Minute
	// eventTimeout bounds every wait for a notification.
	eventTimeout = 10 * time.Second
)

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, consulserver.ConsulHarness{Agent: consulserver.SharedConsul(t)})
}

func BenchmarkConformance(b *testing.B) {
	storetest.Benchmark(b, consulserver.ConsulHarness{Agent: consulserver.SharedConsul(b)})
}

// bundle is a store on the shared agent, its client, and a lease name
// unique to the test.
type bundle struct {
	store  *consulstore.Store
	client *api.Client
	name   string
}

func setup(t *testing.T, cfg consulstore.Config) *bundle {
	t.Helper()
	s, client := consulserver.ConsulHarness{Agent: consulserver.SharedConsul(t), Config: cfg}.New(t)
	return &bundle{store: s, client: client, name: testutil.UniqueName(t)}
}

// key returns the KV key of the lease record (or counter, with suffix
// "counter") of b.name, which needs no escaping.
func (b *bundle) key(suffix string) string {
	return b.store.Config().KeyPrefix + b.name + "/" + suffix
}

func (b *bundle) acquire(t *testing.T, h store.Holder, ttl time.Duration) store.Grant {
	t.Helper()
	g, err := b.store.Acquire(t.Context(), store.AcquireParams{Name: b.name, Holder: h, TTL: ttl})
	require.NoError(t, err)
	return g
}

// session returns the session that holds key's lock ("" when none).
func (b *bundle) session(t *testing.T, key string) string {
	t.Helper()
	pair, _, err := b.client.KV().Get(key, (&api.QueryOptions{RequireConsistent: true}).WithContext(t.Context()))
	require.NoError(t, err)
	require.NotNil(t, pair, "key %q", key)
	return pair.Session
}

// awaitKey waits, with blocking queries, until key satisfies ok (p is nil
// while the key does not exist).
func (b *bundle) awaitKey(t *testing.T, key string, ok func(p *api.KVPair) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), eventTimeout)
	defer cancel()
	var index uint64
	for {
		p, meta, err := b.client.KV().Get(key, (&api.QueryOptions{WaitIndex: index, WaitTime: eventTimeout}).WithContext(ctx))
		require.NoError(t, err, "waiting for key %q", key)
		if ok(p) {
			return
		}
		index = meta.LastIndex
	}
}

// awaitSessionGone waits, with blocking queries, until session id no
// longer exists.
func (b *bundle) awaitSessionGone(t *testing.T, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), eventTimeout)
	defer cancel()
	var index uint64
	for {
		info, meta, err := b.client.Session().Info(id, (&api.QueryOptions{WaitIndex: index, WaitTime: eventTimeout}).WithContext(ctx))
		require.NoError(t, err, "session %s was not destroyed within %s", id, eventTimeout)
		if info == nil {
			return
		}
		index = meta.LastIndex
	}
}

// requireSession checks that session id exists now.
func (b *bundle) requireSession(t *testing.T, id string) {
	t.Helper()
	info, _, err := b.client.Session().Info(id, (&api.QueryOptions{RequireConsistent: true}).WithContext(t.Context()))
	require.NoError(t, err)
	require.NotNil(t, info, "session %s is gone", id)
}

func TestShortTTLRoundedUpToMinSessionTTL(t *testing.T) {
	t.Parallel()
	b := setup(t, consulstore.Config{MinSessionTTL: consulstore.DefaultMinSessionTTL})
	g := b.acquire(t, testutil.Holder(t, "holder"), store.MinTTL)
	require.Equal(t, consulstore.DefaultMinSessionTTL, g.Remaining, "a 500ms lease is held by a 10s session and reported as such")

	info, _, err := b.client.Session().Info(b.session(t, b.key("lease")), nil)
	require.NoError(t, err)
	require.NotNil(t, info)
	require.Equal(t, "10s", info.TTL)
	require.Equal(t, time.Duration(0), info.LockDelay, "lock-delay is set explicitly, not left to Consul's 15s default")
	require.Equal(t, api.SessionBehaviorRelease, info.Behavior)
	require.Empty(t, info.NodeChecks, "only the TTL ends the session, not the node's health")

	r, err := b.store.Get(t.Context(), b.name)
	require.NoError(t, err)
	require.Equal(t, consulstore.DefaultMinSessionTTL, r.Remaining)

	res, err := b.store.Renew(t.Context(), []store.RenewParams{{Name: g.Name, Holder: g.Holder, Token: g.Token, Seq: g.Seq, TTL: store.MinTTL}})
	require.NoError(t, err)
	require.True(t, res[0].Renewed)
	require.Equal(t, consulstore.DefaultMinSessionTTL, res[0].Grant.Remaining)
}

func TestTTLAboveConsulMaximumRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, consulstore.Config{})
	holder := testutil.Holder(t, "holder")
	tooLong := consulstore.MaxSessionTTL + time.Second

	_, err := b.store.Acquire(t.Context(), store.AcquireParams{Name: b.name, Holder: holder, TTL: tooLong})
	require.ErrorIs(t, err, store.ErrInvalid)
	_, err = b.store.Get(t.Context(), b.name)
	require.ErrorIs(t, err, store.ErrNotFound, "a refused acquisition creates nothing")

	g := b.acquire(t, holder, longTTL)
	_, err = b.store.Renew(t.Context(), []store.RenewParams{{Name: g.Name, Holder: g.Holder, Token: g.Token, Seq: g.Seq, TTL: tooLong}})
	require.ErrorIs(t, err, store.ErrInvalid)
	r, err := b.store.Get(t.Context(), b.name)
	require.NoError(t, err)
	require.Equal(t, int64(1), r.Seq, "a refused renewal changes nothing")
}

// A MinSessionTTL below the servers' session_ttl_min lets a too-short
// session reach Consul, which refuses it: the error must say what to do.
func TestServerRefusesShortSession(t *testing.T) {
	t.Parallel()
	b := setup(t, consulstore.Config{MinSessionTTL: 100 * time.Millisecond})
	_, err := b.store.Acquire(t.Context(), store.AcquireParams{Name: b.name, Holder: testutil.Holder(t, "holder"), TTL: 200 * time.Millisecond})
	require.ErrorIs(t, err, store.ErrInvalid)
	require.ErrorContains(t, err, "MinSessionTTL")
	_, err = b.store.Get(t.Context(), b.name)
	require.ErrorIs(t, err, store.ErrNotFound)
}

func TestLockDelay(t *testing.T) {
	t.Parallel()
	const delay = 5 * time.Second

	t.Run("AfterExpiry", func(t *testing.T) {
		t.Parallel()
		b := setup(t, consulstore.Config{LockDelay: delay})
		first := b.acquire(t, testutil.Holder(t, "first"), store.MinTTL)

		// The lock-delay starts when Consul invalidates the session,
		// which unlocks the record.
		b.awaitKey(t, b.key("lease"), func(p *api.KVPair) bool { return p != nil && p.Session == "" })
		rec, err := b.store.Get(t.Context(), b.name)
		require.NoError(t, err)
		require.Equal(t, store.StateExpired, rec.State)

		second := testutil.Holder(t, "second")
		_, err = b.store.Acquire(t.Context(), store.AcquireParams{Name: b.name, Holder: second, TTL: longTTL})
		var held *store.HeldError
		require.ErrorAs(t, err, &held, "Consul refuses the lock during its lock-delay")
		require.Equal(t, first.Holder, held.Holder, "the lease is reported held by its last holder")
		require.Equal(t, first.Token, held.Token)
		require.Equal(t, delay, held.Remaining)

		// Waiting for the store's lock-delay to pass is the event itself.
		time.Sleep(delay)
		next := b.acquire(t, second, longTTL)
		require.Greater(t, next.Token, first.Token)
	})

	t.Run("NotAfterRelease", func(t *testing.T) {
		t.Parallel()
		b := setup(t, consulstore.Config{LockDelay: delay})
		first := b.acquire(t, testutil.Holder(t, "first"), longTTL)
		require.NoError(t, b.store.Release(t.Context(), store.ReleaseParams{Name: b.name, Holder: first.Holder, Token: first.Token}))

		next := b.acquire(t, testutil.Holder(t, "second"), longTTL)
		require.Greater(t, next.Token, first.Token, "a clean release sets off no lock-delay")
	})
}

// The token is the counter key's ModifyIndex, a Raft index: it keeps
// growing when the lease record, or the counter too, is deleted.
func TestTokenSurvivesKeyDeletion(t *testing.T) {
	t.Parallel()
	b := setup(t, consulstore.Config{})
	holder := testutil.Holder(t, "holder")
	ctx := t.Context()
	release := func(g store.Grant) {
		require.NoError(t, b.store.Release(ctx, store.ReleaseParams{Name: g.Name, Holder: g.Holder, Token: g.Token}))
	}

	first := b.acquire(t, holder, longTTL)
	release(first)
	_, err := b.client.KV().Delete(b.key("lease"), nil)
	require.NoError(t, err)
	_, err = b.store.Get(ctx, b.name)
	require.ErrorIs(t, err, store.ErrNotFound)

	second := b.acquire(t, holder, longTTL)
	require.Greater(t, second.Token, first.Token, "the counter outlives the lease record")
	release(second)

	_, err = b.client.KV().DeleteTree(b.store.Config().KeyPrefix+b.name+"/", nil)
	require.NoError(t, err)
	third := b.acquire(t, holder, longTTL)
	require.Greater(t, third.Token, second.Token, "a Raft index only grows, even with the counter gone")

	// Deleting the record of a held lease ends the tenure: its renewal
	// finds nothing, and anyone may acquire.
	_, err = b.client.KV().Delete(b.key("lease"), nil)
	require.NoError(t, err)
	res, err := b.store.Renew(ctx, []store.RenewParams{{Name: b.name, Holder: holder, Token: third.Token, Seq: third.Seq, TTL: longTTL}})
	require.NoError(t, err)
	require.False(t, res[0].Renewed)
	require.Zero(t, res[0].Grant.Holder)
	other := b.acquire(t, testutil.Holder(t, "other"), longTTL)
	require.Greater(t, other.Token, third.Token)
}

// A renewal moves the leases it renews to a new session and leaves the
// others in theirs, so a lease left out of a batch expires on time even
// when its holder keeps renewing other leases.
func TestRenewMovesOnlyTheBatch(t *testing.T) {
	t.Parallel()
	b := setup(t, consulstore.Config{})
	holder := testutil.Holder(t, "holder")
	ctx := t.Context()
	grant := func(name string) store.Grant {
		g, err := b.store.Acquire(ctx, store.AcquireParams{Name: name, Holder: holder, TTL: longTTL})
		require.NoError(t, err)
		return g
	}
	a, c := grant(b.name+"_a"), grant(b.name+"_c")
	renew := func(gs ...store.Grant) {
		ps := make([]store.RenewParams, len(gs))
		for i, g := range gs {
			ps[i] = store.RenewParams{Name: g.Name, Holder: g.Holder, Token: g.Token, Seq: g.Seq, TTL: longTTL}
		}
		rs, err := b.store.Renew(ctx, ps)
		require.NoError(t, err)
		for _, r := range rs {
			require.True(t, r.Renewed, "lease %q", r.Grant.Name)
		}
	}
	leaseKey := func(name string) string { return b.store.Config().KeyPrefix + name + "/lease" }

	renew(a, c)
	shared := b.session(t, leaseKey(a.Name))
	require.Equal(t, shared, b.session(t, leaseKey(c.Name)), "one batch, one session")

	renew(store.Grant{Name: a.Name, Holder: holder, Token: a.Token, Seq: 2})
	require.NotEqual(t, shared, b.session(t, leaseKey(a.Name)), "the renewed lease moved")
	require.Equal(t, shared, b.session(t, leaseKey(c.Name)), "the other stayed")

	// The old session ending (its TTL running out, here an operator)
	// expires only the lease left behind.
	_, err := b.client.Session().Destroy(shared, nil)
	require.NoError(t, err)
	rc, err := b.store.Get(ctx, c.Name)
	require.NoError(t, err)
	require.Equal(t, store.StateExpired, rc.State)
	ra, err := b.store.Get(ctx, a.Name)
	require.NoError(t, err)
	require.Equal(t, store.StateHeld, ra.State)
	require.Equal(t, int64(3), ra.Seq)
}

func TestFence(t *testing.T) {
	t.Parallel()
	b := setup(t, consulstore.Config{})
	ctx := t.Context()
	resource := b.store.Config().KeyPrefix + "app/state"
	write := func(name string, token store.Token, v string) (bool, *api.TxnResponse) {
		t.Helper()
		fence, err := b.store.FenceOps(name, token)
		require.NoError(t, err)
		ops := append(api.TxnOps(fence), &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVSet, Key: resource, Value: []byte(v)}})
		ok, resp, _, err := b.client.Txn().Txn(ops, nil)
		require.NoError(t, err)
		return ok, resp
	}
	stored := func() string {
		t.Helper()
		pair, _, err := b.client.KV().Get(resource, nil)
		require.NoError(t, err)
		require.NotNil(t, pair)
		return string(pair.Value)
	}

	first := b.acquire(t, testutil.Holder(t, "first"), longTTL)
	ok, _ := write(b.name, first.Token, "one")
	require.True(t, ok, "the holder's write passes the fence")

	res, err := b.store.Renew(ctx, []store.RenewParams{{Name: b.name, Holder: first.Holder, Token: first.Token, Seq: 1, TTL: longTTL}})
	require.NoError(t, err)
	require.True(t, res[0].Renewed)
	ok, _ = write(b.name, first.Token, "two")
	require.True(t, ok, "a renewal does not move the fence")

	require.NoError(t, b.store.Release(ctx, store.ReleaseParams{Name: b.name, Holder: first.Holder, Token: first.Token}))
	second := b.acquire(t, testutil.Holder(t, "second"), longTTL)
	ok, resp := write(b.name, first.Token, "stale")
	require.False(t, ok, "a write with the superseded token is refused")
	err = b.store.FenceError(ctx, b.name, first.Token, resp)
	require.ErrorIs(t, err, store.ErrFenced)
	var fenced *store.FencedError
	require.ErrorAs(t, err, &fenced)
	require.Equal(t, first.Token, fenced.Offered)
	require.Equal(t, second.Token, fenced.Recorded)
	require.Equal(t, "two", stored(), "the stale write changed nothing")

	ok, _ = write(b.name, second.Token, "three")
	require.True(t, ok)
	require.Equal(t, "three", stored())

	// A transaction that failed on the caller's own operation is not
	// fenced.
	fence, err := b.store.FenceOps(b.name, second.Token)
	require.NoError(t, err)
	ops := append(api.TxnOps(fence), &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVCAS, Key: resource, Index: 1, Value: []byte("x")}})
	ok, resp, _, err = b.client.Txn().Txn(ops, nil)
	require.NoError(t, err)
	require.False(t, ok)
	require.NoError(t, b.store.FenceError(ctx, b.name, second.Token, resp))

	_, err = b.store.FenceOps(b.name, 0)
	require.ErrorIs(t, err, store.ErrInvalid)
	_, err = b.store.FenceOps("", second.Token)
	require.ErrorIs(t, err, store.ErrInvalid)
}

func TestNewRefusesBadInput(t *testing.T) {
	t.Parallel()
	_, err := consulstore.New(nil, consulstore.Config{})
	require.ErrorIs(t, err, store.ErrInvalid)
	client, err := api.NewClient(&api.Config{Address: "127.0.0.1:1"})
	require.NoError(t, err)
	_, err = consulstore.New(client, consulstore.Config{KeyPrefix: "/tenure/"})
	require.ErrorIs(t, err, store.ErrInvalid)
	_, err = consulstore.New(client, consulstore.Config{LockDelay: time.Hour})
	require.ErrorIs(t, err, store.ErrInvalid)
	s, err := consulstore.New(client, consulstore.Config{})
	require.NoError(t, err)
	require.Equal(t, consulstore.Config{KeyPrefix: consulstore.DefaultKeyPrefix, MinSessionTTL: consulstore.DefaultMinSessionTTL}, s.Config())
}

// recorder collects the names a listener reports.
type recorder struct{ names chan string }

// listen starts Listen on s for the rest of the test and returns once the
// listener is known to receive notifications.
func listen(t *testing.T, s *consulstore.Store) *recorder {
	t.Helper()
	r := &recorder{names: make(chan string, 1024)}
	testutil.RunListener(t, t.Context(), s.Listen, func(n store.Notice) {
		select {
		case r.names <- n.Name:
		default:
		}
	}, eventTimeout)
	// A listener cannot say when it has subscribed: release a lease of its
	// own until it reports one.
	warmup := testutil.UniqueName(t) + "_warmup"
	holder := testutil.Holder(t, "warmup")
	deadline := time.Now().Add(eventTimeout)
	for time.Now().Before(deadline) {
		g, err := s.Acquire(t.Context(), store.AcquireParams{Name: warmup, Holder: holder, TTL: longTTL})
		require.NoError(t, err)
		require.NoError(t, s.Release(t.Context(), store.ReleaseParams{Name: warmup, Holder: holder, Token: g.Token}))
		if r.wait(warmup, 100*time.Millisecond) {
			return r
		}
	}
	t.Fatalf("the listener reported no release within %s", eventTimeout)
	return nil
}

// wait waits up to d for name and reports whether it came.
func (r *recorder) wait(name string, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case got := <-r.names:
			if got == name {
				return true
			}
		case <-timer.C:
			return false
		}
	}
}

func (r *recorder) await(t *testing.T, name string) {
	t.Helper()
	require.True(t, r.wait(name, eventTimeout), "no notification for lease %q within %s", name, eventTimeout)
}
