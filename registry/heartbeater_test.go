package registry_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/store"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/registry"
)

// fast timings for the heartbeater tests; nothing in them depends on an
// agent staying alive for a while.
var fast = registry.Config{HeartbeatInterval: 20 * time.Millisecond, StaleAfter: 10 * time.Second}

// waitFor receives from ch or fails the test after a generous timeout.
func waitFor[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(30 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		var zero T
		return zero
	}
}

// trySend sends v on ch unless ch is full: callbacks must not block.
func trySend[T any](ch chan<- T, v T) {
	select {
	case ch <- v:
	default:
	}
}

func TestHeartbeaterRun(t *testing.T) {
	t.Parallel()
	b := setup(t, fast)
	g := b.register(t, "host")
	beats := make(chan registry.Beat, 16)
	hb, err := registry.NewHeartbeater(b.reg, g, registry.HeartbeaterConfig{
		OnHeartbeat:      func(beat registry.Beat) { trySend(beats, beat) },
		DeregisterOnStop: true,
	})
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(ctxT(t))
	done := make(chan error, 1)
	go func() { done <- hb.Run(ctx) }()

	var last registry.Beat
	for i := range 3 {
		last = waitFor(t, beats, "a heartbeat")
		require.Equal(t, g.Seq+int64(i)+1, last.Registration.Seq)
	}
	require.ErrorIs(t, hb.Run(ctx), store.ErrInvalid, "one Run at a time")
	a, err := b.reg.Agent(ctx, "host")
	require.NoError(t, err)
	require.True(t, a.Alive)
	require.GreaterOrEqual(t, a.Seq, last.Registration.Seq)

	cancel()
	require.NoError(t, waitFor(t, done, "Run to return"))
	a, err = b.reg.Agent(ctxT(t), "host")
	require.NoError(t, err)
	require.True(t, a.Deregistered, "deregistered on the way out")
	// Deregistration advanced the chain (by two when a heartbeat whose
	// outcome Run could not learn was cut short by the cancellation).
	require.Greater(t, a.Seq, hb.Registration().Seq)
}

func TestHeartbeaterLosesInheritedIdentity(t *testing.T) {
	t.Parallel()
	b := setup(t, fast)
	ctx := ctxT(t)

	// The old process was paused past StaleAfter; a new one took the id.
	old := b.register(t, "host")
	b.age(t, "host", time.Minute)
	heir := b.register(t, "host")

	oldHB, err := registry.NewHeartbeater(b.reg, old, registry.HeartbeaterConfig{DeregisterOnStop: true})
	require.NoError(t, err)
	err = oldHB.Run(ctx)
	var conflict *registry.IdentityConflictError
	require.ErrorAs(t, err, &conflict, "the old process learns it lost the identity")
	require.Equal(t, heir.Instance, conflict.CurrentInstance)

	conflicts := make(chan registry.Conflict, 1)
	heirHB, err := registry.NewHeartbeater(b.reg, heir, registry.HeartbeaterConfig{
		OnConflict: func(c registry.Conflict) { trySend(conflicts, c) },
	})
	require.NoError(t, err)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- heirHB.Run(runCtx) }()
	c := waitFor(t, conflicts, "the heir to hear of the conflict")
	cancel()
	require.NoError(t, waitFor(t, done, "Run to return"))
	require.Equal(t, registry.Conflict{Agent: "host", Count: 1, Instance: old.Instance, At: c.At}, c)
	require.False(t, c.At.IsZero())

	a, err := b.reg.Agent(ctx, "host")
	require.NoError(t, err)
	require.Equal(t, heir.Instance, a.Instance, "the heir kept the identity")
	require.False(t, a.Deregistered)
}

func TestHeartbeaterRetriesWhenUnavailable(t *testing.T) {
	t.Parallel()
	b := setup(t, fast)
	g := b.register(t, "host")
	// Take the table away for a moment by renaming it: heartbeats fail
	// with an error the heartbeater retries, and succeed once it is back.
	ctx := ctxT(t)
	_, err := b.pool.Exec(ctx, "ALTER TABLE "+b.table("agents")+" RENAME TO r_agents_away")
	require.NoError(t, err)

	errs := make(chan error, 64)
	beats := make(chan registry.Beat, 64)
	hb, err := registry.NewHeartbeater(b.reg, g, registry.HeartbeaterConfig{
		OnError:     func(err error) { trySend(errs, err) },
		OnHeartbeat: func(beat registry.Beat) { trySend(beats, beat) },
	})
	require.NoError(t, err)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- hb.Run(runCtx) }()

	for err := waitFor(t, errs, "a failed heartbeat"); !errors.Is(err, store.ErrNotMigrated); err = waitFor(t, errs, "a failed heartbeat") {
		require.ErrorIs(t, err, store.ErrUnavailable)
	}
	_, err = b.pool.Exec(ctx, "ALTER TABLE "+pgx.Identifier{b.cfg.Schema, "r_agents_away"}.Sanitize()+" RENAME TO r_agents")
	require.NoError(t, err)
	beat := waitFor(t, beats, "a heartbeat after the table came back")
	require.Greater(t, beat.Registration.Seq, g.Seq)
	cancel()
	require.NoError(t, waitFor(t, done, "Run to return"))
}
