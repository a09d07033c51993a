package consulstore_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tenure-dev/tenure"
	"github.com/tenure-dev/tenure/store"

	"github.com/hashicorp/consul/api"
	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/testserver/consulserver"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store/consulstore"
)

// counting is an http.RoundTripper that counts the requests it carries,
// by method and path ("PUT /v1/txn").
type counting struct {
	next *http.Transport
	mu   sync.Mutex
	n    map[string]int
}

func (c *counting) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.n[r.Method+" "+r.URL.Path]++
	c.mu.Unlock()
	return c.next.RoundTrip(r)
}

// take returns the requests counted since the last take, and forgets them.
func (c *counting) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n
	c.n = make(map[string]int)
	return n
}

// total returns how many requests were counted since the last take.
func (c *counting) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	sum := 0
	for _, v := range c.n {
		sum += v
	}
	return sum
}

// countedStore is a store with a client of its own whose requests are
// counted, on prefix.
func countedStore(t *testing.T, prefix string) (*consulstore.Store, *counting) {
	t.Helper()
	tr := &http.Transport{Proxy: nil}
	t.Cleanup(tr.CloseIdleConnections)
	c := &counting{next: tr, n: make(map[string]int)}
	return storeWith(t, prefix, c), c
}

// storeWith is a store on prefix with a client of its own whose requests
// go through rt.
func storeWith(t *testing.T, prefix string, rt http.RoundTripper) *consulstore.Store {
	t.Helper()
	client, err := api.NewClient(&api.Config{Address: consulserver.SharedConsul(t).HTTPAddr, HttpClient: &http.Client{Transport: rt}})
	require.NoError(t, err)
	s, err := consulstore.New(client, consulstore.Config{KeyPrefix: prefix, MinSessionTTL: consulserver.ConsulSessionTTLMin})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

// overlappingStore is a store on prefix whose requests are counted, and
// whose reads wait for a session creation while o.hold is set.
func overlappingStore(t *testing.T, prefix string) (*consulstore.Store, *overlapping) {
	t.Helper()
	tr := &http.Transport{Proxy: nil}
	t.Cleanup(tr.CloseIdleConnections)
	o := &overlapping{counting: counting{next: tr, n: make(map[string]int)}, created: make(chan struct{}, 1)}
	return storeWith(t, prefix, o), o
}

// overlapping is a counting transport that, while hold is set, keeps each
// read (a transaction of get operations only) from leaving until a
// session creation has been sent, and counts the reads that saw one.
type overlapping struct {
	counting
	hold       atomic.Bool
	created    chan struct{}
	overlapped atomic.Int32
}

func (o *overlapping) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Path == "/v1/session/create" {
		select {
		case o.created <- struct{}{}:
		default:
		}
	}
	if o.hold.Load() && r.URL.Path == "/v1/txn" && r.Body != nil {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		if bytes.Contains(body, []byte(`"get-tree"`)) && !bytes.Contains(body, []byte(`"lock"`)) {
			select {
			case <-o.created:
				o.overlapped.Add(1)
			case <-time.After(eventTimeout):
			}
		}
	}
	return o.counting.RoundTrip(r)
}

// A lease found free costs two round trips' time, not three: the
// acquisition creates its session while its read is in flight. One the
// store expects to be refused (it saw the lease held) creates none; a
// wrong guess costs a refusal a session, created and destroyed, once.
func TestAcquireCreatesItsSessionDuringTheRead(t *testing.T) {
	t.Parallel()
	b := setup(t, consulstore.Config{})
	s, o := overlappingStore(t, b.store.Config().KeyPrefix)
	acquire := func(h store.Holder) (store.Grant, error) {
		return s.Acquire(t.Context(), store.AcquireParams{Name: b.name, Holder: h, TTL: longTTL})
	}

	o.hold.Store(true)
	holder := testutil.Holder(t, "holder")
	g, err := acquire(holder)
	require.NoError(t, err)
	o.hold.Store(false)
	require.Equal(t, int32(1), o.overlapped.Load(), "the session creation was sent while the read was in flight")
	require.Equal(t, map[string]int{"PUT /v1/txn": 2, "PUT /v1/session/create": 1}, onCallersPath(o.take()))

	_, err = acquire(testutil.Holder(t, "same store"))
	require.ErrorIs(t, err, store.ErrHeld)
	require.Equal(t, map[string]int{"PUT /v1/txn": 1}, onCallersPath(o.take()), "a refusal of a lease the store holds: the read alone")

	other, counted := countedStore(t, b.store.Config().KeyPrefix)
	passerBy := testutil.Holder(t, "passer-by")
	for _, want := range []map[string]int{
		{"PUT /v1/txn": 1, "PUT /v1/session/create": 1}, // the store knows nothing of the lease: it guesses free
		{"PUT /v1/txn": 1}, // it saw the lease held
	} {
		_, err = other.Acquire(t.Context(), store.AcquireParams{Name: b.name, Holder: passerBy, TTL: longTTL})
		require.ErrorIs(t, err, store.ErrHeld)
		require.Equal(t, want, onCallersPath(counted.take()))
	}

	// Heard released, the lease is worth a guess again.
	r := testutil.NewNotifications()
	testutil.RunListener(t, t.Context(), other.Listen, r.Notify, eventTimeout)
	require.True(t, r.Wait("", eventTimeout), "Listen announces its subscription")
	require.NoError(t, s.Release(t.Context(), store.ReleaseParams{Name: b.name, Holder: holder, Token: g.Token}))
	require.True(t, r.WaitFor(func(n store.Notice) bool { return n.Name == b.name && n.Kind == store.NoticeReleased }, eventTimeout))
	counted.take()
	_, err = other.Acquire(t.Context(), store.AcquireParams{Name: b.name, Holder: passerBy, TTL: longTTL})
	require.NoError(t, err)
	n := onCallersPath(counted.take())
	for k := range n {
		if strings.HasPrefix(k, "GET ") {
			delete(n, k) // the listener's blocking queries
		}
	}
	require.Equal(t, map[string]int{"PUT /v1/txn": 2, "PUT /v1/session/create": 1}, n)
}

// A store that released a lease nobody waits for guesses it free at once,
// though its Listen heard it acquired and has not yet heard the release.
func TestAcquireAfterOwnReleaseCreatesItsSessionDuringTheRead(t *testing.T) {
	t.Parallel()
	b := setup(t, consulstore.Config{})
	s, o := overlappingStore(t, b.store.Config().KeyPrefix)
	r := testutil.NewNotifications()
	testutil.RunListener(t, t.Context(), s.Listen, r.Notify, eventTimeout)
	require.True(t, r.Wait("", eventTimeout), "Listen announces its subscription")

	holder := testutil.Holder(t, "holder")
	p := store.AcquireParams{Name: b.name, Holder: holder, TTL: longTTL}
	g, err := s.Acquire(t.Context(), p)
	require.NoError(t, err)
	require.True(t, r.WaitFor(func(n store.Notice) bool { return n.Name == b.name && n.Kind == store.NoticeAcquired }, eventTimeout))
	require.NoError(t, s.Release(t.Context(), store.ReleaseParams{Name: b.name, Holder: holder, Token: g.Token}))
	select {
	case <-o.created: // the first acquisition's
	default:
	}
	o.hold.Store(true)
	_, err = s.Acquire(t.Context(), p)
	require.NoError(t, err)
	require.Equal(t, int32(1), o.overlapped.Load(), "the session creation was sent while the read was in flight")
}

// A listener's queries wait on the announcement key alone: renewals of
// many leases under its prefix cost it nothing, and each release or
// acquisition costs it one query, whatever lives under the prefix.
func TestListenCostIsPerAnnouncement(t *testing.T) {
	t.Parallel()
	b := setup(t, consulstore.Config{})
	listener, counted := countedStore(t, b.store.Config().KeyPrefix)
	r := testutil.NewNotifications()
	testutil.RunListener(t, t.Context(), listener.Listen, r.Notify, eventTimeout)
	require.True(t, r.Wait("", eventTimeout), "Listen announces its subscription")

	holder := testutil.Holder(t, "holder")
	const leases, rounds = 20, 5
	grants := make([]store.Grant, leases)
	for i := range grants {
		g, err := b.store.Acquire(t.Context(), store.AcquireParams{Name: fmt.Sprintf("%s_%d", b.name, i), Holder: holder, TTL: longTTL})
		require.NoError(t, err)
		grants[i] = g
	}
	require.True(t, r.Wait(grants[leases-1].Name, eventTimeout), "the last acquisition is announced")
	counted.take()

	for range rounds {
		ps := make([]store.RenewParams, leases)
		for i, g := range grants {
			ps[i] = store.RenewParams{Name: g.Name, Holder: g.Holder, Token: g.Token, Seq: g.Seq, TTL: longTTL}
		}
		rs, err := b.store.Renew(t.Context(), ps)
		require.NoError(t, err)
		for i, res := range rs {
			require.True(t, res.Renewed)
			grants[i].Seq = res.Grant.Seq
		}
	}
	g := grants[0]
	require.NoError(t, b.store.Release(t.Context(), store.ReleaseParams{Name: g.Name, Holder: g.Holder, Token: g.Token}))
	require.True(t, r.WaitFor(func(n store.Notice) bool { return n.Name == g.Name && n.Kind == store.NoticeReleased }, eventTimeout))
	// One query returned with the release; the next is open. Renewals
	// woke none.
	require.LessOrEqual(t, counted.total(), 2, "listener requests during %d renewals of %d leases and one release: %v", rounds, leases, counted.take())
}

// Notices say what happened: an acquisition with its holder and the TTL
// granted, a release as such.
func TestListenNoticeKinds(t *testing.T) {
	t.Parallel()
	b := setup(t, consulstore.Config{})
	r := testutil.NewNotifications()
	testutil.RunListener(t, t.Context(), b.store.Listen, r.Notify, eventTimeout)
	require.True(t, r.Wait("", eventTimeout))

	holder := testutil.Holder(t, "holder")
	g := b.acquire(t, holder, longTTL)
	require.True(t, r.WaitFor(func(n store.Notice) bool {
		return n.Name == b.name && n.Kind == store.NoticeAcquired && n.Holder == holder && n.Remaining == longTTL
	}, eventTimeout), "no acquisition notice with holder and TTL; got %+v", r.Of(b.name))
	require.NoError(t, b.store.Release(t.Context(), store.ReleaseParams{Name: b.name, Holder: holder, Token: g.Token}))
	require.True(t, r.WaitFor(func(n store.Notice) bool {
		return n.Name == b.name && n.Kind == store.NoticeReleased && n.Holder == (store.Holder{})
	}, eventTimeout), "no release notice; got %+v", r.Of(b.name))
}

// A listener that finds the announcement count gone backwards (the key
// deleted) cannot tell what it missed: it says so with the empty notice.
func TestListenAfterAnnouncementsDeleted(t *testing.T) {
	t.Parallel()
	b := setup(t, consulstore.Config{})
	r := testutil.NewNotifications()
	empties := make(chan struct{}, 16)
	testutil.RunListener(t, t.Context(), b.store.Listen, func(n store.Notice) {
		r.Notify(n)
		if n.Name == "" {
			empties <- struct{}{}
		}
	}, eventTimeout)
	awaitEmpty := func(msg string) {
		t.Helper()
		select {
		case <-empties:
		case <-time.After(eventTimeout):
			t.Fatalf("no empty notice within %s: %s", eventTimeout, msg)
		}
	}
	awaitEmpty("Listen announces its subscription")
	holder := testutil.Holder(t, "holder")
	b.acquire(t, holder, longTTL)
	require.True(t, r.Wait(b.name, eventTimeout))
	require.Empty(t, empties, "an announcement in sequence is not a gap")

	_, err := b.client.KV().Delete(b.store.Config().KeyPrefix+".announce", nil)
	require.NoError(t, err)
	awaitEmpty("after the announcements were deleted")
}

// A renewal of exactly the leases of a session this store created renews
// that session and sends its compare-and-set without reading first: two
// requests, and the lease stays in its session. Through another store (no
// write of its own to go by) it reads first and moves the lease to a new
// session.
func TestRenewRoundTrips(t *testing.T) {
	t.Parallel()
	b := setup(t, consulstore.Config{})
	s, counted := countedStore(t, b.store.Config().KeyPrefix)
	other, otherCounted := countedStore(t, b.store.Config().KeyPrefix)
	holder := testutil.Holder(t, "holder")
	g, err := s.Acquire(t.Context(), store.AcquireParams{Name: b.name, Holder: holder, TTL: longTTL})
	require.NoError(t, err)
	renew := func(s *consulstore.Store, seq int64) store.RenewResult {
		t.Helper()
		rs, err := s.Renew(t.Context(), []store.RenewParams{{Name: b.name, Holder: holder, Token: g.Token, Seq: seq, TTL: longTTL}})
		require.NoError(t, err)
		return rs[0]
	}

	acquired := b.session(t, b.key("lease"))
	counted.take()
	require.True(t, renew(s, 1).Renewed)
	require.Equal(t, map[string]int{"PUT /v1/session/renew": 1, "PUT /v1/txn": 1}, onCallersPath(counted.take()))
	require.True(t, renew(s, 2).Renewed)
	require.Equal(t, map[string]int{"PUT /v1/session/renew": 1, "PUT /v1/txn": 1}, onCallersPath(counted.take()))
	require.Equal(t, acquired, b.session(t, b.key("lease")), "renewed in place")
	r, err := b.store.Get(t.Context(), b.name)
	require.NoError(t, err)
	require.Equal(t, int64(3), r.Seq, "each renewal in place advances the chain")

	require.True(t, renew(other, 3).Renewed)
	require.Equal(t, map[string]int{"PUT /v1/session/create": 1, "PUT /v1/txn": 2}, onCallersPath(otherCounted.take()),
		"a read and a write transaction")

	// The first store's write is no longer the record's: its
	// compare-and-set fails, it reads and decides on what it read.
	res := renew(s, 3)
	require.False(t, res.Renewed, "seq 3 was renewed by the other store")
	require.Equal(t, int64(4), res.Grant.Seq)
	require.True(t, renew(s, 4).Renewed, "a renewal at the chain's head passes after a read")

	// A write that changes the record but not the tenure (the same value
	// put again) makes the remembered index stale: the renewal reads and
	// tries again.
	pair, _, err := b.client.KV().Get(b.key("lease"), nil)
	require.NoError(t, err)
	_, err = b.client.KV().Put(&api.KVPair{Key: pair.Key, Value: pair.Value}, nil)
	require.NoError(t, err)
	counted.take()
	require.True(t, renew(s, 5).Renewed)
	require.Equal(t, map[string]int{"PUT /v1/session/renew": 1, "PUT /v1/session/create": 1, "PUT /v1/txn": 3}, onCallersPath(counted.take()),
		"a failed write in place, a read, and a move")

	// The counter is part of every renewal's compare-and-set.
	_, err = b.client.KV().Delete(b.key("counter"), nil)
	require.NoError(t, err)
	require.False(t, renew(s, 6).Renewed, "a renewal after the counter was deleted")
}

// onCallersPath drops the session destructions, which run in the
// background, from a count, and the session IDs from session renewals.
func onCallersPath(n map[string]int) map[string]int {
	out := make(map[string]int)
	for k, v := range n {
		switch {
		case strings.HasPrefix(k, "PUT /v1/session/destroy/"):
		case strings.HasPrefix(k, "PUT /v1/session/renew/"):
			out["PUT /v1/session/renew"] += v
		default:
			out[k] += v
		}
	}
	return out
}

// A session that holds none of the leases the store put into it any more
// is destroyed: after a release, and after a renewal moved its leases to a
// new session. One that still holds a lease left out of a renewal stays.
func TestSessionsDestroyedWhenEmpty(t *testing.T) {
	t.Parallel()
	b := setup(t, consulstore.Config{})
	ctx := t.Context()
	holder := testutil.Holder(t, "holder")
	leaseKey := func(name string) string { return b.store.Config().KeyPrefix + name + "/lease" }
	grant := func(name string) store.Grant {
		g, err := b.store.Acquire(ctx, store.AcquireParams{Name: name, Holder: holder, TTL: longTTL})
		require.NoError(t, err)
		return g
	}
	renew := func(gs ...*store.Grant) {
		ps := make([]store.RenewParams, len(gs))
		for i, g := range gs {
			ps[i] = store.RenewParams{Name: g.Name, Holder: g.Holder, Token: g.Token, Seq: g.Seq, TTL: longTTL}
		}
		rs, err := b.store.Renew(ctx, ps)
		require.NoError(t, err)
		for i, r := range rs {
			require.True(t, r.Renewed, "lease %q", r.Grant.Name)
			gs[i].Seq = r.Grant.Seq
		}
	}

	g := grant(b.name)
	acquired := b.session(t, leaseKey(g.Name))
	require.NoError(t, b.store.Release(ctx, store.ReleaseParams{Name: g.Name, Holder: holder, Token: g.Token}))
	b.awaitSessionGone(t, acquired)

	a, c := grant(b.name+"_a"), grant(b.name+"_c")
	sa, sc := b.session(t, leaseKey(a.Name)), b.session(t, leaseKey(c.Name))
	renew(&a, &c)
	b.awaitSessionGone(t, sa)
	b.awaitSessionGone(t, sc)
	shared := b.session(t, leaseKey(a.Name))

	renew(&a)
	moved := b.session(t, leaseKey(a.Name))
	require.NoError(t, b.store.Release(ctx, store.ReleaseParams{Name: a.Name, Holder: holder, Token: a.Token}))
	// Sessions are destroyed in the order they were found empty: once the
	// session a left last is gone, a wrong destruction of the one c is
	// still in would have happened.
	b.awaitSessionGone(t, moved)
	b.requireSession(t, shared)
	rc, err := b.store.Get(ctx, c.Name)
	require.NoError(t, err)
	require.Equal(t, store.StateHeld, rc.State, "the lease left out of the renewal is still held")

	// c is now alone in its session: it is renewed there.
	renew(&c)
	require.Equal(t, shared, b.session(t, leaseKey(c.Name)))
}

// A renewal in place whose session is gone (its TTL ran out, an operator
// destroyed it) reports the lease as not held, and renews nothing: a
// session renewal that finds no session, and a read.
func TestRenewInPlaceAfterSessionGone(t *testing.T) {
	t.Parallel()
	b := setup(t, consulstore.Config{})
	s, counted := countedStore(t, b.store.Config().KeyPrefix)
	holder := testutil.Holder(t, "holder")
	g, err := s.Acquire(t.Context(), store.AcquireParams{Name: b.name, Holder: holder, TTL: longTTL})
	require.NoError(t, err)
	_, err = b.client.Session().Destroy(b.session(t, b.key("lease")), nil)
	require.NoError(t, err)

	counted.take()
	rs, err := s.Renew(t.Context(), []store.RenewParams{{Name: b.name, Holder: holder, Token: g.Token, Seq: g.Seq, TTL: longTTL}})
	require.NoError(t, err)
	require.False(t, rs[0].Renewed)
	require.Zero(t, rs[0].Grant.Holder, "nobody holds the lease")
	require.Equal(t, map[string]int{"PUT /v1/session/renew": 1, "PUT /v1/txn": 1}, onCallersPath(counted.take()))
	r, err := b.store.Get(t.Context(), b.name)
	require.NoError(t, err)
	require.Equal(t, store.StateExpired, r.State)
	require.Equal(t, g.Seq, r.Seq, "the chain did not move")
}

// blocking is an http.RoundTripper that counts the blocking queries in
// flight through it (requests with an index to wait on).
type blocking struct {
	next     http.RoundTripper
	inFlight atomic.Int32
}

func (b *blocking) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Query().Has("index") {
		b.inFlight.Add(1)
		defer b.inFlight.Add(-1)
	}
	return b.next.RoundTrip(r)
}

// TestIdleHolderMakesNoListenRequests: a client that holds one lease (TTL
// one minute, so no renewal falls in the test) and waits for none makes no
// request while other stores acquire and release twenty other leases
// under its prefix, each an announcement: it keeps no blocking query on
// the announcement key, since it follows only what it holds. Its idle cost
// is its renewals.
func TestIdleHolderMakesNoListenRequests(t *testing.T) {
	t.Parallel()
	b := setup(t, consulstore.Config{})
	prefix := b.store.Config().KeyPrefix
	tr := &http.Transport{Proxy: nil}
	t.Cleanup(tr.CloseIdleConnections)
	counted := &counting{next: tr, n: make(map[string]int)}
	queries := &blocking{next: counted}
	holder := storeWith(t, prefix, queries)

	c, err := tenure.New(holder, tenure.Config{Label: "idle", TTL: longTTL})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = c.Run(ctx) }) // Run returns nil once ctx ends.
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	_, err = c.Acquire(t.Context(), b.name)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return queries.inFlight.Load() == 0 },
		eventTimeout, 5*time.Millisecond, "the holder keeps a blocking query open while it waits for nothing")
	counted.take()

	// A listener on another store hears the twenty announcements: by
	// then a listener of the holder's would have read them too.
	r := testutil.NewNotifications()
	testutil.RunListener(t, t.Context(), b.store.Listen, r.Notify, eventTimeout)
	require.True(t, r.Wait("", eventTimeout), "Listen announces its subscription")
	other := testutil.Holder(t, "other")
	for i := range 10 {
		name := fmt.Sprintf("%s-other-%d", b.name, i)
		g, err := b.store.Acquire(t.Context(), store.AcquireParams{Name: name, Holder: other, TTL: longTTL})
		require.NoError(t, err)
		require.NoError(t, b.store.Release(t.Context(), store.ReleaseParams{Name: name, Holder: other, Token: g.Token}))
	}
	last := fmt.Sprintf("%s-other-%d", b.name, 9)
	require.True(t, r.WaitFor(func(n store.Notice) bool { return n.Name == last && n.Kind == store.NoticeReleased }, eventTimeout))
	require.Empty(t, counted.take(), "requests of an idle holder while others' leases changed")
}
