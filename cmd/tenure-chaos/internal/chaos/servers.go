package chaos

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/tenure-dev/tenure/internal/testserver"
	"github.com/tenure-dev/tenure/internal/testserver/consulserver"
	"github.com/tenure-dev/tenure/internal/testserver/etcdserver"
	"github.com/tenure-dev/tenure/internal/testserver/redisserver"
)

// Environment variables naming the server binaries the harness starts.
const (
	RedisBinEnv  = redisserver.RedisBinEnv
	EtcdBinEnv   = etcdserver.EtcdBinEnv
	ConsulBinEnv = consulserver.ConsulBinEnv
)

// server is a store the harness started and may crash and restart: one
// Redis, etcd or Consul server, or a three-member etcd or Consul cluster,
// each member run by the tests' one launcher ([testserver.Start]) with its
// data on disk, so that a restart keeps it.
type server struct {
	members []*testserver.Process
	addrs   []string // host:port the clients use, one per member
	// leader returns the index of the cluster's current leader in
	// members; nil for a single server.
	leader func(context.Context) (int, error)
	// healthy returns nil when the cluster can lose any one member and
	// keep its quorum; nil for a single server.
	healthy func(context.Context) error
}

// startRedis starts a redis-server that appends every write to its log
// and fsyncs it before replying (appendfsync always), so that a restart
// keeps every acknowledged write: the token counter and the fenced
// resource alike.
func startRedis(ctx context.Context) (*server, error) {
	r, err := redisserver.StartRedis(ctx, redisserver.RedisConfig{AppendFsyncAlways: true})
	if err != nil {
		return nil, fmt.Errorf("chaos: %w", err)
	}
	return &server{members: []*testserver.Process{r.Process}, addrs: []string{r.Addr()}}, nil
}

// startEtcd starts a single-member etcd that syncs its log to disk.
func startEtcd(ctx context.Context) (*server, error) {
	e, err := etcdserver.StartEtcd(ctx, etcdserver.EtcdConfig{Fsync: true})
	if err != nil {
		return nil, fmt.Errorf("chaos: %w", err)
	}
	return &server{members: []*testserver.Process{e.Process}, addrs: []string{e.Addr()}}, nil
}

// startEtcdCluster starts a three-member etcd cluster. Its members do not
// sync their logs to disk: the nemesis kills processes, not the machine,
// and what a killed member wrote is in the kernel's page cache, which its
// restart reads. Three members syncing every write on the two cores the
// cells run on made each write pair take four times as long, and the
// negative control bite a quarter as often (a pause lands between a
// worker's lease check and its write that much less often).
func startEtcdCluster(ctx context.Context) (*server, error) {
	c, err := etcdserver.StartEtcdCluster(ctx, etcdserver.EtcdConfig{})
	if err != nil {
		return nil, fmt.Errorf("chaos: %w", err)
	}
	s := &server{addrs: c.Addrs(), leader: c.Leader, healthy: c.Healthy}
	for _, m := range c.Members {
		s.members = append(s.members, m.Process)
	}
	return s, nil
}

// startConsul starts a single Consul server agent (not -dev: its Raft log
// is on disk, so a restart keeps every index, and with them the tokens).
func startConsul(ctx context.Context) (*server, error) {
	c, err := consulserver.StartConsul(ctx, consulserver.ConsulConfig{Server: true})
	if err != nil {
		return nil, fmt.Errorf("chaos: %w", err)
	}
	return &server{members: []*testserver.Process{c.Process}, addrs: []string{c.HTTPAddr}}, nil
}

// startConsulCluster starts three Consul server agents, their Raft logs
// on disk.
func startConsulCluster(ctx context.Context) (*server, error) {
	c, err := consulserver.StartConsulCluster(ctx)
	if err != nil {
		return nil, fmt.Errorf("chaos: %w", err)
	}
	s := &server{addrs: c.HTTPAddrs(), leader: c.Leader, healthy: c.Healthy}
	for _, m := range c.Members {
		s.members = append(s.members, m.Process)
	}
	return s, nil
}

// kill crashes a single server, keeping its data.
func (s *server) kill() { s.members[0].Kill() }

// launch starts a killed single server again with its data, on the same
// ports, and returns once it answers.
func (s *server) launch(ctx context.Context) error { return s.members[0].Restart(ctx) }

// stop kills every member and removes their data.
func (s *server) stop() error {
	var errs []error
	for _, m := range s.members {
		errs = append(errs, m.Stop())
	}
	return errors.Join(errs...)
}

// consulClient returns a Consul API client that sends each request to one
// of addrs, and to the next after a request fails on its way (a member
// that is down, paused or cut off), as an application given every
// server's address would: the API client itself takes one.
func consulClient(addrs ...string) (*api.Client, *http.Transport, error) {
	tr := &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 8, IdleConnTimeout: 30 * time.Second,
		DialContext: (&net.Dialer{Timeout: 2 * time.Second}).DialContext}
	cli, err := api.NewClient(&api.Config{Address: addrs[0], Scheme: "http",
		HttpClient: &http.Client{Transport: &failover{base: tr, addrs: addrs}}})
	if err != nil {
		return nil, nil, fmt.Errorf("chaos: consul client for %v: %w", addrs, err)
	}
	return cli, tr, nil
}

// failover sends each request to its current address and moves on to the
// next address after a request that failed in transport.
type failover struct {
	base  http.RoundTripper
	addrs []string
	cur   atomic.Uint64
}

func (f *failover) RoundTrip(req *http.Request) (*http.Response, error) {
	i := f.cur.Load()
	r := req.Clone(req.Context())
	r.URL.Host = f.addrs[i%uint64(len(f.addrs))]
	r.Host = r.URL.Host
	resp, err := f.base.RoundTrip(r)
	if err != nil {
		f.cur.CompareAndSwap(i, i+1)
	}
	return resp, err
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
