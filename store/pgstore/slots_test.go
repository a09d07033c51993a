package pgstore_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure"
	"github.com/tenure-dev/tenure/internal/testserver/pgserver"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store"
)

// TestSlotsSemaphore: five clients, each on a store and pool of its own
// (as five processes would be), take turns at three slots of one name
// with DoSlot, five times each: never more than three run at once, every
// turn runs (the waiters hear of releases: the TTL of a minute never
// runs out), and each slot's tokens grow from one tenure to the next.
func TestSlotsSemaphore(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, true)
	const (
		clients = 5
		turns   = 5
		slots   = 3
	)
	var (
		active, most atomic.Int32
		mu           sync.Mutex
		last         = make(map[int]tenure.Token)
		errs         = make(chan error, clients*turns)
		wg           sync.WaitGroup
	)
	for range clients {
		pool := pgserver.PostgresPool(t, pgx.QueryExecModeCacheStatement, "")
		c, err := tenure.New(newStore(t, pool, b.cfg), tenure.Config{Label: "worker", TTL: time.Minute})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		ran := make(chan error, 1)
		go func() { ran <- c.Run(ctx) }()
		t.Cleanup(func() {
			cancel()
			require.NoError(t, <-ran)
		})
		wg.Go(func() {
			for range turns {
				err := c.DoSlot(t.Context(), "jobs", slots, func(ctx context.Context, l *tenure.Lease) error {
					n := active.Add(1)
					defer active.Add(-1)
					for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
					}
					k, _ := l.Slot()
					mu.Lock()
					prev := last[k]
					last[k] = l.Token()
					mu.Unlock()
					if l.Token() <= prev {
						return fmt.Errorf("slot %d: token %d after %d; a slot's tokens must grow", k, l.Token(), prev)
					}
					// Hold the slot a little, so that turns overlap.
					time.Sleep(20 * time.Millisecond)
					return nil
				})
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.LessOrEqual(t, most.Load(), int32(slots), "at most three hold at once")
	require.Equal(t, int32(slots), most.Load(), "five clients for three slots fill them")
	require.Len(t, last, slots)
}

// countTracer counts the statements a pool sends.
type countTracer struct{ n atomic.Int32 }

func (c *countTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (c *countTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TestAcquireSlotIsOneStatement: taking the last free of three slots, and
// being refused when all are held, are one statement each.
func TestAcquireSlotIsOneStatement(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, true)
	for k := range 2 {
		b.acquire(t, tenure.SlotName("jobs", k), testutil.Holder(t, fmt.Sprintf("h%d", k)), time.Minute)
	}
	ct := &countTracer{}
	cfg, err := pgxpool.ParseConfig(testutil.PostgresURL())
	require.NoError(t, err)
	cfg.ConnConfig.Tracer = ct
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	s := newStore(t, pool, b.cfg)
	p := store.SlotParams{Name: "jobs", Slots: 3, Holder: testutil.Holder(t, "me"), TTL: time.Minute}
	g, err := s.AcquireSlot(t.Context(), p)
	require.NoError(t, err)
	require.Equal(t, 2, g.Slot)
	require.Equal(t, int32(1), ct.n.Load(), "the last free slot is taken in one statement")
	_, err = s.AcquireSlot(t.Context(), p)
	var all *store.SlotsHeldError
	require.ErrorAs(t, err, &all)
	require.Equal(t, int32(2), ct.n.Load(), "all held is one statement too")
}
