package tenure_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure"
	"github.com/tenure-dev/tenure/internal/testserver/pgserver"
	"github.com/tenure-dev/tenure/internal/testserver/redisserver"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/memstore"
)

// heard records the announcements a client reports hearing to its
// Observer, its subscriptions as the empty name.
type heard struct{ *testutil.Notifications }

func (h heard) Handle(e tenure.Event) {
	switch e.Kind {
	case tenure.EventNotified:
		h.Notify(store.Notice{Name: e.Name})
	case tenure.EventSubscribed:
		h.Notify(store.Notice{})
	}
}

// refusing passes a store through and reports on refused the name of
// each acquisition it refuses.
type refusing struct {
	store.Store
	refused chan string
}

func (s *refusing) Acquire(ctx context.Context, p store.AcquireParams) (store.Grant, error) {
	g, err := s.Store.Acquire(ctx, p)
	if held := (*store.HeldError)(nil); errors.As(err, &held) {
		select {
		case s.refused <- p.Name:
		default:
		}
	}
	return g, err
}

func (s *refusing) Listen(ctx context.Context, notify func(store.Notice)) error {
	return s.Store.(store.Notifier).Listen(ctx, notify)
}

// subscribingRefusing is a refusing over a [store.Subscriber], which
// passes its subscriptions on too.
type subscribingRefusing struct{ *refusing }

func (s subscribingRefusing) Subscribe() store.Subscription {
	return s.Store.(store.Subscriber).Subscribe()
}

// newRefusing wraps st, keeping its announcements and subscriptions.
func newRefusing(st store.Store) (store.Store, <-chan string) {
	r := &refusing{Store: st, refused: make(chan string, 16)}
	if _, ok := st.(store.Subscriber); ok {
		return subscribingRefusing{r}, r.refused
	}
	return r, r.refused
}

// TestClientsSharingAStoreHearOnlyTheirLeases: of many clients sharing
// one store, each hears only of the leases it tracks (PostgreSQL hands
// each listener only the names it follows; over the other stores the
// client drops the rest before its loop sees them), and a campaign still
// takes a lease as soon as its release is announced, not at its expiry.
func TestClientsSharingAStoreHearOnlyTheirLeases(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		open func(t *testing.T) store.Store
	}{
		{"Memory", func(t *testing.T) store.Store {
			m := memstore.New(memstore.Config{})
			t.Cleanup(func() { _ = m.Close() })
			return m
		}},
		{"Postgres", func(t *testing.T) store.Store {
			return pgserver.PostgresHarness{Owner: pgserver.PostgresPool(t, pgx.QueryExecModeCacheStatement, "")}.NewStore(t)
		}},
		{"Redis", func(t *testing.T) store.Store {
			return redisserver.RedisHarness{Client: redisserver.RedisClient(t)}.NewStore(t)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			const (
				clients = 40
				each    = 3
				ttl     = time.Minute
				timeout = ttl / 3 // an expiry-driven handover takes a TTL
			)
			st := tc.open(t)
			waiter, refused := newRefusing(st)
			cs := make([]*tenure.Client, clients)
			hs := make([]heard, clients)
			tracked := make([]map[string]bool, clients)
			for i := range cs {
				own := st
				if i == 1 {
					own = waiter
				}
				hs[i] = heard{testutil.NewNotifications()}
				c, err := tenure.New(own, tenure.Config{Label: fmt.Sprintf("client-%d", i), TTL: ttl, Observer: hs[i]})
				require.NoError(t, err)
				ctx, stop := context.WithCancel(context.Background())
				ran := make(chan error, 1)
				go func() { ran <- c.Run(ctx) }()
				t.Cleanup(func() { stop(); require.NoError(t, <-ran) })
				cs[i], tracked[i] = c, map[string]bool{}
				require.True(t, hs[i].Wait("", timeout), "client %d subscribed", i)
			}
			acquire := func(i int, name string) *tenure.Lease {
				t.Helper()
				l, err := cs[i].Acquire(t.Context(), name)
				require.NoError(t, err)
				tracked[i][name] = true
				return l
			}
			for i := range cs {
				for j := range each {
					acquire(i, fmt.Sprintf("client-%d-lease-%d", i, j))
				}
			}

			held := acquire(0, "shared")
			won := make(chan *tenure.Lease, 1)
			tracked[1]["shared"] = true
			go func() {
				if l, err := cs[1].Campaign(t.Context(), "shared"); err == nil {
					won <- l
				}
			}()
			require.Equal(t, "shared", testutil.Receive(t, refused, "the campaign's refusal", timeout))
			require.NoError(t, held.Release(t.Context()))
			testutil.Receive(t, won, "the lease, handed over on its release", timeout)
			require.NotZero(t, hs[1].Count("shared"), "the campaign heard of the release")

			// Each client is told last of a lease of its own, released
			// behind its back: announcements come in order, so whatever it
			// was told of other names came before.
			for i := range cs {
				mark := acquire(i, fmt.Sprintf("client-%d-mark", i))
				require.NoError(t, st.Release(t.Context(), store.ReleaseParams{Name: mark.Name(), Holder: mark.Holder(), Token: mark.Token()}))
			}
			for i, h := range hs {
				require.True(t, h.Wait(fmt.Sprintf("client-%d-mark", i), timeout), "client %d heard of its own lease", i)
				for _, n := range h.All() {
					require.True(t, n.Name == "" || tracked[i][n.Name], "client %d heard of %q, which it does not track", i, n.Name)
				}
			}
		})
	}
}
