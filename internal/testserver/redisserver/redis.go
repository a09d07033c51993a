package redisserver

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/internal/testserver"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/redisstore"
	"github.com/tenure-dev/tenure/store/storetest"
)

// DefaultRedisURL is the shared Redis server tests use when
// TENURE_TEST_REDIS_URL is unset.
const DefaultRedisURL = "redis://127.0.0.1:6379/0"

// RedisBinEnv names the environment variable that names the redis-server
// binary [StartRedis] runs.
const RedisBinEnv = "TENURE_REDIS_BIN"

// RedisURL returns TENURE_TEST_REDIS_URL, or [DefaultRedisURL] when it is
// unset. Tests never flush that server and never touch keys they did not
// create.
func RedisURL() string {
	if u := os.Getenv("TENURE_TEST_REDIS_URL"); u != "" {
		return u
	}
	return DefaultRedisURL
}

// RedisClient returns a client on the shared server ([RedisURL]), closed
// when tb ends. It has ContextTimeoutEnabled set, as redisstore asks. When
// the server is unreachable it stops tb through [testutil.NeedServer].
func RedisClient(tb testing.TB) *redis.Client {
	tb.Helper()
	opt, err := redis.ParseURL(RedisURL())
	if err != nil {
		tb.Fatalf("testserver: parse %q: %v", RedisURL(), err)
	}
	opt.ContextTimeoutEnabled = true
	c := redis.NewClient(opt)
	tb.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	testutil.NeedServer(tb, "Redis at "+RedisURL()+" (TENURE_TEST_REDIS_URL)", c.Ping(ctx).Err())
	return c
}

// RedisPrefix returns a key prefix unique to this call ("tenure_test:", a
// name derived from tb's, and ":") and deletes every key under it from c's
// server when tb ends. Call it after making the client, so that the client
// is still open then.
func RedisPrefix(tb testing.TB, c redis.UniversalClient) string {
	tb.Helper()
	prefix := "tenure_test:" + testutil.UniqueName(tb) + ":"
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testserver.CleanupTimeout)
		defer cancel()
		if err := RedisDeleteKeys(ctx, c, prefix); err != nil {
			tb.Errorf("testserver: delete the keys under %q: %v", prefix, err)
		}
	})
	return prefix
}

// RedisDeleteKeys deletes every key that starts with prefix, which must
// contain no glob characters (*?[]\).
func RedisDeleteKeys(ctx context.Context, c redis.UniversalClient, prefix string) error {
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

// RedisHarness is a [storetest.Harness] for redisstore: every store gets a
// key prefix of its own on Client's server.
type RedisHarness struct {
	Client *redis.Client
}

// NewStore implements [storetest.Harness].
func (h RedisHarness) NewStore(tb testing.TB) store.Store {
	tb.Helper()
	s, err := redisstore.New(h.Client, redisstore.Config{KeyPrefix: RedisPrefix(tb, h.Client)})
	if err != nil {
		tb.Fatalf("testserver: %v", err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

// Capabilities implements [storetest.Harness]. Redis takes TTLs in whole
// milliseconds, rounded up: that is its expiry lag.
func (h RedisHarness) Capabilities() storetest.Capabilities {
	return storetest.Capabilities{
		Notify:    true,
		Line:      true,
		ExpiryLag: time.Millisecond,
		Faults:    h.Faults(),
		RoundTrip: func(ctx context.Context) error { return h.Client.Ping(ctx).Err() },
	}
}

// RedisConfig configures a redis-server [StartRedis] starts.
type RedisConfig struct {
	// AppendFsyncAlways runs the server with appendonly yes and appendfsync
	// always: every write is on disk before it is acknowledged, so a crash
	// loses nothing. Otherwise the server persists nothing at all (no RDB,
	// no AOF): a restart loses every key.
	AppendFsyncAlways bool
	// Args are more arguments of the server ("--replicaof", "127.0.0.1",
	// "6379").
	Args []string
}

// Redis is a redis-server child process on a free loopback port with a
// data directory of its own.
type Redis struct {
	*testserver.Process
	port int
}

// RedisBinary returns the redis-server binary: $TENURE_REDIS_BIN, or
// redis-server on PATH.
func RedisBinary() (string, error) {
	return testserver.Binary(RedisBinEnv, "redis-server", "install Debian's redis-server")
}

// StartRedis starts a redis-server as cfg says and returns once it answers
// as itself. Stop it with [Process.Stop].
func StartRedis(ctx context.Context, cfg RedisConfig) (*Redis, error) {
	bin, err := RedisBinary()
	if err != nil {
		return nil, err
	}
	return testserver.OnFreePorts(ctx, 1, func(ports []int) (*Redis, error) {
		dir, err := os.MkdirTemp("", "tenure-redis-")
		if err == nil {
			// The server reports its directory with symbolic links resolved.
			dir, err = filepath.EvalSymlinks(dir)
		}
		if err != nil {
			return nil, fmt.Errorf("testserver: redis data directory: %w", err)
		}
		r := &Redis{port: ports[0]}
		args := []string{
			"--port", strconv.Itoa(r.port), "--bind", "127.0.0.1", "--dir", dir,
			"--daemonize", "no", "--logfile", "", "--save", "",
		}
		if cfg.AppendFsyncAlways {
			args = append(args, "--appendonly", "yes", "--appendfsync", "always")
		} else {
			args = append(args, "--appendonly", "no")
		}
		args = append(args, cfg.Args...)
		r.Process, err = testserver.Start(ctx, testserver.Config{
			Name: "redis-server", Bin: bin, Args: args, Dir: dir,
			Ready: func(ctx context.Context) error { return r.ready(ctx, dir) },
		})
		if err != nil {
			return nil, err
		}
		return r, nil
	})
}

// OwnRedis starts a redis-server for tb alone ([StartRedis]) and stops it
// when tb ends. When there is no binary, or it does not start, it stops tb
// through [testutil.NeedServer].
func OwnRedis(tb testing.TB, cfg RedisConfig) *Redis {
	tb.Helper()
	r, err := StartRedis(tb.Context(), cfg)
	testutil.NeedServer(tb, "redis-server (install Debian's redis-server, or set "+RedisBinEnv+")", err)
	tb.Cleanup(func() {
		if err := r.Stop(); err != nil {
			tb.Errorf("testserver: stop redis-server on %s: %v", r.Addr(), err)
		}
	})
	return r
}

// Addr is the server's host:port.
func (r *Redis) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(r.port)) }

// Client returns a client on the server, closed when tb ends. It has
// ContextTimeoutEnabled set and reconnects by itself after a restart.
func (r *Redis) Client(tb testing.TB) *redis.Client {
	tb.Helper()
	c := redis.NewClient(&redis.Options{Addr: r.Addr(), ContextTimeoutEnabled: true})
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// ready checks that the server on the port keeps its data in dir (so it is
// the one started) and serves commands (so it has loaded its data).
func (r *Redis) ready(ctx context.Context, dir string) error {
	c := redis.NewClient(&redis.Options{Addr: r.Addr(), MaxRetries: -1, DialTimeout: time.Second})
	defer func() { _ = c.Close() }()
	got, err := c.ConfigGet(ctx, "dir").Result()
	if err != nil {
		return err
	}
	if got["dir"] != dir {
		return fmt.Errorf("%w: the redis-server on %s keeps its data in %q, not %q", testserver.ErrForeign, r.Addr(), got["dir"], dir)
	}
	// EXISTS, unlike CONFIG, waits for the data to be loaded.
	return c.Exists(ctx, "tenure-test-probe").Err()
}
