package reconnect_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/reconnect"
)

func TestLoopBacksOffAndResetsAfterAWorkingConnection(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const lo, hi = 50 * time.Millisecond, 800 * time.Millisecond
		ctx, cancel := context.WithCancel(t.Context())
		var starts []time.Time
		reconnect.Loop(ctx, lo, hi, func(context.Context) bool {
			starts = append(starts, time.Now())
			switch len(starts) {
			case 8:
				time.Sleep(2 * hi) // a connection that served for a while
				return true
			case 12:
				cancel()
			}
			return false
		})
		require.Len(t, starts, 12)
		var gaps []time.Duration
		for i := 1; i < len(starts); i++ {
			gaps = append(gaps, starts[i].Sub(starts[i-1]))
		}
		for i, want := range []time.Duration{lo, 2 * lo, 4 * lo, 8 * lo, hi, hi, hi} {
			require.GreaterOrEqual(t, gaps[i], want/2, "wait %d", i)
			require.LessOrEqual(t, gaps[i], want, "wait %d", i)
		}
		require.LessOrEqual(t, gaps[7]-2*hi, lo, "a connection that served resets the backoff")
	})
}

func TestLoopStopsWhenContextEnds(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		calls := 0
		reconnect.Loop(ctx, 10*time.Millisecond, 100*time.Millisecond, func(context.Context) bool {
			calls++
			return false
		})
		require.Positive(t, calls)
		require.Less(t, calls, 30, "backoff keeps the attempts few")
		require.ErrorIs(t, ctx.Err(), context.DeadlineExceeded)
	})
}
