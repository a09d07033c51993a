package redisstore_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/fence/redisfence"
	"github.com/tenure-dev/tenure/internal/testserver/redisserver"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/redisstore"
)

// TestTokenIsClockFloored checks token = max(counter + 1, TIME in
// microseconds), stored back in the counter, and that a renewal keeps it.
func TestTokenIsClockFloored(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	h := testutil.Holder(t, "holder")
	micros := func() int64 {
		tm, err := b.client.Time(ctx).Result()
		require.NoError(t, err)
		return tm.UnixMicro()
	}

	before := micros()
	g := acquire(t, b.store, "job", h, time.Minute)
	after := micros()
	require.GreaterOrEqual(t, int64(g.Token), before, "a fresh counter: the token is the server's clock")
	require.LessOrEqual(t, int64(g.Token), after)
	require.Equal(t, strconv.FormatInt(int64(g.Token), 10), b.client.Get(ctx, b.keys.Counter).Val(), "the token is stored back in the counter")

	rs, err := b.store.Renew(ctx, []store.RenewParams{{Name: "job", Holder: h, Token: g.Token, Seq: g.Seq, TTL: time.Minute}})
	require.NoError(t, err)
	require.True(t, rs[0].Renewed)
	require.Equal(t, g.Token, rs[0].Grant.Token, "a renewal keeps the token")
	release(t, b.store, rs[0].Grant)

	// A counter ahead of the clock hands out counter + 1.
	ahead := after + 1e12
	require.NoError(t, b.client.Set(ctx, b.keys.Counter, ahead, 0).Err())
	g2 := acquire(t, b.store, "job", h, time.Minute)
	require.Equal(t, store.Token(ahead+1), g2.Token)
	release(t, b.store, g2)

	// Exact up to 2^53 - 1; refused beyond, where doubles cannot count.
	const maxExact = 1<<53 - 1
	require.NoError(t, b.client.Set(ctx, b.keys.Counter, maxExact-1, 0).Err())
	fresh := newStore(t, b.client, b.keys.Prefix) // has seen no token above it
	g3 := acquire(t, fresh, "edge", h, time.Minute)
	require.Equal(t, store.Token(maxExact), g3.Token)
	require.Equal(t, strconv.FormatInt(maxExact, 10), b.client.HGet(ctx, b.keys.Record("edge"), "token").Val())
	_, err = fresh.Acquire(ctx, store.AcquireParams{Name: "beyond", Holder: h, TTL: time.Minute})
	require.ErrorContains(t, err, "2^53")
}

// TestTokensSurviveDataLoss is the scenario of issue 10: a holder writes
// through redisfence with t1, the server restarts without persistence, and
// a new tenure gets t2 > t1, so that once the new holder wrote, a stale
// write with t1 is refused. The fence on the lost server forgot t1 too: a
// stale write made before the new holder's first write is accepted, which
// the package documentation states. A fence on a durable server keeps t1.
func TestTokensSurviveDataLoss(t *testing.T) {
	t.Parallel()
	srv := redisserver.OwnRedis(t, redisserver.RedisConfig{})
	durable := redisserver.OwnRedis(t, redisserver.RedisConfig{AppendFsyncAlways: true})
	c, dc := srv.Client(t), durable.Client(t)
	ctx := t.Context()
	prefix := "tenure_test:" + testutil.UniqueName(t) + ":"
	s := newStore(t, c, prefix)
	a, b := testutil.Holder(t, "a"), testutil.Holder(t, "b")
	write := func(rc *redis.Client, tok store.Token, value string) error {
		return redisfence.Set(ctx, rc, "report", tok, "data:report", value, 0)
	}

	t1 := acquire(t, s, "job", a, time.Minute).Token
	require.NoError(t, write(c, t1, "a1"))
	require.NoError(t, write(dc, t1, "a1"))

	srv.Kill()
	require.NoError(t, srv.Restart(ctx))
	recorded, err := redisfence.Recorded(ctx, c, "report")
	require.NoError(t, err)
	require.Zero(t, recorded, "the fence key was lost with the data")
	require.Zero(t, c.Exists(ctx, "data:report").Val())

	t2 := acquire(t, newStore(t, c, prefix), "job", b, time.Minute).Token
	require.Greater(t, t2, t1, "tokens keep growing across the loss")

	// The lost fence: the stale holder's write is accepted until the new
	// holder writes (the fence can only refuse a token lower than one it
	// saw since the loss).
	require.NoError(t, write(c, t1, "a2 (stale, accepted by the forgetful fence)"))
	require.NoError(t, write(c, t2, "b1"))
	require.ErrorIs(t, write(c, t1, "a3"), store.ErrFenced, "after the new holder wrote, t1 is refused")
	require.Equal(t, "b1", c.Get(ctx, "data:report").Val())

	// The durable fence kept t1; t2 passes it and shuts t1 out. With a
	// counter that restarted at 1 (the old INCR), t2 would equal t1 and
	// the stale write would pass.
	require.NoError(t, write(dc, t2, "b1"))
	require.ErrorIs(t, write(dc, t1, "a2"), store.ErrFenced)
	require.Equal(t, "b1", dc.Get(ctx, "data:report").Val())
}

// TestCheckDurability runs the check against real servers: one that
// persists nothing, one that syncs every write, and that one again once a
// replica is attached.
func TestCheckDurability(t *testing.T) {
	t.Parallel()
	settings := func(risks []redisstore.Risk) []string {
		var out []string
		for _, r := range risks {
			require.NotEmpty(t, r.Effect)
			require.True(t, strings.HasPrefix(r.String(), r.Setting+"="+r.Value+": "))
			out = append(out, r.Setting+"="+r.Value)
		}
		return out
	}

	t.Run("NoPersistence", func(t *testing.T) {
		t.Parallel()
		srv := redisserver.OwnRedis(t, redisserver.RedisConfig{})
		s := newStore(t, srv.Client(t), "")
		risks, err := s.CheckDurability(t.Context())
		require.NoError(t, err)
		require.Equal(t, []string{"appendonly=no"}, settings(risks))
	})

	t.Run("Everysec", func(t *testing.T) {
		t.Parallel()
		srv := redisserver.OwnRedis(t, redisserver.RedisConfig{AppendFsyncAlways: true})
		c := srv.Client(t)
		s := newStore(t, c, "")
		risks, err := s.CheckDurability(t.Context())
		require.NoError(t, err)
		require.Empty(t, risks, "appendonly yes, appendfsync always, no replica, noeviction")

		require.NoError(t, c.ConfigSet(t.Context(), "appendfsync", "everysec").Err())
		require.NoError(t, c.ConfigSet(t.Context(), "maxmemory-policy", "allkeys-lru").Err())
		risks, err = s.CheckDurability(t.Context())
		require.NoError(t, err)
		require.Equal(t, []string{"appendfsync=everysec", "maxmemory-policy=allkeys-lru"}, settings(risks))
	})

	t.Run("Replica", func(t *testing.T) {
		t.Parallel()
		primary := redisserver.OwnRedis(t, redisserver.RedisConfig{AppendFsyncAlways: true})
		replica := redisserver.OwnRedis(t, redisserver.RedisConfig{AppendFsyncAlways: true})
		pc, rc := primary.Client(t), replica.Client(t)
		host, port, _ := strings.Cut(primary.Addr(), ":")
		require.NoError(t, rc.ReplicaOf(t.Context(), host, port).Err())
		// Wait for the primary to see its replica: an observable event,
		// polled with a deadline.
		s := newStore(t, pc, "")
		var (
			risks []redisstore.Risk
			err   error
		)
		require.Eventually(t, func() bool {
			risks, err = s.CheckDurability(t.Context())
			return err != nil || len(risks) > 0
		}, eventTimeout, 20*time.Millisecond, "the primary never reported its replica")
		require.NoError(t, err)
		require.Equal(t, []string{"connected_slaves=1"}, settings(risks))

		onReplica, err := newStore(t, rc, "").CheckDurability(t.Context())
		require.NoError(t, err)
		require.Equal(t, []string{"role=slave"}, settings(onReplica))
	})
}

// TestPrefixOverlapsFence checks the key-space rule behind Keys.Overlaps
// and that Config.Keys refuses prefixes that overlap redisfence's default.
func TestPrefixOverlapsFence(t *testing.T) {
	t.Parallel()
	require.Equal(t, redisfence.DefaultKeyPrefix, redisstore.DefaultFenceKeyPrefix)
	for prefix, overlaps := range map[string]bool{
		"tenure:":              false, // the defaults live side by side
		"tenure:fence:":        true,  // equal
		"tenure:fence:x:":      true,  // under it
		"tenure:fence":         false, // tenure:fencelease:, tenure:fenceheld:, tenure:fencetoken
		"tenure:f":             false,
		"app:":                 false,
		"tenure:fence:lease:":  true,
		"tenure:fence:tenure:": true,
	} {
		_, err := redisstore.Config{KeyPrefix: prefix}.Keys()
		if overlaps {
			require.ErrorIs(t, err, store.ErrInvalid, prefix)
			require.ErrorContains(t, err, "fence", prefix)
		} else {
			require.NoError(t, err, prefix)
		}
	}
	k, err := redisstore.Config{}.Keys()
	require.NoError(t, err)
	for prefix, want := range map[string]bool{
		"":               true,
		"tenure:":        true, // tenure:lease:... starts with it
		"tenure:lease:":  true,
		"tenure:lease":   true,
		"tenure:lease:x": true,
		"tenure:held:":   true,
		"tenure:tok":     true, // the counter tenure:token starts with it
		"tenure:token":   true,
		"tenure:tokens":  false,
		"tenure:fence:":  false,
		"other:":         false,
	} {
		require.Equal(t, want, k.Overlaps(prefix), prefix)
	}
	for key, want := range map[string]bool{
		"tenure:lease:job": true, "tenure:held:job": true, "tenure:token": true,
		"tenure:tokens": false, "tenure:notify": false, "tenure:data": false, "tenure:fence:job": false,
	} {
		require.Equal(t, want, k.Owns(key), key)
	}
}
