package redisfence_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/fence/redisfence"
	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/redisstore"
)

// badTokens are ARGV values a caller outside Go might send as a token; the
// scripts must refuse each of them.
var badTokens = []string{
	"", "0", "00", "-1", "+1", "01", "007", "1e3", "1E3", "1.0", "1.", " 1", "1 ", "0x10",
	"abc", "inf", "nan", "１", // a full-width digit
	"12345678901234567890", // 20 digits
	"9223372036854775808",  // 2^63
	"9999999999999999999",
}

// evalBoth runs src with EVAL and with EVALSHA (after SCRIPT LOAD), as
// other programs call the scripts, and returns both errors.
func evalBoth(t *testing.T, c *redis.Client, src string, keys []string, args ...any) [2]error {
	t.Helper()
	ctx := t.Context()
	sha, err := c.ScriptLoad(ctx, src).Result()
	require.NoError(t, err)
	return [2]error{c.Eval(ctx, src, keys, args...).Err(), c.EvalSha(ctx, sha, keys, args...).Err()}
}

// TestScriptValidatesTokens calls fence.lua directly with tokens that are
// not canonical positive decimals: every call fails and changes nothing,
// where the old script compared them as strings (a "9x" beat "10").
func TestScriptValidatesTokens(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	fenceKey, data := b.fencer.Key("r"), b.prefix+"data"
	fencePrefix := b.prefix + "fence:"
	require.NoError(t, b.fencer.Set(ctx, b.client, "r", 5, data, "five", 0))

	for _, tok := range badTokens {
		for _, call := range []struct {
			keys []string
			args []any
		}{
			{[]string{fenceKey}, []any{"check", tok, fencePrefix, ""}},
			{[]string{fenceKey, data}, []any{"set", tok, fencePrefix, "", "bad", "0"}},
			{[]string{fenceKey, data}, []any{"hset", tok, fencePrefix, "", "f", "bad"}},
		} {
			for i, err := range evalBoth(t, b.client, redisfence.FenceSrc, call.keys, call.args...) {
				require.ErrorContains(t, err, "tenure fence: token", "%s %q (call %d)", call.args[0], tok, i)
				require.ErrorContains(t, err, "canonical")
			}
		}
	}
	require.Equal(t, "5", b.client.Get(ctx, fenceKey).Val(), "refused tokens leave the fence alone")
	require.Equal(t, "five", b.client.Get(ctx, data).Val(), "refused tokens write nothing")

	// Canonical tokens pass, up to 2^63 - 1.
	for i, err := range evalBoth(t, b.client, redisfence.FenceSrc, []string{fenceKey, data}, "set", "9223372036854775807", fencePrefix, "", "top", "0") {
		require.NoError(t, err, "call %d", i)
	}
	require.Equal(t, "9223372036854775807", b.client.Get(ctx, fenceKey).Val())
	require.Equal(t, "top", b.client.Get(ctx, data).Val())
}

// TestScriptRefusesKeys calls fence.lua directly with a data key among the
// fence keys, a data key under the store prefix, and a fence key outside
// the fence prefix.
func TestScriptRefusesKeys(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	fencePrefix, storePrefix := b.prefix+"fence:", b.prefix+"leases:"
	victim := b.fencer.Key("victim")
	require.NoError(t, b.fencer.Check(ctx, b.client, "victim", 100))

	for name, call := range map[string]struct {
		keys []string
		args []any
		want string
	}{
		"DataKeyIsAFence":   {[]string{b.fencer.Key("r"), victim}, []any{"set", "1", fencePrefix, storePrefix, "1", "0"}, "data key"},
		"DataKeyIsOwnFence": {[]string{victim, victim}, []any{"set", "200", fencePrefix, storePrefix, "1", "0"}, "data key"},
		"DataKeyInStore":    {[]string{b.fencer.Key("r"), storePrefix + "token"}, []any{"hset", "1", fencePrefix, storePrefix, "f", "v"}, "data key"},
		"FenceKeyOutside":   {[]string{b.prefix + "elsewhere", b.prefix + "data"}, []any{"set", "1", fencePrefix, storePrefix, "v", "0"}, "fence key"},
		"NoFencePrefix":     {[]string{victim}, []any{"check", "1", "", ""}, "fence key"},
	} {
		for i, err := range evalBoth(t, b.client, redisfence.FenceSrc, call.keys, call.args...) {
			require.ErrorContains(t, err, call.want, "%s (call %d)", name, i)
		}
	}
	require.Equal(t, "100", b.client.Get(ctx, victim).Val(), "no fence was rewound")
	require.Zero(t, b.client.Exists(ctx, storePrefix+"token", b.prefix+"data", b.prefix+"elsewhere").Val())
}

// TestDataKeys checks the data keys a Fencer refuses before sending
// anything: its own fence keys, the lease store's.
func TestDataKeys(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	storePrefix := b.prefix + "leases:"
	f, err := redisfence.New(redisfence.Config{KeyPrefix: b.prefix + "fence:", StoreKeyPrefix: storePrefix})
	require.NoError(t, err)
	require.NoError(t, f.Check(ctx, b.client, "victim", 100))
	one := map[string]string{"f": "v"}

	for name, key := range map[string]string{
		"OwnFence":         f.Key("r"),
		"AnotherFence":     f.Key("victim"),
		"UnderFencePrefix": b.prefix + "fence:",
		"StoreRecord":      storePrefix + "lease:job",
		"StoreCounter":     storePrefix + "token",
		"UnderStorePrefix": storePrefix + "anything",
	} {
		err := f.Set(ctx, b.client, "r", 1000, key, "v", 0)
		require.ErrorIs(t, err, store.ErrInvalid, name)
		require.ErrorContains(t, err, strconv.Quote(key), name)
		require.ErrorIs(t, f.HSet(ctx, b.client, "r", 1000, key, one), store.ErrInvalid, name)
	}
	require.Equal(t, "100", b.client.Get(ctx, f.Key("victim")).Val(), "no fence was rewound")
	require.Zero(t, b.client.Exists(ctx, f.Key("r"), storePrefix+"token").Val(), "refused writes send nothing")

	// A fencer that does not know the store refuses only the default
	// store's own keys; other keys under "tenure:" are data.
	plain := b.fencer
	for _, key := range []string{"tenure:lease:job", "tenure:held:job", "tenure:token"} {
		require.ErrorIs(t, plain.Set(ctx, b.client, "r", 1, key, "v", 0), store.ErrInvalid, key)
	}
	require.ErrorIs(t, plain.Set(ctx, b.client, "r", 1, plain.Key("victim"), "v", 0), store.ErrInvalid)
	require.NoError(t, plain.Set(ctx, b.client, "r", 1, b.prefix+"leases:x", "v", 0), "an unknown store prefix is not refused")

	// StrictHSet refuses data keys under the lease store's prefix and the
	// default fence prefix.
	sb := setupStrict(t)
	l, err := sb.runClient(t, "a", time.Minute).Acquire(ctx, "job")
	require.NoError(t, err)
	seq := l.Seq()
	for _, key := range []string{sb.keys.Record("job"), sb.keys.Counter, sb.keys.Prefix + "x", redisfence.DefaultKeyPrefix + "r"} {
		require.ErrorIs(t, redisfence.StrictHSet(ctx, sb.client, sb.keys, l, key, one), store.ErrInvalid, key)
	}
	require.Equal(t, seq, l.Seq())
	require.NoError(t, l.Err())
}

// TestStrictScriptValidates calls strict.lua directly with bad tokens and
// seqs and with a data key among the lease store's keys.
func TestStrictScriptValidates(t *testing.T) {
	t.Parallel()
	b := setupStrict(t)
	ctx := t.Context()
	g, err := b.store.Acquire(ctx, store.AcquireParams{Name: "job", Holder: store.Holder{Label: "a", Instance: "i"}, TTL: time.Minute})
	require.NoError(t, err)
	tok, seq := strconv.FormatInt(int64(g.Token), 10), strconv.FormatInt(g.Seq, 10)
	keys := []string{b.keys.Record("job"), b.keys.Held("job"), b.data}
	for _, bad := range badTokens {
		for _, args := range [][]any{
			{"a", "i", bad, seq, b.keys.Prefix, "f", "v"},
			{"a", "i", tok, bad, b.keys.Prefix, "f", "v"},
		} {
			for i, err := range evalBoth(t, b.client, redisfence.StrictSrc, keys, args...) {
				require.ErrorContains(t, err, "canonical", "%q (call %d)", bad, i)
			}
		}
	}
	// "1e15"-style spellings of the right token compared equal as numbers
	// in the old script; now they are refused.
	for i, err := range evalBoth(t, b.client, redisfence.StrictSrc, keys, "a", "i", tok+".0", seq, b.keys.Prefix, "f", "v") {
		require.ErrorContains(t, err, "canonical", "call %d", i)
	}
	for i, err := range evalBoth(t, b.client, redisfence.StrictSrc,
		[]string{b.keys.Record("job"), b.keys.Held("job"), b.keys.Record("other")}, "a", "i", tok, seq, b.keys.Prefix, "token", "1") {
		require.ErrorContains(t, err, "data key", "call %d", i)
	}
	require.Empty(t, b.fields(t))
	r, err := b.store.Get(ctx, "job")
	require.NoError(t, err)
	require.Equal(t, g.Seq, r.Seq, "refused calls leave the chain alone")

	// The right arguments pass, once: the write advances the chain.
	require.NoError(t, b.client.Eval(ctx, redisfence.StrictSrc, keys, "a", "i", tok, seq, b.keys.Prefix, "f", "v0").Err())
	require.Equal(t, map[string]string{"f": "v0"}, b.fields(t))
}

// TestPrefixOverlap checks that New refuses fence prefixes among the lease
// store's keys, and store prefixes among the fence keys.
func TestPrefixOverlap(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		cfg redisfence.Config
		ok  bool
	}{
		"Defaults":              {redisfence.Config{}, true},
		"DefaultsExplicit":      {redisfence.Config{KeyPrefix: "tenure:fence:", StoreKeyPrefix: "tenure:"}, true},
		"FenceUnderStore":       {redisfence.Config{KeyPrefix: "app:fence:", StoreKeyPrefix: "app:"}, true},
		"FenceIsStoreRecords":   {redisfence.Config{KeyPrefix: "app:lease:", StoreKeyPrefix: "app:"}, false},
		"FenceEqualsStore":      {redisfence.Config{KeyPrefix: "app:", StoreKeyPrefix: "app:"}, false},
		"StoreUnderFence":       {redisfence.Config{KeyPrefix: "app:", StoreKeyPrefix: "app:x:"}, false},
		"FenceCoversCounter":    {redisfence.Config{KeyPrefix: "app:tok", StoreKeyPrefix: "app:"}, false},
		"DefaultStoreRecords":   {redisfence.Config{KeyPrefix: "tenure:lease:"}, false},
		"DefaultStoreHeld":      {redisfence.Config{KeyPrefix: "tenure:held:x"}, false},
		"StoreOnDefaultFences":  {redisfence.Config{KeyPrefix: "app:fence:", StoreKeyPrefix: "tenure:fence:"}, false},
		"StorePrefixNotAPrefix": {redisfence.Config{StoreKeyPrefix: "a\nb"}, false},
		"UnrelatedPrefixes":     {redisfence.Config{KeyPrefix: "f:", StoreKeyPrefix: "s:"}, true},
	} {
		_, err := redisfence.New(tc.cfg)
		if tc.ok {
			require.NoError(t, err, name)
		} else {
			require.ErrorIs(t, err, store.ErrInvalid, name)
		}
	}
	// The default fence prefix is what redisstore checks store prefixes
	// against.
	require.Equal(t, redisfence.DefaultKeyPrefix, redisstore.DefaultFenceKeyPrefix)
}
