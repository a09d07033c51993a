package registry_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/store"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/registry"
)

func TestRegisterAndHeartbeat(t *testing.T) {
	t.Parallel()
	modes := map[string]pgx.QueryExecMode{
		"CacheStatement": pgx.QueryExecModeCacheStatement,
		"SimpleProtocol": pgx.QueryExecModeSimpleProtocol,
	}
	for name, mode := range modes {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setupMode(t, registry.Config{}, mode)
			ctx := ctxT(t)

			g, err := b.reg.Register(ctx, registry.RegisterParams{
				ID: "host-1", Address: "10.0.0.1:7000",
				Labels:   map[string]string{"zone": "eu-1", "disk": "nvme"},
				Capacity: json.RawMessage(`{"cpu": 64, "disk_gb": 2000}`),
			})
			require.NoError(t, err)
			require.Equal(t, "host-1", g.ID)
			require.NotEmpty(t, g.Instance)
			require.Equal(t, int64(1), g.Seq)
			require.Equal(t, registry.DefaultHeartbeatInterval, g.HeartbeatInterval)
			require.Equal(t, registry.DefaultStaleAfter, g.StaleAfter)

			a, err := b.reg.Agent(ctx, "host-1")
			require.NoError(t, err)
			require.True(t, a.Alive)
			require.Equal(t, g.Instance, a.Instance)
			require.Equal(t, "10.0.0.1:7000", a.Address)
			require.Equal(t, map[string]string{"zone": "eu-1", "disk": "nvme"}, a.Labels)
			require.JSONEq(t, `{"cpu": 64, "disk_gb": 2000}`, string(a.Capacity))
			require.Less(t, a.HeartbeatAge, 5*time.Second)
			require.Equal(t, registry.DefaultStaleAfter, a.StaleAfter)

			b.age(t, "host-1", 4*time.Second)
			beat, err := b.reg.Heartbeat(ctx, g)
			require.NoError(t, err)
			require.Equal(t, int64(2), beat.Registration.Seq)
			require.GreaterOrEqual(t, beat.Gap, 4*time.Second)
			require.False(t, beat.Revived)
			require.Zero(t, beat.NewConflicts)

			b.age(t, "host-1", stale)
			beat, err = b.reg.Heartbeat(ctx, beat.Registration)
			require.NoError(t, err, "an agent that was stale comes back with its own registration")
			require.True(t, beat.Revived)

			agents, err := b.reg.Agents(ctx)
			require.NoError(t, err)
			require.Len(t, agents, 1)
			require.True(t, agents[0].Alive)
			require.Equal(t, int64(3), agents[0].Seq)
			require.GreaterOrEqual(t, agents[0].LastGap, stale)

			require.NoError(t, b.reg.Deregister(ctx, beat.Registration))
			a, err = b.reg.Agent(ctx, "host-1")
			require.NoError(t, err)
			require.False(t, a.Alive)
			require.True(t, a.Deregistered)

			_, err = b.reg.Agent(ctx, "host-2")
			require.ErrorIs(t, err, registry.ErrUnknownAgent)

			// The ownership statements, in this mode too.
			b.register(t, "host-2")
			b.register(t, "host-3")
			own, err := b.reg.Place(ctx, "res", registry.PlaceParams{Metadata: json.RawMessage(`{"m": true}`)})
			require.NoError(t, err)
			require.True(t, own.Placed)
			_, err = b.reg.Owner(ctx, "res")
			require.NoError(t, err)
			to := "host-2"
			if own.Agent.ID == to {
				to = "host-3"
			}
			_, err = b.reg.Reassign(ctx, registry.ReassignParams{Resource: "res", From: own.Agent.ID, To: to, Reason: "test"})
			require.NoError(t, err)
			require.NoError(t, b.reg.Remove(ctx, registry.RemoveParams{Resource: "res", Agent: to, Reason: "test"}))
			history, err := b.reg.Reassignments(ctx, "res")
			require.NoError(t, err)
			require.Len(t, history, 2)
			c, err := registry.NewCache(b.reg, registry.CacheConfig{})
			require.NoError(t, err)
			require.NoError(t, c.Refresh(ctx))
			_, err = c.Alive(ctx, to)
			require.NoError(t, err)
		})
	}
}

func TestIdentity(t *testing.T) {
	t.Parallel()

	t.Run("LiveInstanceIsNotOverwritten", func(t *testing.T) {
		t.Parallel()
		b := setup(t, registry.Config{})
		ctx := ctxT(t)
		first := b.register(t, "host")
		b.age(t, "host", 10*time.Second)

		_, err := b.reg.Register(ctx, registry.RegisterParams{ID: "host", Address: "elsewhere:1"})
		var inUse *registry.IdentityInUseError
		require.ErrorAs(t, err, &inUse)
		require.ErrorIs(t, err, registry.ErrIdentityInUse)
		require.Equal(t, first.Instance, inUse.Instance)
		require.InDelta(t, float64(20*time.Second), float64(inUse.Remaining), float64(2*time.Second))

		a, err := b.reg.Agent(ctx, "host")
		require.NoError(t, err)
		require.Equal(t, first.Instance, a.Instance, "the live row was left alone")
		require.Equal(t, "host.test:7000", a.Address)
		_, err = b.reg.Heartbeat(ctx, first)
		require.NoError(t, err, "the live instance keeps its chain")
	})

	t.Run("StaleInstanceIsTakenOverAndToldSo", func(t *testing.T) {
		t.Parallel()
		b := setup(t, registry.Config{})
		ctx := ctxT(t)
		old := b.register(t, "host")
		b.age(t, "host", stale)

		heir, err := b.reg.Register(ctx, registry.RegisterParams{ID: "host", Address: "host.test:7001"})
		require.NoError(t, err)
		require.NotEqual(t, old.Instance, heir.Instance)
		require.Equal(t, old.Seq+1, heir.Seq, "the chain of an id continues across instances")

		// The old instance wakes up and heartbeats: refused, not merged.
		_, err = b.reg.Heartbeat(ctx, old)
		var conflict *registry.IdentityConflictError
		require.ErrorAs(t, err, &conflict)
		require.ErrorIs(t, err, registry.ErrIdentityConflict)
		require.Equal(t, heir.Instance, conflict.CurrentInstance)
		require.Contains(t, err.Error(), "stop acting as this agent")
		require.ErrorIs(t, b.reg.Deregister(ctx, old), registry.ErrIdentityConflict)

		// The heir hears of it at its next heartbeat.
		beat, err := b.reg.Heartbeat(ctx, heir)
		require.NoError(t, err)
		require.Equal(t, int64(2), beat.NewConflicts)
		require.Equal(t, old.Instance, beat.LastConflictInstance)
		beat, err = b.reg.Heartbeat(ctx, beat.Registration)
		require.NoError(t, err)
		require.Zero(t, beat.NewConflicts)
		require.Equal(t, int64(2), beat.Conflicts)

		a, err := b.reg.Agent(ctx, "host")
		require.NoError(t, err)
		require.Equal(t, heir.Instance, a.Instance)
		require.Equal(t, "host.test:7001", a.Address)
		require.Equal(t, int64(2), a.Conflicts)
	})

	t.Run("DeregisteredIdIsFreeAtOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t, registry.Config{})
		ctx := ctxT(t)
		old := b.register(t, "host")
		require.NoError(t, b.reg.Deregister(ctx, old))
		next := b.register(t, "host")
		require.NotEqual(t, old.Instance, next.Instance)
		_, err := b.reg.Heartbeat(ctx, old)
		require.ErrorIs(t, err, registry.ErrIdentityConflict)
	})

	t.Run("CloneLosesTheChain", func(t *testing.T) {
		t.Parallel()
		b := setup(t, registry.Config{})
		ctx := ctxT(t)
		g := b.register(t, "host")
		clone := g // a restored snapshot: same instance, same seq

		_, err := b.reg.Heartbeat(ctx, g)
		require.NoError(t, err)
		_, err = b.reg.Heartbeat(ctx, clone)
		var conflict *registry.IdentityConflictError
		require.ErrorAs(t, err, &conflict)
		require.Equal(t, g.Instance, conflict.CurrentInstance)
		require.Equal(t, g.Seq+1, conflict.CurrentSeq)
		require.Contains(t, err.Error(), "a clone")
	})

	t.Run("LostReplyIsNotAClone", func(t *testing.T) {
		t.Parallel()
		b := setup(t, registry.Config{})
		ctx := ctxT(t)
		g := b.register(t, "host")
		clone := g

		lost, err := registry.HeartbeatLosingReply(ctx, b.reg, g)
		require.NoError(t, err)
		lost, err = registry.HeartbeatLosingReply(ctx, b.reg, lost)
		require.NoError(t, err, "a second heartbeat after a lost reply is recognised too")
		beat, err := b.reg.Heartbeat(ctx, lost)
		require.NoError(t, err, "the sender of the lost heartbeats is recognised")
		require.Equal(t, g.Seq+3, beat.Registration.Seq)

		_, err = b.reg.Heartbeat(ctx, clone)
		require.ErrorIs(t, err, registry.ErrIdentityConflict, "a clone without the nonce is still refused")
		_, err = b.reg.Heartbeat(ctx, lost)
		require.ErrorIs(t, err, registry.ErrIdentityConflict, "the lost heartbeats are forgotten once the chain moved on")
	})

	t.Run("RetryWithSameInstance", func(t *testing.T) {
		t.Parallel()
		b := setup(t, registry.Config{})
		ctx := ctxT(t)
		instance := registry.RegisterInstance()
		p := registry.RegisterParams{ID: "host", Address: "a:1", Instance: instance}
		first, err := b.reg.Register(ctx, p)
		require.NoError(t, err)
		second, err := b.reg.Register(ctx, p)
		require.NoError(t, err, "a retry of an unknown outcome refreshes the row")
		require.Equal(t, instance, second.Instance)
		require.Equal(t, first.Seq+1, second.Seq)
	})

	t.Run("MissingRow", func(t *testing.T) {
		t.Parallel()
		b := setup(t, registry.Config{})
		ctx := ctxT(t)
		g := b.register(t, "host")
		_, err := b.pool.Exec(ctx, "DELETE FROM "+b.table("agents"))
		require.NoError(t, err)
		_, err = b.reg.Heartbeat(ctx, g)
		require.ErrorIs(t, err, registry.ErrIdentityConflict)
		require.ErrorIs(t, err, registry.ErrUnknownAgent)
	})

	t.Run("ConcurrentRegistrationsOneWinner", func(t *testing.T) {
		t.Parallel()
		b := setup(t, registry.Config{})
		ctx := ctxT(t)
		const n = 8
		errs := make(chan error, n)
		for range n {
			go func() {
				_, err := b.reg.Register(ctx, registry.RegisterParams{ID: "host", Address: "a:1"})
				errs <- err
			}()
		}
		won := 0
		for range n {
			err := <-errs
			if err == nil {
				won++
				continue
			}
			require.ErrorIs(t, err, registry.ErrIdentityInUse)
		}
		require.Equal(t, 1, won)
	})
}

func TestUnavailableIsNotAVerdict(t *testing.T) {
	t.Parallel()
	b := setup(t, registry.Config{})
	g := b.register(t, "host")
	ctx, cancel := context.WithCancel(ctxT(t))
	cancel()

	_, err := b.reg.Owner(ctx, "r")
	require.ErrorIs(t, err, store.ErrUnavailable)
	require.False(t, errors.Is(err, registry.ErrNoOwner) || errors.Is(err, registry.ErrOwnerDead))
	beat, err := b.reg.Heartbeat(ctx, g)
	require.ErrorIs(t, err, store.ErrUnavailable)
	require.Equal(t, g.Seq, beat.Registration.Seq)
	_, err = b.reg.Place(ctx, "r", registry.PlaceParams{})
	require.ErrorIs(t, err, store.ErrUnavailable)

	// A schema that was never migrated says so.
	unmigrated, err := registry.New(b.pool, registry.Config{Schema: b.cfg.Schema, TablePrefix: "nothing_here_"})
	require.NoError(t, err)
	_, err = unmigrated.Agents(ctxT(t))
	require.ErrorIs(t, err, store.ErrNotMigrated)
}
