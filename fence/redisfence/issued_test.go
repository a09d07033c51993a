package redisfence_test

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/fence"
	"github.com/tenure-dev/tenure/fence/redisfence"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/redisstore"
)

// TestCounterKey: a Fencer given the lease store's counter key refuses a
// token the store never issued, in every call, and writes nothing; tokens
// the store issued pass.
func TestCounterKey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	st, err := redisstore.New(b.client, redisstore.Config{KeyPrefix: b.prefix + "leases:"})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	keys := st.Keys()
	f, err := redisfence.New(redisfence.Config{KeyPrefix: b.prefix + "fence:", StoreKeyPrefix: keys.Prefix, CounterKey: keys.Counter})
	require.NoError(t, err)
	data := b.prefix + "data"

	err = f.Check(ctx, b.client, "r", 1)
	require.ErrorIs(t, err, fence.ErrNotIssued, "nothing was issued yet")
	require.ErrorIs(t, err, store.ErrInvalid)

	g, err := st.Acquire(ctx, store.AcquireParams{Name: "job", Holder: testutil.Holder(t, "a"), TTL: time.Minute})
	require.NoError(t, err)
	require.NoError(t, f.Set(ctx, b.client, "r", g.Token, data, "issued", 0))
	for name, call := range map[string]func(tok store.Token) error{
		"Check": func(tok store.Token) error { return f.Check(ctx, b.client, "r", tok) },
		"Set":   func(tok store.Token) error { return f.Set(ctx, b.client, "r", tok, data, "forged", 0) },
		"HSet": func(tok store.Token) error {
			return f.HSet(ctx, b.client, "r", tok, b.prefix+"hash", map[string]string{"f": "forged"})
		},
	} {
		for _, tok := range []store.Token{g.Token + 1, math.MaxInt64} {
			err := call(tok)
			require.ErrorIs(t, err, fence.ErrNotIssued, "%s %d", name, tok)
			require.NotErrorIs(t, err, store.ErrFenced)
			require.ErrorContains(t, err, keys.Counter)
		}
	}
	tok, err := f.Recorded(ctx, b.client, "r")
	require.NoError(t, err)
	require.Equal(t, g.Token, tok, "the fence did not move")
	require.Equal(t, "issued", b.client.Get(ctx, data).Val())
	require.Zero(t, b.client.Exists(ctx, b.prefix+"hash").Val())

	// Without the counter key a fence takes any token, as it must for
	// tokens of another store.
	require.NoError(t, b.fencer.Check(ctx, b.client, "other", math.MaxInt64))

	// The script refuses from other languages too.
	for i, err := range evalBoth(t, b.client, redisfence.FenceSrc,
		[]string{f.Key("r"), data, keys.Counter}, "set", "9223372036854775807", b.prefix+"fence:", keys.Prefix, "x", "0") {
		require.NoError(t, err, "call %d: the script answers, refusing", i)
	}
	require.Equal(t, "issued", b.client.Get(ctx, data).Val())

	_, err = redisfence.New(redisfence.Config{KeyPrefix: b.prefix + "fence:", CounterKey: b.prefix + "fence:token"})
	require.ErrorIs(t, err, store.ErrInvalid, "a counter among the fence keys")
}
