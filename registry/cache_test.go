package registry_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/store"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/registry"
)

// virtualClock is a monotonic clock the test moves by hand.
type virtualClock struct {
	mu  sync.Mutex
	now time.Time
}

func newVirtualClock() *virtualClock { return &virtualClock{now: time.Unix(1_000_000, 0)} }

func (c *virtualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *virtualClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// naiveCache is the seed's agent-list cache, kept here to show its bug.
// Each refresh keeps the agents that heartbeated "recently" (within the
// heartbeat interval plus a little slack, by the store's clock), and a
// lookup calls an agent dead when it is absent from the last refresh, or
// when its cached heartbeat has aged past StaleAfter since: absence and
// staleness in the cache are both taken for death.
type naiveCache struct {
	b           *bundle
	fresh       time.Duration
	staleAfter  time.Duration
	clock       *virtualClock
	refreshedAt time.Time
	ages        map[string]time.Duration
}

func (c *naiveCache) refresh(ctx context.Context) error {
	rows, err := c.b.pool.Query(ctx, `SELECT id, (extract(epoch FROM clock_timestamp() - heartbeat_at) * 1000000)::bigint
		FROM `+c.b.table("agents")+`
		WHERE NOT deregistered AND heartbeat_at > clock_timestamp() - $1::bigint * interval '1 microsecond'`,
		c.fresh.Microseconds())
	if err != nil {
		return err
	}
	defer rows.Close()
	c.ages = map[string]time.Duration{}
	for rows.Next() {
		var (
			id    string
			ageUS int64
		)
		if err := rows.Scan(&id, &ageUS); err != nil {
			return err
		}
		c.ages[id] = time.Duration(ageUS) * time.Microsecond
	}
	c.refreshedAt = c.clock.Now()
	return rows.Err()
}

func (c *naiveCache) dead(id string) bool {
	age, ok := c.ages[id]
	return !ok || age+c.clock.Now().Sub(c.refreshedAt) >= c.staleAfter
}

// TestSeedBugNaiveCacheEvictsHealthyAgents reproduces the seed's second bug
// and shows that Cache does not have it.
//
// The agent heartbeats every 10 s and one heartbeat is 4 s late, so its
// heartbeat's age sweeps 0–14 s. A cache refresh lands anywhere in that gap
// (the trials sweep it), a lookup follows somewhere within the next refresh
// period (random), and by then the late heartbeat has landed: the agent is
// healthy, its heartbeat four seconds old. The naive cache calls it dead
// whenever the refresh fell in the late heartbeat's last two seconds; Cache,
// whose entry is either a fresh positive or absent (and then asked of the
// store), never does.
func TestSeedBugNaiveCacheEvictsHealthyAgents(t *testing.T) {
	t.Parallel()
	b := setup(t, registry.Config{})
	ctx := ctxT(t)
	b.register(t, "healthy")

	const (
		interval      = registry.DefaultHeartbeatInterval
		late          = 4 * time.Second
		refreshPeriod = registry.DefaultHeartbeatInterval
		trials        = 280
	)
	clock := newVirtualClock()
	naive := &naiveCache{b: b, fresh: interval + 2*time.Second, staleAfter: registry.DefaultStaleAfter, clock: clock}
	ours, err := registry.NewCache(b.reg, registry.CacheConfig{})
	require.NoError(t, err)
	registry.SetCacheClock(ours, clock.Now)

	rng := rand.New(rand.NewPCG(1, 2))
	naiveDead, oursDead, oursFromCache := 0, 0, 0
	for i := range trials {
		clock.Advance(time.Hour) // nothing cached survives from the previous trial

		// The refresh happens at some instant of the late heartbeat's gap.
		ageAtRefresh := time.Duration(i) * (interval + late) / trials
		b.age(t, "healthy", ageAtRefresh)
		require.NoError(t, naive.refresh(ctx))
		if i%2 == 0 {
			// Half the trials warm ours too; the other half find it empty.
			require.NoError(t, ours.Refresh(ctx))
		}

		// A lookup some time later; meanwhile the late heartbeat landed.
		clock.Advance(time.Duration(rng.Int64N(int64(refreshPeriod))))
		b.age(t, "healthy", 4*time.Second)

		if naive.dead("healthy") {
			naiveDead++
		}
		before := registry.CacheStoreReads(ours)
		_, err := ours.Alive(ctx, "healthy")
		switch {
		case errors.Is(err, registry.ErrAgentDead):
			oursDead++
		case err != nil:
			t.Fatalf("trial %d: %v", i, err)
		}
		if registry.CacheStoreReads(ours) == before {
			oursFromCache++
		}
	}
	t.Logf("naive cache: %d of %d lookups (%.1f%%, about one in %.0f) called a healthy agent dead",
		naiveDead, trials, 100*float64(naiveDead)/trials, float64(trials)/float64(max(naiveDead, 1)))
	t.Logf("registry.Cache: %d of %d lookups called it dead; %d were served from the cache, the rest asked the store",
		oursDead, trials, oursFromCache)
	require.Positive(t, naiveDead, "the naive cache must show the seed's bug, or this test proves nothing")
	require.Zero(t, oursDead)
	require.Positive(t, oursFromCache, "the cache must serve positives, or it is not a cache")
}

func TestCache(t *testing.T) {
	t.Parallel()

	t.Run("PositiveServedWithinTTL", func(t *testing.T) {
		t.Parallel()
		b := setup(t, registry.Config{})
		ctx := ctxT(t)
		b.register(t, "a")
		clock := newVirtualClock()
		c, err := registry.NewCache(b.reg, registry.CacheConfig{TTL: 3 * time.Second})
		require.NoError(t, err)
		registry.SetCacheClock(c, clock.Now)

		_, err = c.Alive(ctx, "a")
		require.NoError(t, err)
		require.Equal(t, int64(1), registry.CacheStoreReads(c))
		clock.Advance(2 * time.Second)
		_, err = c.Alive(ctx, "a")
		require.NoError(t, err)
		require.Equal(t, int64(1), registry.CacheStoreReads(c), "served from the cache")
		clock.Advance(time.Second)
		_, err = c.Alive(ctx, "a")
		require.NoError(t, err)
		require.Equal(t, int64(2), registry.CacheStoreReads(c), "expired: asked again")

		c.Forget("a")
		_, err = c.Alive(ctx, "a")
		require.NoError(t, err)
		require.Equal(t, int64(3), registry.CacheStoreReads(c), "forgotten: asked again")
	})

	t.Run("PositiveNeverOutlivesTheAgent", func(t *testing.T) {
		t.Parallel()
		b := setup(t, registry.Config{})
		ctx := ctxT(t)
		b.register(t, "a")
		b.age(t, "a", registry.DefaultStaleAfter-time.Second)
		clock := newVirtualClock()
		c, err := registry.NewCache(b.reg, registry.CacheConfig{TTL: time.Minute})
		require.NoError(t, err)
		registry.SetCacheClock(c, clock.Now)

		_, err = c.Alive(ctx, "a")
		require.NoError(t, err)
		clock.Advance(1500 * time.Millisecond) // past the agent's stale point, well within the TTL
		b.age(t, "a", registry.DefaultStaleAfter+500*time.Millisecond)
		_, err = c.Alive(ctx, "a")
		var dead *registry.AgentDeadError
		require.ErrorAs(t, err, &dead, "not served past the moment the store calls it stale")
		require.Equal(t, int64(2), registry.CacheStoreReads(c))
	})

	t.Run("NegativesAreNeverCached", func(t *testing.T) {
		t.Parallel()
		b := setup(t, registry.Config{})
		ctx := ctxT(t)
		g := b.register(t, "a")
		b.age(t, "a", stale)
		c, err := registry.NewCache(b.reg, registry.CacheConfig{})
		require.NoError(t, err)
		registry.SetCacheClock(c, newVirtualClock().Now) // time stands still: only a cache could answer

		require.NoError(t, c.Refresh(ctx))
		for range 3 {
			_, err = c.Alive(ctx, "a")
			require.ErrorIs(t, err, registry.ErrAgentDead)
			_, err = c.Alive(ctx, "nobody")
			require.ErrorIs(t, err, registry.ErrUnknownAgent)
		}
		require.Equal(t, int64(7), registry.CacheStoreReads(c), "every negative was asked of the store")

		_, err = b.reg.Heartbeat(ctx, g)
		require.NoError(t, err)
		_, err = c.Alive(ctx, "a")
		require.NoError(t, err, "alive again at the very next lookup")
	})

	t.Run("StoreFailureIsNotDeath", func(t *testing.T) {
		t.Parallel()
		b := setup(t, registry.Config{})
		b.register(t, "a")
		c, err := registry.NewCache(b.reg, registry.CacheConfig{})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(ctxT(t))
		cancel()
		_, err = c.Alive(ctx, "a")
		require.ErrorIs(t, err, store.ErrUnavailable)
		require.NotErrorIs(t, err, registry.ErrAgentDead)
		require.ErrorIs(t, c.Refresh(ctx), store.ErrUnavailable)
	})
}
