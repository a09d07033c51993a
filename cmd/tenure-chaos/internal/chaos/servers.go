package chaos

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/tenure-dev/tenure/internal/testserver"
)

// Environment variables naming the server binaries the harness starts.
const (
	RedisBinEnv  = testserver.RedisBinEnv
	EtcdBinEnv   = testserver.EtcdBinEnv
	ConsulBinEnv = testserver.ConsulBinEnv
)

// server is a store server the harness started and may crash and restart:
// Redis, etcd or a Consul server agent, run by the tests' one launcher
// ([testserver.Start]) with its data on disk, so that a restart keeps it.
type server struct {
	*testserver.Process
	addr string // host:port the clients use
}

// startRedis starts a redis-server that appends every write to its log
// and fsyncs it before replying (appendfsync always), so that a restart
// keeps every acknowledged write: the token counter and the fenced
// resource alike.
func startRedis(ctx context.Context) (*server, error) {
	r, err := testserver.StartRedis(ctx, testserver.RedisConfig{AppendFsyncAlways: true})
	if err != nil {
		return nil, fmt.Errorf("chaos: %w", err)
	}
	return &server{Process: r.Process, addr: r.Addr()}, nil
}

// startEtcd starts a single-member etcd that syncs its log to disk.
func startEtcd(ctx context.Context) (*server, error) {
	e, err := testserver.StartEtcd(ctx, testserver.EtcdConfig{Fsync: true})
	if err != nil {
		return nil, fmt.Errorf("chaos: %w", err)
	}
	return &server{Process: e.Process, addr: e.Addr()}, nil
}

// startConsul starts a single Consul server agent (not -dev: its Raft log
// is on disk, so a restart keeps every index, and with them the tokens).
func startConsul(ctx context.Context) (*server, error) {
	c, err := testserver.StartConsul(ctx, testserver.ConsulConfig{Server: true})
	if err != nil {
		return nil, fmt.Errorf("chaos: %w", err)
	}
	return &server{Process: c.Process, addr: c.HTTPAddr}, nil
}

// kill crashes the server, keeping its data.
func (s *server) kill() { s.Kill() }

// launch starts a killed server again with its data, on the same ports,
// and returns once it answers.
func (s *server) launch(ctx context.Context) error { return s.Restart(ctx) }

// stop kills the server and removes its data.
func (s *server) stop() error { return s.Stop() }

func consulClient(addr string) (*api.Client, *http.Transport, error) {
	tr := &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 8, IdleConnTimeout: 30 * time.Second,
		DialContext: (&net.Dialer{Timeout: 2 * time.Second}).DialContext}
	cli, err := api.NewClient(&api.Config{Address: addr, Scheme: "http", HttpClient: &http.Client{Transport: tr}})
	if err != nil {
		return nil, nil, fmt.Errorf("chaos: consul client for %s: %w", addr, err)
	}
	return cli, tr, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
