// Package redisstoretest gives tests a real Redis to run tenure against:
// clients on the shared test server, key prefixes of their own whose keys
// vanish when the test ends, a [storetest.Harness] for [redisstore], and
// redis-server child processes a test can crash and restart. It is for
// tests only; production code must never import it.
//
// The shared server is [URL]; when it is unreachable the test skips, or
// fails when the environment variable CI is set ([testutil.NeedServer]).
// Tests never flush it and never touch keys they did not create.
package redisstoretest

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/store"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store/redisstore"
	"github.com/tenure-dev/tenure/store/storetest"
)

// DefaultURL is the Redis server tests use when TENURE_TEST_REDIS_URL is
// unset.
const DefaultURL = "redis://127.0.0.1:6379/0"

// cleanupTimeout bounds the deletion of a test's keys.
const cleanupTimeout = 30 * time.Second

// URL returns TENURE_TEST_REDIS_URL, or [DefaultURL] when it is unset.
func URL() string {
	if u := os.Getenv("TENURE_TEST_REDIS_URL"); u != "" {
		return u
	}
	return DefaultURL
}

// Client returns a client on the shared test server, closed when tb ends.
// It has ContextTimeoutEnabled set, as the store's documentation asks.
func Client(tb testing.TB) *redis.Client {
	tb.Helper()
	opt, err := redis.ParseURL(URL())
	if err != nil {
		tb.Fatalf("redisstoretest: parse %q: %v", URL(), err)
	}
	opt.ContextTimeoutEnabled = true
	c := redis.NewClient(opt)
	tb.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	testutil.NeedServer(tb, "Redis at "+URL()+" (TENURE_TEST_REDIS_URL)", c.Ping(ctx).Err())
	return c
}

// Prefix returns a key prefix unique to this call ("tenure_test:", a name
// derived from tb's, and ":") and deletes every key under it from c's
// server when tb ends. Register it after the client, so that the client is
// still open then.
func Prefix(tb testing.TB, c redis.UniversalClient) string {
	tb.Helper()
	prefix := "tenure_test:" + testutil.UniqueName(tb) + ":"
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		if err := DeleteKeys(ctx, c, prefix); err != nil {
			tb.Errorf("redisstoretest: delete the keys under %q: %v", prefix, err)
		}
	})
	return prefix
}

// DeleteKeys deletes every key that starts with prefix, which must contain
// no glob characters (*?[]\).
func DeleteKeys(ctx context.Context, c redis.UniversalClient, prefix string) error {
	var cursor uint64
	for {
		keys, next, err := c.Scan(ctx, cursor, prefix+"*", 1000).Result()
		if err != nil {
			return err
		}
		if len(keys) > 0 {
			if err := c.Unlink(ctx, keys...).Err(); err != nil {
				return err
			}
		}
		if next == 0 {
			return nil
		}
		cursor = next
	}
}

// Harness is a [storetest.Harness] for [redisstore]: every store gets a
// prefix of its own on Client's server.
type Harness struct {
	Client *redis.Client
}

// NewStore implements [storetest.Harness].
func (h Harness) NewStore(tb testing.TB) store.Store {
	tb.Helper()
	s, err := redisstore.New(h.Client, redisstore.Config{KeyPrefix: Prefix(tb, h.Client)})
	if err != nil {
		tb.Fatalf("redisstoretest: %v", err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

// Capabilities implements [storetest.Harness]. Redis takes TTLs in whole
// milliseconds, rounded up: that is its expiry lag.
func (h Harness) Capabilities() storetest.Capabilities {
	return storetest.Capabilities{
		Notify:    true,
		ExpiryLag: time.Millisecond,
		RoundTrip: func(ctx context.Context) error { return h.Client.Ping(ctx).Err() },
	}
}
