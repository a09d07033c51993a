package redisfence_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/store"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/fence/redisfence"
	"github.com/tenure-dev/tenure/internal/testserver/redisserver"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store/redisstore"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

// testBundle is a fencer whose fence keys, and the data keys the tests
// write, live under a prefix of the test's own.
type testBundle struct {
	client *redis.Client
	prefix string
	fencer *redisfence.Fencer
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	c := redisserver.RedisClient(t)
	prefix := redisserver.RedisPrefix(t, c)
	f, err := redisfence.New(redisfence.Config{KeyPrefix: prefix + "fence:"})
	require.NoError(t, err)
	return &testBundle{client: c, prefix: prefix, fencer: f}
}

func (b *testBundle) recorded(t *testing.T, resource string) store.Token {
	t.Helper()
	tok, err := b.fencer.Recorded(t.Context(), b.client, resource)
	require.NoError(t, err)
	return tok
}

// requireFenced checks that err is a refusal of offered by resource, which
// had recorded.
func requireFenced(t *testing.T, err error, resource string, offered, recorded store.Token) {
	t.Helper()
	require.ErrorIs(t, err, store.ErrFenced)
	require.NotErrorIs(t, err, store.ErrUnavailable)
	var fenced *store.FencedError
	require.ErrorAs(t, err, &fenced)
	require.Equal(t, store.FencedError{Resource: resource, Offered: offered, Recorded: recorded}, *fenced)
}

func TestSet(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	key := b.prefix + "data"
	const res = "orders"
	require.Zero(t, b.recorded(t, res), "a resource that never accepted a token records 0")

	require.NoError(t, b.fencer.Set(ctx, b.client, res, 5, key, "five", 0))
	require.Equal(t, "five", b.client.Get(ctx, key).Val())
	require.Equal(t, store.Token(5), b.recorded(t, res))
	require.Equal(t, "5", b.client.Get(ctx, b.fencer.Key(res)).Val(), "the fence key holds the token")
	require.Equal(t, time.Duration(-1), b.client.PTTL(ctx, b.fencer.Key(res)).Val(), "the fence never expires")

	err := b.fencer.Set(ctx, b.client, res, 4, key, "stale", 0)
	requireFenced(t, err, res, 4, 5)
	require.Equal(t, "five", b.client.Get(ctx, key).Val(), "a stale token writes nothing")
	require.Equal(t, store.Token(5), b.recorded(t, res))

	require.NoError(t, b.fencer.Set(ctx, b.client, res, 5, key, "five again", 0), "an equal token passes")
	require.Equal(t, "five again", b.client.Get(ctx, key).Val())

	require.NoError(t, b.fencer.Set(ctx, b.client, res, 7, key, "seven", time.Minute), "a greater token passes")
	require.Equal(t, "seven", b.client.Get(ctx, key).Val())
	require.Equal(t, store.Token(7), b.recorded(t, res))
	pttl := b.client.PTTL(ctx, key).Val()
	require.Positive(t, pttl)
	require.LessOrEqual(t, pttl, time.Minute)

	requireFenced(t, b.fencer.Set(ctx, b.client, res, 6, key, "six", 0), res, 6, 7)
	require.Equal(t, "seven", b.client.Get(ctx, key).Val())
}

func TestHSet(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	key := b.prefix + "hash"
	const res = "profile"

	require.NoError(t, b.fencer.HSet(ctx, b.client, res, 3, key, map[string]string{"name": "a", "city": "x"}))
	requireFenced(t, b.fencer.HSet(ctx, b.client, res, 2, key, map[string]string{"name": "stale"}), res, 2, 3)
	require.NoError(t, b.fencer.HSet(ctx, b.client, res, 3, key, map[string]string{"name": "b"}))
	require.Equal(t, map[string]string{"name": "b", "city": "x"}, b.client.HGetAll(ctx, key).Val(), "HSet leaves other fields alone")

	// A write the server refuses leaves the fence where it was.
	str := b.prefix + "string"
	require.NoError(t, b.client.Set(ctx, str, "not a hash", 0).Err())
	err := b.fencer.HSet(ctx, b.client, res, 9, str, map[string]string{"f": "v"})
	require.ErrorContains(t, err, "WRONGTYPE")
	require.NotErrorIs(t, err, store.ErrFenced)
	require.NotErrorIs(t, err, store.ErrUnavailable)
	require.Equal(t, store.Token(3), b.recorded(t, res), "a failed write does not move the fence")

	fields := make(map[string]string, redisfence.MaxFields)
	for i := range redisfence.MaxFields {
		fields[fmt.Sprintf("f%04d", i)] = strconv.Itoa(i)
	}
	require.NoError(t, b.fencer.HSet(ctx, b.client, res, 4, b.prefix+"wide", fields))
	require.Equal(t, int64(redisfence.MaxFields), b.client.HLen(ctx, b.prefix+"wide").Val())
}

func TestCheck(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	const res = "queue"
	require.NoError(t, b.fencer.Check(ctx, b.client, res, 3))
	requireFenced(t, b.fencer.Check(ctx, b.client, res, 2), res, 2, 3)
	require.NoError(t, b.fencer.Check(ctx, b.client, res, 3), "an equal token passes")
	require.NoError(t, b.fencer.Check(ctx, b.client, res, 10))
	require.Equal(t, store.Token(10), b.recorded(t, res))
	requireFenced(t, b.fencer.Set(ctx, b.client, res, 9, b.prefix+"data", "v", 0), res, 9, 10)
	require.Zero(t, b.client.Exists(ctx, b.prefix+"data").Val(), "a write refused after Check moved the fence")
}

// TestLargeTokens compares tokens that doubles cannot tell apart.
func TestLargeTokens(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	const res = "big"
	top := store.Token(math.MaxInt64)
	require.Equal(t, float64(top), float64(top-1), "the test needs tokens a double rounds together")
	require.NoError(t, b.fencer.Check(ctx, b.client, res, top))
	requireFenced(t, b.fencer.Check(ctx, b.client, res, top-1), res, top-1, top)
	require.NoError(t, b.fencer.Check(ctx, b.client, res, top))
	requireFenced(t, b.fencer.Check(ctx, b.client, res, 999), res, 999, top)
}

// TestWithLeases is the story the fence exists for: a holder that was
// superseded while it was paused writes late, with its old token.
func TestWithLeases(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	st, err := redisstore.New(b.client, redisstore.Config{KeyPrefix: b.prefix + "leases:"})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	key := b.prefix + "report"

	first, err := st.Acquire(ctx, store.AcquireParams{Name: "report", Holder: testutil.Holder(t, "first"), TTL: store.MinTTL})
	require.NoError(t, err)
	require.NoError(t, b.fencer.Set(ctx, b.client, "report", first.Token, key, "by first", 0))

	// The first holder pauses past its TTL; the second takes over.
	var second store.Grant
	deadline := time.Now().Add(10 * time.Second)
	for {
		second, err = st.Acquire(ctx, store.AcquireParams{Name: "report", Holder: testutil.Holder(t, "second"), TTL: time.Minute})
		held, ok := errors.AsType[*store.HeldError](err)
		if !ok || time.Now().After(deadline) {
			break
		}
		time.Sleep(held.Remaining + time.Millisecond) // waiting for the store's clock to pass the TTL
	}
	require.NoError(t, err)
	require.Greater(t, second.Token, first.Token)
	require.NoError(t, b.fencer.Set(ctx, b.client, "report", second.Token, key, "by second", 0))

	// The first holder wakes and writes.
	err = b.fencer.Set(ctx, b.client, "report", first.Token, key, "late, by first", 0)
	requireFenced(t, err, "report", first.Token, second.Token)
	require.Equal(t, "by second", b.client.Get(ctx, key).Val())
}

// TestConcurrentWriters races writers with random tokens: the value left
// is the one written with the greatest token, and that token is recorded.
func TestConcurrentWriters(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	const writers = 16
	const res = "race"
	key := b.prefix + "race"
	tokens := rand.Perm(writers * 4)
	var wg sync.WaitGroup
	errs := make([]error, len(tokens))
	for i, tok := range tokens {
		wg.Go(func() {
			errs[i] = b.fencer.Set(ctx, b.client, res, store.Token(tok+1), key, strconv.Itoa(tok+1), 0)
		})
	}
	wg.Wait()
	accepted := 0
	for _, err := range errs {
		if err == nil {
			accepted++
			continue
		}
		require.ErrorIs(t, err, store.ErrFenced)
	}
	require.Positive(t, accepted)
	greatest := store.Token(len(tokens))
	require.Equal(t, greatest, b.recorded(t, res))
	require.Equal(t, strconv.Itoa(int(greatest)), b.client.Get(ctx, key).Val())
}

func TestInvalid(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	key := b.prefix + "data"
	cases := map[string]func() error{
		"NilClient":        func() error { return b.fencer.Set(ctx, nil, "r", 1, key, "v", 0) },
		"TypedNilClient":   func() error { return b.fencer.Check(ctx, (*redis.Client)(nil), "r", 1) },
		"EmptyResource":    func() error { return b.fencer.Set(ctx, b.client, "", 1, key, "v", 0) },
		"LongResource":     func() error { return b.fencer.Check(ctx, b.client, strings.Repeat("r", store.MaxNameLen+1), 1) },
		"InvalidUTF8":      func() error { return b.fencer.Check(ctx, b.client, "r\xff", 1) },
		"ZeroToken":        func() error { return b.fencer.Set(ctx, b.client, "r", 0, key, "v", 0) },
		"NegativeToken":    func() error { return b.fencer.HSet(ctx, b.client, "r", -1, key, map[string]string{"f": "v"}) },
		"EmptyKey":         func() error { return b.fencer.Set(ctx, b.client, "r", 1, "", "v", 0) },
		"NegativeTTL":      func() error { return b.fencer.Set(ctx, b.client, "r", 1, key, "v", -time.Second) },
		"NoFields":         func() error { return b.fencer.HSet(ctx, b.client, "r", 1, key, nil) },
		"EmptyHashKey":     func() error { return b.fencer.HSet(ctx, b.client, "r", 1, "", map[string]string{"f": "v"}) },
		"RecordedNoClient": func() error { _, err := b.fencer.Recorded(ctx, nil, "r"); return err },
		"TooManyFields": func() error {
			fields := make(map[string]string, redisfence.MaxFields+1)
			for i := range redisfence.MaxFields + 1 {
				fields[strconv.Itoa(i)] = "v"
			}
			return b.fencer.HSet(ctx, b.client, "r", 1, key, fields)
		},
	}
	for name, call := range cases {
		require.ErrorIs(t, call(), store.ErrInvalid, name)
	}
	keys, err := b.client.Keys(ctx, b.prefix+"*").Result()
	require.NoError(t, err)
	require.Empty(t, keys, "refused calls write nothing")

	for name, cfg := range map[string]redisfence.Config{
		"TooLong":     {KeyPrefix: strings.Repeat("p", redisfence.MaxKeyPrefixLen+1)},
		"Control":     {KeyPrefix: "a\nb"},
		"InvalidUTF8": {KeyPrefix: "a\xff"},
	} {
		_, err := redisfence.New(cfg)
		require.ErrorIs(t, err, store.ErrInvalid, name)
	}
}

func TestDefaults(t *testing.T) {
	t.Parallel()
	f, err := redisfence.New(redisfence.Config{})
	require.NoError(t, err)
	require.Equal(t, "tenure:fence:orders", f.Key("orders"))

	// The package-level functions write under the default prefix, so they
	// run on a server of the test's own.
	srv := redisserver.OwnRedis(t, redisserver.RedisConfig{})
	c := srv.Client(t)
	ctx := t.Context()
	require.NoError(t, redisfence.Set(ctx, c, "orders", 2, "total", "10", 0))
	require.NoError(t, redisfence.HSet(ctx, c, "orders", 3, "detail", map[string]string{"n": "1"}))
	require.NoError(t, redisfence.Check(ctx, c, "orders", 3))
	requireFenced(t, redisfence.Check(ctx, c, "orders", 1), "orders", 1, 3)
	tok, err := redisfence.Recorded(ctx, c, "orders")
	require.NoError(t, err)
	require.Equal(t, store.Token(3), tok)
	require.Equal(t, "3", c.Get(ctx, "tenure:fence:orders").Val())
}

func TestUnavailable(t *testing.T) {
	t.Parallel()
	srv := redisserver.OwnRedis(t, redisserver.RedisConfig{})
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1})
	t.Cleanup(func() { _ = c.Close() })
	f, err := redisfence.New(redisfence.Config{})
	require.NoError(t, err)
	require.NoError(t, f.Check(t.Context(), c, "r", 1))
	srv.Kill()

	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	err = f.Set(ctx, c, "r", 2, "k", "v", 0)
	require.ErrorIs(t, err, store.ErrUnavailable)
	require.NotErrorIs(t, err, store.ErrFenced)

	closed := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	require.NoError(t, closed.Close())
	require.ErrorIs(t, f.Check(ctx, closed, "r", 1), store.ErrClosed)
}
