package redisserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/internal/testserver"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-dev/tenure/internal/testutil"
)

// RedisSentinelBinEnv names the environment variable that names the
// redis-sentinel binary [StartRedisSentinels] runs.
const RedisSentinelBinEnv = "TENURE_REDIS_SENTINEL_BIN"

// SentinelMaster is the name under which the sentinels of
// [StartRedisSentinels] monitor their primary.
const SentinelMaster = "tenure"

// Replication credentials of the servers of [StartRedisSentinels]: the
// replica logs in to its primary as this ACL user, which
// [RedisSentinels.CutReplication] switches off.
const (
	sentinelReplUser     = "repl"
	sentinelReplPassword = "repl-secret"
)

// RedisSentinels is a primary, a replica of it and three sentinels that
// monitor the primary, each a process on a loopback port of its own.
type RedisSentinels struct {
	// Servers are the primary (at first) and the replica (at first).
	Servers [2]*Redis
	// Sentinels are the three redis-sentinel processes.
	Sentinels [3]*testserver.Process
	// SentinelAddrs are their host:port addresses.
	SentinelAddrs []string
}

// OwnRedisSentinels starts a primary, a replica and three sentinels for tb
// alone ([StartRedisSentinels]) and stops them when tb ends. When a binary
// is missing, or a process does not start, it stops tb through
// [testutil.NeedServer].
func OwnRedisSentinels(tb testing.TB) *RedisSentinels {
	tb.Helper()
	s, err := StartRedisSentinels(tb.Context())
	testutil.NeedServer(tb, "redis-server and redis-sentinel (install Debian's redis-server and redis-sentinel, or set "+RedisBinEnv+" and "+RedisSentinelBinEnv+")", err)
	tb.Cleanup(func() {
		if err := s.Stop(); err != nil {
			tb.Errorf("testserver: stop the sentinels and their servers: %v", err)
		}
	})
	return s
}

// StartRedisSentinels starts a primary and a replica of it (which logs in
// as an ACL user of its own, so that its link can be cut), no persistence,
// and three sentinels that monitor the primary as [SentinelMaster] with a
// quorum of two, and returns once every sentinel knows the replica and the
// other sentinels. The sentinels judge a server down after 5 s and fail
// over on their own only then; [RedisSentinels.Failover] fails over at
// once.
func StartRedisSentinels(ctx context.Context) (*RedisSentinels, error) {
	bin, err := testserver.Binary(RedisSentinelBinEnv, "redis-sentinel", "install Debian's redis-sentinel")
	if err != nil {
		return nil, err
	}
	s := &RedisSentinels{}
	repl := []string{
		"--user", sentinelReplUser, "on", ">" + sentinelReplPassword, "~*", "&*", "+@all",
		"--masteruser", sentinelReplUser, "--masterauth", sentinelReplPassword,
		// A replica's first sync starts at once rather than waiting 5 s
		// for others to share it.
		"--repl-diskless-sync-delay", "0",
	}
	if s.Servers[0], err = StartRedis(ctx, RedisConfig{Args: repl}); err != nil {
		return nil, err
	}
	primary := s.Servers[0]
	s.Servers[1], err = StartRedis(ctx, RedisConfig{Args: append(repl, "--replicaof", "127.0.0.1", strconv.Itoa(primary.port))})
	if err != nil {
		return nil, errors.Join(err, s.Stop())
	}
	for i := range s.Sentinels {
		var addr string
		p, err := testserver.OnFreePorts(ctx, 1, func(ports []int) (*testserver.Process, error) {
			addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
			return startSentinel(ctx, bin, ports[0], primary.port)
		})
		if err != nil {
			return nil, errors.Join(err, s.Stop())
		}
		s.Sentinels[i] = p
		s.SentinelAddrs = append(s.SentinelAddrs, addr)
	}
	if err := s.Servers[1].waitLink(ctx, "up"); err != nil {
		return nil, errors.Join(err, s.Stop())
	}
	if err := s.waitKnown(ctx); err != nil {
		return nil, errors.Join(err, s.Stop())
	}
	return s, nil
}

// startSentinel starts a sentinel on port that monitors the primary on
// the port primary.
func startSentinel(ctx context.Context, bin string, port, primary int) (*testserver.Process, error) {
	dir, err := os.MkdirTemp("", "tenure-sentinel-")
	if err == nil {
		dir, err = filepath.EvalSymlinks(dir)
	}
	if err != nil {
		return nil, fmt.Errorf("testserver: sentinel directory: %w", err)
	}
	conf := filepath.Join(dir, "sentinel.conf")
	text := fmt.Sprintf(`port %d
bind 127.0.0.1
dir %s
daemonize no
logfile ""
sentinel resolve-hostnames no
sentinel monitor %s 127.0.0.1 %d 2
sentinel down-after-milliseconds %s 5000
sentinel failover-timeout %s 10000
`, port, dir, SentinelMaster, primary, SentinelMaster, SentinelMaster)
	if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
		return nil, errors.Join(err, os.RemoveAll(dir))
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	p, err := testserver.Start(ctx, testserver.Config{
		Name: "redis-sentinel", Bin: bin, Args: []string{conf}, Dir: dir,
		Ready: func(ctx context.Context) error {
			c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second})
			defer func() { _ = c.Close() }()
			info, err := c.Info(ctx, "server").Result()
			if err != nil {
				return err
			}
			if !strings.Contains(info, "config_file:"+conf) {
				return fmt.Errorf("%w: the sentinel on %s does not read %s", testserver.ErrForeign, addr, conf)
			}
			return nil
		},
	})
	if err != nil {
		return nil, err
	}
	return p, nil
}

// waitKnown waits until every sentinel knows the replica and the two
// other sentinels.
func (s *RedisSentinels) waitKnown(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, testserver.DefaultReadyTimeout)
	defer cancel()
	for _, addr := range s.SentinelAddrs {
		c := redis.NewSentinelClient(&redis.Options{Addr: addr, MaxRetries: -1})
		err := waitFor(ctx, func() (bool, error) {
			replicas, err := c.Replicas(ctx, SentinelMaster).Result()
			if err != nil {
				return false, err
			}
			sentinels, err := c.Sentinels(ctx, SentinelMaster).Result()
			if err != nil {
				return false, err
			}
			return len(replicas) == 1 && !strings.Contains(replicas[0]["flags"], "down") &&
				!strings.Contains(replicas[0]["flags"], "disconnected") && len(sentinels) == 2, nil
		})
		_ = c.Close()
		if err != nil {
			return fmt.Errorf("testserver: sentinel %s does not know the replica and the other sentinels: %w", addr, err)
		}
	}
	return nil
}

// Primary returns the server every sentinel names as the primary, once
// they agree on one.
func (s *RedisSentinels) Primary(ctx context.Context) (*Redis, error) {
	var primary *Redis
	err := waitFor(ctx, func() (bool, error) {
		primary = nil
		for _, addr := range s.SentinelAddrs {
			c := redis.NewSentinelClient(&redis.Options{Addr: addr, MaxRetries: -1})
			got, err := c.GetMasterAddrByName(ctx, SentinelMaster).Result()
			_ = c.Close()
			if err != nil {
				return false, err
			}
			r := s.server(net.JoinHostPort(got[0], got[1]))
			if r == nil || (primary != nil && r != primary) {
				return false, nil
			}
			primary = r
		}
		return true, nil
	})
	return primary, err
}

// server is the server at addr, or nil.
func (s *RedisSentinels) server(addr string) *Redis {
	for _, r := range s.Servers {
		if r != nil && r.Addr() == addr {
			return r
		}
	}
	return nil
}

// CutReplication cuts the replica of primary off: it switches off the ACL
// user the replica logs in as and closes its connection, so that writes
// the primary takes from then on reach no replica. It returns once the
// replica has seen its link go down.
func (s *RedisSentinels) CutReplication(ctx context.Context, primary *Redis) error {
	var replica *Redis
	for _, r := range s.Servers {
		if r != primary {
			replica = r
		}
	}
	p := redis.NewClient(&redis.Options{Addr: primary.Addr(), MaxRetries: -1})
	defer func() { _ = p.Close() }()
	if err := p.Do(ctx, "ACL", "SETUSER", sentinelReplUser, "off").Err(); err != nil {
		return fmt.Errorf("testserver: switch the replication user off: %w", err)
	}
	if err := p.Do(ctx, "CLIENT", "KILL", "USER", sentinelReplUser).Err(); err != nil {
		return fmt.Errorf("testserver: close the replica's connection: %w", err)
	}
	return replica.waitLink(ctx, "down")
}

// waitLink waits until the replica r reports its link to its primary up
// or down (INFO's master_link_status).
func (r *Redis) waitLink(ctx context.Context, status string) error {
	ctx, cancel := context.WithTimeout(ctx, testserver.DefaultReadyTimeout)
	defer cancel()
	c := redis.NewClient(&redis.Options{Addr: r.Addr(), MaxRetries: -1})
	defer func() { _ = c.Close() }()
	err := waitFor(ctx, func() (bool, error) {
		info, err := c.Info(ctx, "replication").Result()
		return strings.Contains(info, "master_link_status:"+status), err
	})
	if err != nil {
		return fmt.Errorf("testserver: the replica on %s does not report its link %s: %w", r.Addr(), status, err)
	}
	return nil
}

// Failover asks the first sentinel to fail over at once (SENTINEL
// FAILOVER, which asks no other sentinel) and returns the new primary
// once every sentinel names it and it answers as a primary.
func (s *RedisSentinels) Failover(ctx context.Context) (*Redis, error) {
	old, err := s.Primary(ctx)
	if err != nil {
		return nil, err
	}
	c := redis.NewSentinelClient(&redis.Options{Addr: s.SentinelAddrs[0], MaxRetries: -1})
	defer func() { _ = c.Close() }()
	if err := c.Failover(ctx, SentinelMaster).Err(); err != nil {
		return nil, fmt.Errorf("testserver: SENTINEL FAILOVER: %w", err)
	}
	var primary *Redis
	err = waitFor(ctx, func() (bool, error) {
		p, err := s.Primary(ctx)
		if err != nil || p == old {
			return false, err
		}
		r := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1})
		defer func() { _ = r.Close() }()
		info, err := r.Info(ctx, "replication").Result()
		primary = p
		return strings.Contains(info, "role:master"), err
	})
	return primary, err
}

// Stop stops every process and removes their data.
func (s *RedisSentinels) Stop() error {
	var errs []error
	for _, p := range s.Sentinels {
		if p != nil {
			errs = append(errs, p.Stop())
		}
	}
	for _, r := range s.Servers {
		if r != nil {
			errs = append(errs, r.Stop())
		}
	}
	return errors.Join(errs...)
}

// waitFor asks done every 50 ms until it reports true, or returns its last
// error (or ctx's) when ctx ends.
func waitFor(ctx context.Context, done func() (bool, error)) error {
	tick := time.NewTicker(testserver.ProbeInterval)
	defer tick.Stop()
	for {
		ok, err := done()
		if ok && err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.Join(ctx.Err(), err)
		case <-tick.C:
		}
	}
}
