package consulstore_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure"
	"github.com/tenure-dev/tenure/internal/linetest"
	"github.com/tenure-dev/tenure/internal/testserver/consulserver"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/consulstore"
)

// expiryNoticeBound is how long after Consul unlocks an expired lease's
// record (as a blocking query of the test sees it) the head of the line's
// listener may deliver the notice. Both queries wait on the same agent
// and wake at the same Raft write; the bound leaves room for a loaded
// machine. Without the watch no notice of the expiry comes at all.
const expiryNoticeBound = 2 * time.Second

// peer returns another store on b's key prefix, with a client of its own,
// as another process would have.
func peer(t *testing.T, b *bundle) *consulstore.Store {
	t.Helper()
	s, err := consulstore.New(consulserver.SharedConsul(t).Client(t), consulstore.Config{
		KeyPrefix:     b.store.Config().KeyPrefix,
		MinSessionTTL: consulserver.ConsulSessionTTLMin,
	})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

// expiryListener is a listener of one store: every notice it delivers,
// and the time of each [store.NoticeChanged] of one lease.
type expiryListener struct {
	*testutil.Notifications
	changed chan time.Time
}

// listenForExpiry runs Listen on s for the rest of the test and returns
// once it has subscribed.
func listenForExpiry(t *testing.T, s *consulstore.Store, name string) *expiryListener {
	t.Helper()
	l := &expiryListener{Notifications: testutil.NewNotifications(), changed: make(chan time.Time, 16)}
	testutil.RunListener(t, t.Context(), s.Listen, func(n store.Notice) {
		if n.Name == name && n.Kind == store.NoticeChanged {
			select {
			case l.changed <- time.Now():
			default:
			}
		}
		l.Notify(n)
	}, eventTimeout)
	require.True(t, l.Wait("", eventTimeout), "Listen announces its subscription")
	return l
}

// waitInLine asks s for lease name for h, waiting in line, and returns the
// place the refusal gives. It asks with a long TTL, so that the place (and
// the store's memory of it) outlasts the test: only an acquisition or a
// later place ends a watch.
func waitInLine(t *testing.T, s *consulstore.Store, name string, h store.Holder) int {
	t.Helper()
	g, err := s.Acquire(t.Context(), store.AcquireParams{Name: name, Holder: h, TTL: longTTL, Wait: true})
	var held *store.HeldError
	require.True(t, errors.As(err, &held),
		"%s was not refused (grant %+v, error %v): the holder's session ended before the followers took their places",
		h, g, err)
	return held.Position
}

// TestHeadOfLineHearsOfExpiry: Consul expires a lease by invalidating its
// holder's session, which no announcement tells of. The follower a store
// told it was first in line hears of it from that store's Listen as soon
// as Consul unlocks the record; the follower behind, on a store of its
// own, is not told. Once the head has acquired the lease its store stops
// watching it, and the store of the new head (told so when it asks again)
// watches instead.
func TestHeadOfLineHearsOfExpiry(t *testing.T) {
	t.Parallel()
	b := setup(t, consulstore.Config{})
	// The agent's shortest session: Consul invalidates it between one and
	// two of its TTL after the last renewal.
	ttl := consulserver.ConsulSessionTTLMin
	firstStore, secondStore := peer(t, b), peer(t, b)
	first := listenForExpiry(t, firstStore, b.name)
	second := listenForExpiry(t, secondStore, b.name)
	lockGone := func() time.Time {
		b.awaitKey(t, b.key("lease"), func(p *api.KVPair) bool { return p != nil && p.Session == "" })
		return time.Now()
	}
	noticeSince := func(l *expiryListener, gone time.Time, who string) {
		t.Helper()
		at := testutil.Receive(t, l.changed, who+"'s notice of the expiry", eventTimeout)
		require.Less(t, at.Sub(gone), expiryNoticeBound,
			"%s heard of the expiry %s after Consul unlocked the record", who, at.Sub(gone))
	}
	acquired := func(l *expiryListener, h store.Holder, who string) {
		t.Helper()
		require.True(t, l.WaitFor(func(n store.Notice) bool {
			return n.Name == b.name && n.Kind == store.NoticeAcquired && n.Holder == h
		}, eventTimeout), "%s heard of no acquisition by %s; got %+v", who, h, l.Of(b.name))
	}

	holder := testutil.Holder(t, "holder")
	firstHolder, secondHolder := testutil.Holder(t, "first"), testutil.Holder(t, "second")
	g := b.acquire(t, holder, ttl)
	require.Equal(t, 1, waitInLine(t, firstStore, b.name, firstHolder))
	require.Equal(t, 2, waitInLine(t, secondStore, b.name, secondHolder))

	noticeSince(first, lockGone(), "the head of the line")
	won, err := firstStore.Acquire(t.Context(), store.AcquireParams{Name: b.name, Holder: firstHolder, TTL: ttl, Wait: true})
	require.NoError(t, err)
	require.Greater(t, won.Token, g.Token)
	// The new tenure is announced after the expiry was seen: a store that
	// watched for the follower behind would have told it by now.
	acquired(second, firstHolder, "the follower behind")
	require.Len(t, second.changed, 0, "the follower behind the head is not told of the expiry")

	// The first follower's tenure expires in turn; the second is first in
	// line now, and its store is told so when it asks again.
	require.Equal(t, 1, waitInLine(t, secondStore, b.name, secondHolder))
	noticeSince(second, lockGone(), "the new head of the line")
	_, err = secondStore.Acquire(t.Context(), store.AcquireParams{Name: b.name, Holder: secondHolder, TTL: longTTL, Wait: true})
	require.NoError(t, err)
	acquired(first, secondHolder, "the former head")
	require.Len(t, first.changed, 0, "a store whose follower acquired the lease no longer watches it")
}

// TestExpiryHandsOverToTheHeadAtOnce: tenure clients, each over a store
// of its own, campaign for a lease whose holder then shortens it to the
// agent's minimum and stops renewing (it crashed), after the followers
// were told it had a minute left. When Consul expires it, the head of the
// line takes it at once, long before the expiry it was told, with one
// acquisition; the follower behind hears of the new tenure and sends
// nothing.
func TestExpiryHandsOverToTheHeadAtOnce(t *testing.T) {
	t.Parallel()
	const followers = 2
	b := setup(t, consulstore.Config{})
	counts := linetest.NewTally()

	crashed := testutil.Holder(t, "crashed")
	g := b.acquire(t, crashed, longTTL)
	fs := make([]*linetest.Follower, followers)
	won := make(chan *tenure.Lease, followers)
	var told time.Time
	for i := range fs {
		fs[i] = linetest.NewFollower(peer(t, b), counts, b.name)
		c := linetest.RunClient(t, fs[i], fmt.Sprintf("follower-%d", i))
		testutil.Receive(t, fs[i].Subscribed, "the listener's subscription", eventTimeout)
		go func() {
			if l, err := c.Campaign(t.Context(), b.name); err == nil {
				won <- l
			}
		}()
		require.Equal(t, i+1, testutil.Receive(t, fs[i].Placed, "follower's place in line", eventTimeout))
		if at := testutil.Receive(t, fs[i].Told, "the expiry the follower was told", eventTimeout); told.IsZero() || at.Before(told) {
			told = at
		}
	}

	counts.Take()
	rs, err := b.store.Renew(t.Context(), []store.RenewParams{{Name: b.name, Holder: crashed, Token: g.Token, Seq: g.Seq, TTL: consulserver.ConsulSessionTTLMin}})
	require.NoError(t, err)
	require.True(t, rs[0].Renewed, "the holder's last renewal")
	renewed := time.Now()

	next := testutil.Receive(t, won, "a follower's lease", eventTimeout)
	t.Logf("failover from the crashed holder's last renewal (session TTL %s): %s", consulserver.ConsulSessionTTLMin, time.Since(renewed))
	require.True(t, time.Now().Before(told),
		"the takeover came when Consul expired the lease, before the earliest expiry a follower was told (%s)", told.Format(time.StampMilli))
	require.Equal(t, "follower-0", next.Holder().Label, "the head of the line took the lease")
	require.Greater(t, next.Token(), g.Token)
	require.Equal(t, next.Holder(), testutil.Receive(t, fs[1].Heard, "the new tenure's announcement", eventTimeout),
		"the follower behind hears of the new tenure")
	require.Equal(t, map[string]int{"follower-0": 1}, counts.Take(),
		"a failover costs the head's acquisition and nothing else")
}
