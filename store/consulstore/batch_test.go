package consulstore_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/store"

	"github.com/hashicorp/consul/api"
	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/testserver/consulserver"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store/consulstore"
)

// leaseKey is the KV key of the record of lease name, which needs no
// escaping.
func (b *bundle) leaseKey(name string) string { return b.store.Config().KeyPrefix + name + "/lease" }

// state returns the state of lease name.
func (b *bundle) state(t *testing.T, name string) store.State {
	t.Helper()
	r, err := b.store.Get(t.Context(), name)
	require.NoError(t, err)
	return r.State
}

// reaped returns once s has destroyed every session it found empty so
// far: it empties a session of its own and waits for that one, which the
// store destroys after those queued before it.
func (b *bundle) reaped(t *testing.T, s *consulstore.Store) {
	t.Helper()
	name := testutil.UniqueName(t) + "_barrier"
	holder := testutil.Holder(t, "barrier")
	g, err := s.Acquire(t.Context(), store.AcquireParams{Name: name, Holder: holder, TTL: longTTL})
	require.NoError(t, err)
	id := b.session(t, b.leaseKey(name))
	require.NoError(t, s.Release(t.Context(), store.ReleaseParams{Name: name, Holder: holder, Token: g.Token}))
	b.awaitSessionGone(t, id)
}

// notices starts a listener on b's store for the rest of the test and
// returns what it hears, once it has subscribed.
func (b *bundle) notices(t *testing.T) *testutil.Notifications {
	t.Helper()
	r := testutil.NewNotifications()
	testutil.RunListener(t, t.Context(), b.store.Listen, r.Notify, eventTimeout)
	require.True(t, r.Wait("", eventTimeout), "Listen announces its subscription")
	return r
}

// acquireAll acquires names for holder with one AcquireBatch through s and
// requires every one granted.
func acquireAll(t *testing.T, s *consulstore.Store, holder store.Holder, ttl time.Duration, names ...string) []store.Grant {
	t.Helper()
	ps := make([]store.AcquireParams, len(names))
	for i, name := range names {
		ps[i] = store.AcquireParams{Name: name, Holder: holder, TTL: ttl}
	}
	res, err := s.AcquireBatch(t.Context(), ps)
	require.NoError(t, err)
	grants := make([]store.Grant, len(res))
	for i, r := range res {
		require.NoError(t, r.Err, "lease %q", names[i])
		grants[i] = r.Grant
	}
	return grants
}

// A batch of more leases than one transaction takes is written in
// several, one after the other, with one read before them and one session
// for all; a held lease in it is refused and its acquirer put in line, and
// once the lease is released the head of the line gets it.
func TestAcquireBatchAcrossTransactions(t *testing.T) {
	t.Parallel()
	b := setup(t, consulstore.Config{})
	s, counted := countedStore(t, b.store.Config().KeyPrefix)
	r := b.notices(t)
	me, other := testutil.Holder(t, "me"), testutil.Holder(t, "other")
	held := b.acquire(t, other, longTTL)

	// 40 free leases take two transactions of at most 31 acquisitions.
	const free, perTxn, wait = 40, 31, 20
	ps := make([]store.AcquireParams, 0, free+1)
	for i := range free {
		if i == wait {
			ps = append(ps, store.AcquireParams{Name: b.name, Holder: me, TTL: longTTL, Wait: true})
		}
		ps = append(ps, store.AcquireParams{Name: fmt.Sprintf("%s_%02d", b.name, i), Holder: me, TTL: longTTL, Payload: fmt.Sprint(i)})
	}
	counted.take()
	res, err := s.AcquireBatch(t.Context(), ps)
	require.NoError(t, err)
	require.Len(t, res, len(ps))
	require.Equal(t, map[string]int{"PUT /v1/txn": 4, "PUT /v1/session/create": 2}, onCallersPath(counted.take()),
		"one read, two write transactions and one session for the batch; a session and a transaction for the place in line")

	var he *store.HeldError
	require.ErrorAs(t, res[wait].Err, &he, "the held lease is refused")
	require.Equal(t, other, he.Holder)
	require.Equal(t, held.Token, he.Token)
	require.Equal(t, 1, he.Position, "the refused entry waits in line")

	grants := append(res[:wait:wait], res[wait+1:]...)
	session := b.session(t, b.leaseKey(grants[0].Grant.Name))
	for i, g := range grants {
		require.NoError(t, g.Err, "lease %d", i)
		require.Equal(t, me, g.Grant.Holder)
		require.Equal(t, int64(1), g.Grant.Seq)
		require.Equal(t, longTTL, g.Grant.Remaining)
		require.Equal(t, fmt.Sprint(i), g.Grant.Payload)
		// The leases of one transaction share its index as their token.
		require.Equal(t, grants[i/perTxn*perTxn].Grant.Token, g.Grant.Token, "lease %d", i)
		require.Equal(t, session, b.session(t, b.leaseKey(g.Grant.Name)), "lease %d is in the batch's session", i)
		rec, err := b.store.Get(t.Context(), g.Grant.Name)
		require.NoError(t, err)
		require.Equal(t, g.Grant.Token, rec.Token)
		require.Equal(t, store.StateHeld, rec.State)
	}
	require.Greater(t, grants[perTxn].Grant.Token, grants[0].Grant.Token, "the second transaction came after the first")
	last := grants[free-1].Grant.Name
	require.True(t, r.WaitFor(func(n store.Notice) bool {
		return n.Name == last && n.Kind == store.NoticeAcquired && n.Holder == me && n.Remaining == longTTL
	}, eventTimeout), "the batch's last acquisition is announced; got %+v", r.Of(last))

	line := b.store.Config().KeyPrefix + b.name + "/wait/"
	pairs, _, err := b.client.KV().List(line, nil)
	require.NoError(t, err)
	require.Len(t, pairs, 1)
	waited := pairs[0].Session

	require.NoError(t, b.store.Release(t.Context(), store.ReleaseParams{Name: b.name, Holder: other, Token: held.Token}))
	require.True(t, r.WaitFor(func(n store.Notice) bool {
		return n.Name == b.name && n.Kind == store.NoticeReleased && n.Next == me
	}, eventTimeout), "the release names the head of the line; got %+v", r.Of(b.name))
	g := acquireAll(t, s, me, longTTL, b.name)[0]
	require.Greater(t, g.Token, held.Token)
	pairs, _, err = b.client.KV().List(line, nil)
	require.NoError(t, err)
	require.Empty(t, pairs, "the new holder left the line in the transaction that granted it the lease")
	b.awaitSessionGone(t, waited)
}

// The leases one batch grants share a session but not their fates.
func TestAcquireBatchSharedSession(t *testing.T) {
	t.Parallel()

	t.Run("ReleaseOne", func(t *testing.T) {
		t.Parallel()
		b := setup(t, consulstore.Config{})
		holder := testutil.Holder(t, "holder")
		gs := acquireAll(t, b.store, holder, longTTL, b.name+"_x", b.name+"_y", b.name+"_z")
		session := b.session(t, b.leaseKey(gs[0].Name))
		for _, g := range gs {
			require.Equal(t, session, b.session(t, b.leaseKey(g.Name)), "one batch, one session")
		}

		require.NoError(t, b.store.Release(t.Context(), store.ReleaseParams{Name: gs[0].Name, Holder: holder, Token: gs[0].Token}))
		b.reaped(t, b.store)
		b.requireSession(t, session)
		require.Equal(t, store.StateReleased, b.state(t, gs[0].Name))
		for _, g := range gs[1:] {
			require.Equal(t, store.StateHeld, b.state(t, g.Name), "lease %q", g.Name)
		}

		// The session now holds exactly the other two: they are renewed
		// in it.
		ps := make([]store.RenewParams, 0, 2)
		for _, g := range gs[1:] {
			ps = append(ps, store.RenewParams{Name: g.Name, Holder: holder, Token: g.Token, Seq: g.Seq, TTL: longTTL})
		}
		rs, err := b.store.Renew(t.Context(), ps)
		require.NoError(t, err)
		for _, res := range rs {
			require.True(t, res.Renewed, "lease %q", res.Grant.Name)
			require.Equal(t, session, b.session(t, b.leaseKey(res.Grant.Name)), "renewed in place")
		}

		errs, err := b.store.ReleaseBatch(t.Context(), []store.ReleaseParams{
			{Name: gs[1].Name, Holder: holder, Token: gs[1].Token},
			{Name: gs[2].Name, Holder: holder, Token: gs[2].Token},
		})
		require.NoError(t, err)
		require.Equal(t, []error{nil, nil}, errs)
		b.awaitSessionGone(t, session)
	})

	t.Run("RenewSome", func(t *testing.T) {
		t.Parallel()
		b := setup(t, consulstore.Config{})
		holder := testutil.Holder(t, "holder")
		const ttl = 2 * time.Second
		gs := acquireAll(t, b.store, holder, ttl, b.name+"_kept", b.name+"_left")
		kept, left := gs[0], gs[1]
		session := b.session(t, b.leaseKey(left.Name))

		// Renew one lease, as its holder would, until the other's
		// session ends; each blocking query on the other's record waits
		// at most a quarter of the TTL for the expiry.
		deadline := time.Now().Add(eventTimeout)
		var index uint64
		for {
			require.True(t, time.Now().Before(deadline), "the lease left out of the renewals did not expire within %s", eventTimeout)
			rs, err := b.store.Renew(t.Context(), []store.RenewParams{{Name: kept.Name, Holder: holder, Token: kept.Token, Seq: kept.Seq, TTL: ttl}})
			require.NoError(t, err)
			require.True(t, rs[0].Renewed)
			kept.Seq = rs[0].Grant.Seq
			pair, meta, err := b.client.KV().Get(b.leaseKey(left.Name), (&api.QueryOptions{WaitIndex: index, WaitTime: ttl / 4}).WithContext(t.Context()))
			require.NoError(t, err)
			require.NotNil(t, pair, "the record of lease %q is gone", left.Name)
			if pair.Session == "" {
				break
			}
			index = meta.LastIndex
		}
		require.Equal(t, store.StateExpired, b.state(t, left.Name))
		require.Equal(t, store.StateHeld, b.state(t, kept.Name), "the renewed lease outlives the session it was granted in")
		require.NotEqual(t, session, b.session(t, b.leaseKey(kept.Name)))
	})
}

// A batch release answers a lease not held as Release does, with
// ErrNotHeld, and releases the others: one read and one transaction,
// which announces each release.
func TestReleaseBatchNotHeld(t *testing.T) {
	t.Parallel()
	b := setup(t, consulstore.Config{})
	s, counted := countedStore(t, b.store.Config().KeyPrefix)
	r := b.notices(t)
	holder, other := testutil.Holder(t, "holder"), testutil.Holder(t, "other")
	gs := acquireAll(t, s, holder, longTTL, b.name+"_a", b.name+"_b", b.name+"_c")
	foreign := b.acquire(t, other, longTTL)
	session := b.session(t, b.leaseKey(gs[0].Name))

	counted.take()
	errs, err := s.ReleaseBatch(t.Context(), []store.ReleaseParams{
		{Name: gs[0].Name, Holder: holder, Token: gs[0].Token},
		{Name: foreign.Name, Holder: holder, Token: foreign.Token},
		{Name: gs[2].Name, Holder: holder, Token: gs[2].Token},
	})
	require.NoError(t, err)
	require.Len(t, errs, 3)
	require.NoError(t, errs[0])
	require.ErrorIs(t, errs[1], store.ErrNotHeld, "another holder's lease")
	require.NoError(t, errs[2])
	require.Equal(t, map[string]int{"PUT /v1/txn": 2}, onCallersPath(counted.take()), "one read, one transaction")

	for _, g := range []store.Grant{gs[0], gs[2]} {
		require.True(t, r.WaitFor(func(n store.Notice) bool { return n.Name == g.Name && n.Kind == store.NoticeReleased }, eventTimeout),
			"the release of %q is announced; got %+v", g.Name, r.Of(g.Name))
		rec, err := b.store.Get(t.Context(), g.Name)
		require.NoError(t, err)
		require.Equal(t, store.StateReleased, rec.State)
		require.Equal(t, g.Token, rec.Token, "a release keeps the token")
	}
	rec, err := b.store.Get(t.Context(), foreign.Name)
	require.NoError(t, err)
	require.Equal(t, store.StateHeld, rec.State)
	require.Equal(t, other, rec.Holder, "the lease not held by the caller is left alone")
	b.reaped(t, s)
	b.requireSession(t, session)
	require.Equal(t, store.StateHeld, b.state(t, gs[1].Name), "the lease left out of the release keeps its session")

	errs, err = s.ReleaseBatch(t.Context(), []store.ReleaseParams{{Name: gs[1].Name, Holder: holder, Token: gs[1].Token}})
	require.NoError(t, err)
	require.Equal(t, []error{nil}, errs)
	b.awaitSessionGone(t, session)
}

// cutting is an http.RoundTripper that fails every transaction after the
// first n it carries, as a connection cut after them would.
type cutting struct {
	next http.RoundTripper
	mu   sync.Mutex
	n    int
}

func (c *cutting) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Path == "/v1/txn" {
		c.mu.Lock()
		c.n--
		cut := c.n < 0
		c.mu.Unlock()
		if cut {
			if r.Body != nil {
				_ = r.Body.Close()
			}
			return nil, errors.New("connection cut by the test")
		}
	}
	return c.next.RoundTrip(r)
}

// A batch that fails as a whole after a transaction granted leases
// destroys the session it created, and with it those tenures, which its
// caller never learns.
func TestAcquireBatchFailureLeavesNoSession(t *testing.T) {
	t.Parallel()
	b := setup(t, consulstore.Config{})
	tr := &http.Transport{Proxy: nil}
	t.Cleanup(tr.CloseIdleConnections)
	client, err := api.NewClient(&api.Config{Address: consulserver.SharedConsul(t).HTTPAddr, HttpClient: &http.Client{Transport: &cutting{next: tr, n: 2}}})
	require.NoError(t, err)
	s, err := consulstore.New(client, consulstore.Config{KeyPrefix: b.store.Config().KeyPrefix, MinSessionTTL: consulserver.ConsulSessionTTLMin})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	holder := testutil.Holder(t, "holder")

	// The read and the first of two write transactions pass; the second
	// is cut.
	ps := make([]store.AcquireParams, 40)
	for i := range ps {
		ps[i] = store.AcquireParams{Name: fmt.Sprintf("%s_%02d", b.name, i), Holder: holder, TTL: longTTL}
	}
	res, err := s.AcquireBatch(t.Context(), ps)
	require.ErrorIs(t, err, store.ErrUnavailable)
	require.Nil(t, res)

	b.awaitNoSession(t, holder)
	require.Equal(t, store.StateExpired, b.state(t, ps[0].Name), "the tenure granted before the failure ended with its session")
}

// awaitNoSession waits, with blocking queries, until no session the store
// created for holder's leases is left.
func (b *bundle) awaitNoSession(t *testing.T, holder store.Holder) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), eventTimeout)
	defer cancel()
	var index uint64
	for {
		sessions, meta, err := b.client.Session().List((&api.QueryOptions{WaitIndex: index, WaitTime: eventTimeout}).WithContext(ctx))
		require.NoError(t, err, "a session of %s was not destroyed within %s", holder, eventTimeout)
		if !slices.ContainsFunc(sessions, func(e *api.SessionEntry) bool { return e.Name == "tenure "+holder.String() }) {
			return
		}
		index = meta.LastIndex
	}
}

// held is an http.RoundTripper that holds the nth transaction it carries
// until released (or its context ends), after saying so on arrived.
type held struct {
	next     http.RoundTripper
	n        int
	arrived  chan struct{}
	released chan struct{}
	mu       sync.Mutex
	txns     int
}

func (h *held) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Path == "/v1/txn" {
		h.mu.Lock()
		h.txns++
		hold := h.txns == h.n
		h.mu.Unlock()
		if hold {
			close(h.arrived)
			select {
			case <-h.released:
			case <-r.Context().Done():
				if r.Body != nil {
					_ = r.Body.Close()
				}
				return nil, r.Context().Err()
			}
		}
	}
	return h.next.RoundTrip(r)
}

// A batch whose leases another batch takes between its read and its
// transaction reads them again and refuses them, as Acquire would: it
// reports no grant its rolled-back transactions did not make, and
// destroys the session it created for them.
func TestAcquireBatchRaced(t *testing.T) {
	t.Parallel()
	b := setup(t, consulstore.Config{})
	gate := &held{next: &http.Transport{Proxy: nil}, n: 2, arrived: make(chan struct{}), released: make(chan struct{})}
	t.Cleanup(gate.next.(*http.Transport).CloseIdleConnections)
	client, err := api.NewClient(&api.Config{Address: consulserver.SharedConsul(t).HTTPAddr, HttpClient: &http.Client{Transport: gate}})
	require.NoError(t, err)
	late, err := consulstore.New(client, consulstore.Config{KeyPrefix: b.store.Config().KeyPrefix, MinSessionTTL: consulserver.ConsulSessionTTLMin})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, late.Close()) })
	loser, winner := testutil.Holder(t, "loser"), testutil.Holder(t, "winner")
	names := make([]string, 40)
	ps := make([]store.AcquireParams, len(names))
	for i := range names {
		names[i] = fmt.Sprintf("%s_%02d", b.name, i)
		ps[i] = store.AcquireParams{Name: names[i], Holder: loser, TTL: longTTL}
	}

	type answer struct {
		res []store.AcquireResult
		err error
	}
	answered := make(chan answer, 1)
	go func() {
		res, err := late.AcquireBatch(t.Context(), ps)
		answered <- answer{res, err}
	}()
	// The late batch has read every lease free and holds its first
	// write; the other takes them all meanwhile.
	testutil.Receive(t, gate.arrived, "the late batch's first write", eventTimeout)
	won := acquireAll(t, b.store, winner, longTTL, names...)
	close(gate.released)

	got := testutil.Receive(t, answered, "the late batch's answer", eventTimeout)
	require.NoError(t, got.err)
	for i, r := range got.res {
		var he *store.HeldError
		require.ErrorAs(t, r.Err, &he, "lease %q is refused", names[i])
		require.Zero(t, r.Grant, "lease %q: no grant that did not commit", names[i])
		require.Equal(t, winner, he.Holder)
		require.Equal(t, won[i].Token, he.Token)
		rec, err := b.store.Get(t.Context(), names[i])
		require.NoError(t, err)
		require.Equal(t, winner, rec.Holder)
		require.Equal(t, won[i].Token, rec.Token)
	}
	b.awaitNoSession(t, loser)
}
