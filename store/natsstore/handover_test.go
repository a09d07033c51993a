package natsstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure"
	"github.com/tenure-dev/tenure/internal/testserver/natsserver"
	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/natsstore"
)

// follower is a real store, on a connection of its own, that counts its
// acquisition attempts, reports each refusal, and reports when its
// listener has heard the new tenure of a lease.
type follower struct {
	*natsstore.Store // Listen and the rest are the store's own
	attempts         atomic.Int32
	held             chan struct{}
	heardAcquired    chan string
	subscribed       chan struct{}
}

func (f *follower) Acquire(ctx context.Context, p store.AcquireParams) (store.Grant, error) {
	f.attempts.Add(1)
	g, err := f.Store.Acquire(ctx, p)
	if errors.Is(err, store.ErrHeld) {
		f.held <- struct{}{}
	}
	return g, err
}

func (f *follower) Listen(ctx context.Context, notify func(store.Notice)) error {
	return f.Store.Listen(ctx, func(n store.Notice) {
		notify(n)
		if n.Name == "" {
			select {
			case f.subscribed <- struct{}{}:
			default:
			}
		}
		if n.Kind == store.NoticeAcquired {
			select {
			case f.heardAcquired <- n.Holder.Label:
			default:
			}
		}
	})
}

func runClient(t *testing.T, s store.Store, label string) *tenure.Client {
	t.Helper()
	c, err := tenure.New(s, tenure.Config{Label: label, TTL: time.Minute})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = c.Run(ctx) }) // Run returns nil once ctx ends.
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	return c
}

// TestHandoverToTheHeadOfTheLine: four followers, each a process of its
// own (its own connection and store), wait in line for a lease held with
// a TTL of one minute. At the release, the follower first in line (the
// first refused) takes the lease over, and the others, told by the
// release who is next and then of the new tenure, wait for its expiry:
// the handover costs the followers one acquisition, not one each.
func TestHandoverToTheHeadOfTheLine(t *testing.T) {
	t.Parallel()
	h := natsserver.NatsHarness{Server: natsserver.SharedNats(t)}
	_, cfg := h.Bucket(t)
	open := func() *natsstore.Store {
		js, err := jetstream.New(h.Server.Conn(t))
		require.NoError(t, err)
		s, err := natsstore.Open(t.Context(), js, cfg)
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	name := "nightly"
	leader := runClient(t, open(), "leader")
	lease, err := leader.Acquire(t.Context(), name)
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	var (
		followers []*follower
		wg        sync.WaitGroup
		won       = make(chan string, 4)
	)
	defer wg.Wait()
	for i := range 4 {
		f := &follower{Store: open(), held: make(chan struct{}, 16), heardAcquired: make(chan string, 1), subscribed: make(chan struct{}, 1)}
		followers = append(followers, f)
		label := fmt.Sprintf("follower-%d", i)
		c := runClient(t, f, label)
		select {
		case <-f.subscribed: // it will hear the release and the new tenure
		case <-ctx.Done():
			t.Fatalf("follower %d never subscribed", i)
		}
		wg.Go(func() {
			if l, err := c.Campaign(ctx, name); err == nil && l != nil {
				won <- label
			}
		})
		select {
		case <-f.held: // in line, behind those before it
		case <-ctx.Done():
			t.Fatalf("follower %d was never refused", i)
		}
	}
	before := make([]int32, len(followers))
	for i, f := range followers {
		before[i] = f.attempts.Load()
	}
	require.NoError(t, lease.Release(t.Context()))
	var winner string
	select {
	case winner = <-won:
	case <-ctx.Done():
		t.Fatal("no follower took the lease over")
	}
	require.Equal(t, "follower-0", winner, "the first in line takes the lease")
	for i, f := range followers[1:] {
		select {
		case got := <-f.heardAcquired:
			require.Equal(t, winner, got)
		case <-ctx.Done():
			t.Fatalf("follower %d did not hear of the new tenure", i+1)
		}
	}
	// Each follower behind heard the new tenure, after which its next
	// try is at that tenure's expiry, a minute away.
	tries := 0
	for i, f := range followers {
		tries += int(f.attempts.Load() - before[i])
	}
	require.Equal(t, 1, tries, "acquisitions by the followers at the release")
	cancel()
}
