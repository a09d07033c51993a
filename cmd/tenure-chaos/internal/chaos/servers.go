package chaos

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/redis/go-redis/v9"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Environment variables naming the server binaries the harness starts.
const (
	RedisBinEnv  = "TENURE_REDIS_BIN"
	EtcdBinEnv   = "TENURE_ETCD_BIN"
	ConsulBinEnv = "TENURE_CONSUL_BIN"
)

// readyTimeout bounds a server's start or restart.
const readyTimeout = 60 * time.Second

// server is a store server the harness started and may restart: Redis,
// etcd or a Consul server agent, with its data on disk so a restart keeps
// it. The packages redisstoretest, etcdtest and consulstoretest start
// servers for tests only (and Consul in -dev mode, which keeps nothing
// across a restart), so the harness has its own small launcher.
type server struct {
	what  string
	bin   string
	args  []string
	dir   string
	addr  string // host:port the clients use
	ready func(ctx context.Context) error

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// binary returns the server binary named by env, or name on PATH.
func binary(env, name string) (string, error) {
	if bin := os.Getenv(env); bin != "" {
		if _, err := os.Stat(bin); err != nil {
			return "", fmt.Errorf("chaos: %s names %q: %w", env, bin, err)
		}
		return bin, nil
	}
	bin, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("chaos: no %s binary: set %s (tools/%s/ensure.sh builds one) or put %s on PATH: %w", name, env, name, name, err)
	}
	return bin, nil
}

func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("chaos: find a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// startRedis starts a redis-server on a free loopback port that appends
// every write to its log and fsyncs it before replying (appendfsync
// always), so that a restart keeps every acknowledged write: the token
// counter and the fenced resource alike.
func startRedis(ctx context.Context) (*server, error) {
	bin, err := binary(RedisBinEnv, "redis-server")
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "tenure-chaos-redis-")
	if err != nil {
		return nil, fmt.Errorf("chaos: redis data directory: %w", err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
	s := &server{
		what: "redis", bin: bin, dir: dir, addr: addr,
		args: []string{"--port", strconv.Itoa(ports[0]), "--bind", "127.0.0.1", "--dir", dir,
			"--appendonly", "yes", "--appendfsync", "always", "--save", "", "--protected-mode", "no",
			"--daemonize", "no", "--logfile", ""},
	}
	s.ready = func(ctx context.Context) error {
		rdb := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: time.Second, MaxRetries: -1})
		defer rdb.Close()
		probe, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		got, err := rdb.ConfigGet(probe, "dir").Result()
		if err != nil {
			return err
		}
		if got["dir"] != dir {
			return fmt.Errorf("chaos: the redis on %s keeps its data in %q, not %q: it is not the one the harness started", addr, got["dir"], dir)
		}
		return nil
	}
	if err := s.launch(ctx); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

// startEtcd starts a single-member etcd on free loopback ports.
func startEtcd(ctx context.Context) (*server, error) {
	bin, err := binary(EtcdBinEnv, "etcd")
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "tenure-chaos-etcd-")
	if err != nil {
		return nil, fmt.Errorf("chaos: etcd data directory: %w", err)
	}
	name := "tenure-chaos-" + randomHex(6)
	client := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	peer := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	s := &server{
		what: "etcd", bin: bin, dir: dir, addr: fmt.Sprintf("127.0.0.1:%d", ports[0]),
		args: []string{
			"--name", name, "--data-dir", filepath.Join(dir, "data"),
			"--listen-client-urls", client, "--advertise-client-urls", client,
			"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
			"--initial-cluster", name + "=" + peer, "--initial-cluster-token", name,
			"--initial-cluster-state", "new", "--log-level", "warn",
		},
	}
	s.ready = func(ctx context.Context) error {
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{client}, DialTimeout: time.Second, Logger: zap.NewNop()})
		if err != nil {
			return err
		}
		defer cli.Close()
		probe, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		resp, err := cli.MemberList(probe)
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(resp.Members, func(m *etcdserverpb.Member) bool { return m.Name == name }) {
			return fmt.Errorf("chaos: the etcd on %s is not %s, the one the harness started", client, name)
		}
		_, err = cli.Get(probe, "tenure-chaos-probe")
		return err
	}
	if err := s.launch(ctx); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

// startConsul starts a single Consul server agent (not -dev: its Raft log
// is on disk, so a restart keeps every index, and with them the tokens).
func startConsul(ctx context.Context) (*server, error) {
	bin, err := binary(ConsulBinEnv, "consul")
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(4)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "tenure-chaos-consul-")
	if err != nil {
		return nil, fmt.Errorf("chaos: consul data directory: %w", err)
	}
	node := "tenure-chaos-" + randomHex(6)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
	s := &server{
		what: "consul", bin: bin, dir: dir, addr: addr,
		args: []string{"agent", "-server", "-bootstrap-expect", "1",
			"-bind", "127.0.0.1", "-client", "127.0.0.1",
			"-http-port", strconv.Itoa(ports[0]), "-serf-lan-port", strconv.Itoa(ports[1]),
			"-serf-wan-port", strconv.Itoa(ports[2]), "-server-port", strconv.Itoa(ports[3]),
			"-dns-port", "-1", "-grpc-port", "-1", "-grpc-tls-port", "-1", "-https-port", "-1",
			"-data-dir", filepath.Join(dir, "data"), "-node", node, "-log-level", "warn",
			"-hcl", `session_ttl_min = "500ms"`, "-hcl", "disable_update_check = true",
			"-hcl", "performance { raft_multiplier = 1 }",
		},
	}
	s.ready = func(ctx context.Context) error {
		cli, tr, err := consulClient(addr)
		if err != nil {
			return err
		}
		defer tr.CloseIdleConnections()
		q := (&api.QueryOptions{}).WithContext(ctx)
		var self map[string]map[string]any
		if _, err := cli.Raw().Query("/v1/agent/self", &self, q); err != nil {
			return err
		}
		if got := self["Config"]["NodeName"]; got != node {
			return fmt.Errorf("chaos: the consul on %s is node %v, not %s", addr, got, node)
		}
		if leader, err := cli.Status().LeaderWithQueryOptions(q); err != nil || leader == "" {
			return fmt.Errorf("chaos: consul has no leader yet (%v)", err)
		}
		n, _, err := cli.Catalog().Node(node, q)
		if err != nil || n == nil {
			return fmt.Errorf("chaos: consul node not registered yet (%v)", err)
		}
		return nil
	}
	if err := s.launch(ctx); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

func consulClient(addr string) (*api.Client, *http.Transport, error) {
	tr := &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 8, IdleConnTimeout: 30 * time.Second,
		DialContext: (&net.Dialer{Timeout: 2 * time.Second}).DialContext}
	cli, err := api.NewClient(&api.Config{Address: addr, Scheme: "http", HttpClient: &http.Client{Transport: tr}})
	if err != nil {
		return nil, nil, fmt.Errorf("chaos: consul client for %s: %w", addr, err)
	}
	return cli, tr, nil
}

// launch starts the process and waits until it is ready.
func (s *server) launch(ctx context.Context) error {
	log, err := os.OpenFile(filepath.Join(s.dir, s.what+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("chaos: %s log: %w", s.what, err)
	}
	defer log.Close()
	cmd := exec.Command(s.bin, s.args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("chaos: start %s: %w", s.bin, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	var last error
	for {
		if last = s.ready(ctx); last == nil {
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("chaos: %s exited before it was ready: %w; log in %s", s.what, last, s.dir)
		case <-ctx.Done():
			s.kill()
			return fmt.Errorf("chaos: %s not ready within %s: %w", s.what, readyTimeout, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// kill ends the server, keeping its data.
func (s *server) kill() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd = nil
	s.mu.Unlock()
	if cmd != nil {
		_ = cmd.Process.Kill()
		<-done
	}
}

// restart kills the server and starts it again with its data, on the same
// ports.
func (s *server) restart(ctx context.Context) error {
	s.kill()
	return s.launch(ctx)
}

// stop kills the server and removes its data.
func (s *server) stop() error {
	s.kill()
	return errors.Join(os.RemoveAll(s.dir))
}
