package storekit_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/storekit"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

func TestGate(t *testing.T) {
	t.Parallel()
	g := storekit.NewGate("kitstore", "kitstore.New")
	require.NoError(t, g.Check("acquire"))
	require.NoError(t, g.Begin(t.Context(), "acquire"))
	done, cancel := context.WithCancel(t.Context())
	cancel()
	err := g.Begin(done, "acquire")
	require.ErrorIs(t, err, store.ErrUnavailable)
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, "kitstore: acquire not attempted: tenure: store unavailable: context canceled", err.Error())

	require.True(t, g.Close())
	require.False(t, g.Close(), "only the first Close shuts the gate")
	require.True(t, g.Closed())
	require.ErrorIs(t, g.Context().Err(), context.Canceled)
	err = g.Check("renew")
	require.ErrorIs(t, err, store.ErrClosed)
	require.Equal(t, "kitstore: renew on a closed store; create a new one with kitstore.New: tenure: closed", err.Error())
	require.ErrorIs(t, g.Begin(t.Context(), "get"), store.ErrClosed)
}

func TestListen(t *testing.T) {
	t.Parallel()

	t.Run("NilNotify", func(t *testing.T) {
		t.Parallel()
		g := storekit.NewGate("kitstore", "kitstore.New")
		require.ErrorIs(t, g.Listen(t.Context(), nil, func(context.Context, func(store.Notice)) { t.Error("loop ran") }), store.ErrInvalid)
	})

	t.Run("ClosedBefore", func(t *testing.T) {
		t.Parallel()
		g := storekit.NewGate("kitstore", "kitstore.New")
		g.Close()
		require.ErrorIs(t, g.Listen(t.Context(), func(store.Notice) {}, func(context.Context, func(store.Notice)) { t.Error("loop ran") }), store.ErrClosed)
	})

	t.Run("CloseEndsLoop", func(t *testing.T) {
		t.Parallel()
		g := storekit.NewGate("kitstore", "kitstore.New")
		err := g.Listen(t.Context(), func(store.Notice) {}, func(ctx context.Context, notify func(store.Notice)) {
			g.Close()
			<-ctx.Done()
		})
		require.ErrorIs(t, err, store.ErrClosed)
	})

	t.Run("ContextEndsLoop", func(t *testing.T) {
		t.Parallel()
		g := storekit.NewGate("kitstore", "kitstore.New")
		ctx, cancel := context.WithCancel(t.Context())
		var got []store.Notice
		err := g.Listen(ctx, func(n store.Notice) { got = append(got, n) }, func(ctx context.Context, notify func(store.Notice)) {
			notify(store.Notice{})
			cancel()
			<-ctx.Done()
		})
		require.ErrorIs(t, err, context.Canceled)
		require.Equal(t, []store.Notice{{}}, got)
		require.False(t, g.Closed())
	})

	t.Run("LoopEndingEarlyIsAnError", func(t *testing.T) {
		t.Parallel()
		g := storekit.NewGate("kitstore", "kitstore.New")
		require.ErrorIs(t, g.Listen(t.Context(), func(store.Notice) {}, func(context.Context, func(store.Notice)) {}), store.ErrUnavailable)
	})
}

func TestLeaseMap(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_000_000, 0)
	leases := map[string]int{"b": 2, "a": 1, "c": 3}
	record := func(l int, name string, at time.Time) store.Record {
		return store.Record{Grant: store.Grant{Name: name, Seq: int64(l)}, AcquiredAt: at}
	}

	r, err := storekit.Lookup("kitstore", leases, "b", now, record)
	require.NoError(t, err)
	require.Equal(t, store.Record{Grant: store.Grant{Name: "b", Seq: 2}, AcquiredAt: now}, r)
	_, err = storekit.Lookup("kitstore", leases, "absent", now, record)
	require.ErrorIs(t, err, store.ErrNotFound)
	require.EqualError(t, err, `kitstore: lease "absent": `+store.ErrNotFound.Error())

	records := storekit.Records(leases, now, record)
	require.Len(t, records, 3)
	for i, name := range []string{"a", "b", "c"} {
		require.Equal(t, name, records[i].Name)
		require.Equal(t, int64(i+1), records[i].Seq)
		require.Equal(t, now, records[i].AcquiredAt)
	}
	require.Empty(t, storekit.Records(map[string]int{}, now, record))
}

func TestEach(t *testing.T) {
	t.Parallel()
	var running, most atomic.Int64
	calls := make([]int, 20)
	err := storekit.Each(len(calls), 3, func(i int) error {
		n := running.Add(1)
		defer running.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		calls[i]++
		if i == 7 || i == 12 {
			return fmt.Errorf("call %d failed", i)
		}
		return nil
	})
	require.EqualError(t, err, "call 7 failed", "the first error by index")
	require.LessOrEqual(t, most.Load(), int64(3), "at most limit calls at once")
	for i, c := range calls {
		require.Equal(t, 1, c, "call %d made once, errors or not", i)
	}
	require.NoError(t, storekit.Each(0, 3, func(int) error { return errors.New("never called") }))
}
