package consulserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/internal/testserver"

	"github.com/hashicorp/consul/api"

	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/consulstore"
	"github.com/tenure-dev/tenure/store/storetest"
)

// ConsulBinEnv names the environment variable that names the consul
// binary.
const ConsulBinEnv = "TENURE_CONSUL_BIN"

// consulHowTo says how to get a consul binary.
const consulHowTo = "export " + ConsulBinEnv + "=$(tools/consul/ensure.sh) builds Consul v1.16.3 and names it"

// ConsulSessionTTLMin is the session_ttl_min agents started here run with:
// [store.MinTTL], so that the conformance suite's short leases are not
// rounded up to Consul's default of 10 s.
const ConsulSessionTTLMin = 500 * time.Millisecond

// ConsulExpiryLag is how much longer than the remaining time a store
// reports a lease of the conformance suite may take to expire on an agent
// started here: Consul invalidates a session up to twice its TTL after its
// last renewal, and the suite's expiring leases last at most one second;
// one more second covers the invalidation's Raft write on a loaded
// machine.
const ConsulExpiryLag = 2 * time.Second

// ConsulConfig configures an agent [StartConsul] starts.
type ConsulConfig struct {
	// Server runs a single server agent (-server -bootstrap-expect 1) with
	// its Raft log on disk, so that a restart keeps every key and index,
	// and with them the tokens. Otherwise the agent runs in -dev mode,
	// which keeps nothing across a restart but is ready sooner.
	Server bool
}

// Consul is a Consul agent child process bound to 127.0.0.1, with a data
// directory and a node name of its own.
type Consul struct {
	*testserver.Process
	// Node is the agent's node name, unique to it.
	Node string
	// HTTPAddr is the host:port of its HTTP API.
	HTTPAddr string
	// ServerAddr is the host:port of its server RPC (and Raft) port, by
	// which /v1/status/leader names a server.
	ServerAddr string

	client *api.Client // for readiness checks and RoundTrip
	tr     *http.Transport
}

// ConsulBinary returns the consul binary: $TENURE_CONSUL_BIN, or consul on
// PATH.
func ConsulBinary() (string, error) { return testserver.Binary(ConsulBinEnv, "consul", consulHowTo) }

// StartConsul starts an agent on free loopback ports and returns once it
// answers as itself (its node name, through /v1/agent/self), has a leader
// and has registered its node, so that sessions can be created. Stop it
// with [Consul.Stop].
func StartConsul(ctx context.Context, cfg ConsulConfig) (*Consul, error) {
	bin, err := ConsulBinary()
	if err != nil {
		return nil, err
	}
	return testserver.OnFreePorts(ctx, 4, func(ports []int) (*Consul, error) {
		args := []string{"agent", "-dev"}
		if cfg.Server {
			args = []string{"agent", "-server", "-bootstrap-expect", "1", "-hcl", "performance { raft_multiplier = 1 }"}
		}
		return startConsulAgent(ctx, bin, "tenure-test-"+testutil.RandomHex(6), ports, args)
	})
}

// startConsulAgent starts one agent with args followed by the loopback
// binding, its four ports (HTTP, Serf LAN, Serf WAN, server RPC, in that
// order), a data directory of its own and node name node, and returns
// once it answers as itself.
func startConsulAgent(ctx context.Context, bin, node string, ports []int, args []string) (*Consul, error) {
	dir, err := os.MkdirTemp("", "tenure-consul-")
	if err != nil {
		return nil, fmt.Errorf("testserver: consul data directory: %w", err)
	}
	c := &Consul{
		Node:       node,
		HTTPAddr:   net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0])),
		ServerAddr: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[3])),
	}
	if c.client, c.tr, err = newConsulClient(c.HTTPAddr); err != nil {
		return nil, errors.Join(err, os.RemoveAll(dir))
	}
	args = append(args,
		"-bind", "127.0.0.1", "-client", "127.0.0.1",
		"-http-port", strconv.Itoa(ports[0]),
		"-serf-lan-port", strconv.Itoa(ports[1]),
		"-serf-wan-port", strconv.Itoa(ports[2]),
		"-server-port", strconv.Itoa(ports[3]),
		"-dns-port", "-1", "-grpc-port", "-1", "-grpc-tls-port", "-1", "-https-port", "-1",
		"-data-dir", filepath.Join(dir, "data"),
		"-node", c.Node,
		"-log-level", "info",
		"-hcl", fmt.Sprintf("session_ttl_min = %q", ConsulSessionTTLMin.String()),
		"-hcl", "disable_update_check = true",
	)
	c.Process, err = testserver.Start(ctx, testserver.Config{Name: "consul", Bin: bin, Args: args, Dir: dir, Ready: c.ready})
	if err != nil {
		c.tr.CloseIdleConnections()
		return nil, err
	}
	return c, nil
}

// OwnConsul starts a dev agent for tb alone ([StartConsul]) and stops it
// when tb ends. When there is no binary, or it does not start, it stops tb
// through [testutil.NeedServer].
func OwnConsul(tb testing.TB) *Consul {
	tb.Helper()
	c, err := StartConsul(tb.Context(), ConsulConfig{})
	testutil.NeedServer(tb, "consul agent", err)
	tb.Cleanup(func() {
		if err := c.Stop(); err != nil {
			tb.Errorf("testserver: stop consul %s: %v", c.Node, err)
		}
	})
	return c
}

// Stop kills the agent and removes its data directory. Stopping twice is
// harmless.
func (c *Consul) Stop() error {
	err := c.Process.Stop()
	c.tr.CloseIdleConnections()
	return err
}

// Client returns an API client for the agent with a transport of its own,
// whose idle connections are closed when tb ends.
func (c *Consul) Client(tb testing.TB) *api.Client {
	tb.Helper()
	return ConsulClient(tb, c.HTTPAddr)
}

// ConsulClient returns an API client for the agent at addr (host:port, for
// example a fault-injecting proxy in front of a [Consul]) with a transport
// of its own, whose idle connections are closed when tb ends.
func ConsulClient(tb testing.TB, addr string) *api.Client {
	tb.Helper()
	client, tr, err := newConsulClient(addr)
	if err != nil {
		tb.Fatalf("%v", err)
	}
	tb.Cleanup(tr.CloseIdleConnections)
	return client
}

func newConsulClient(addr string) (*api.Client, *http.Transport, error) {
	tr := &http.Transport{
		Proxy:               nil,
		MaxIdleConnsPerHost: 32,
		IdleConnTimeout:     30 * time.Second,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
	}
	client, err := api.NewClient(&api.Config{
		Address:    addr,
		Scheme:     "http",
		HttpClient: &http.Client{Transport: tr},
	})
	if err != nil {
		return nil, nil, fmt.Errorf("testserver: consul client for %s: %w", addr, err)
	}
	return client, tr, nil
}

// ready reports why the agent is not ready yet, or nil.
func (c *Consul) ready(ctx context.Context) error {
	q := (&api.QueryOptions{}).WithContext(ctx)
	var self map[string]map[string]any
	if _, err := c.client.Raw().Query("/v1/agent/self", &self, q); err != nil {
		return err
	}
	if got := self["Config"]["NodeName"]; got != c.Node {
		return fmt.Errorf("%w: the consul agent on %s is node %v, not %s", testserver.ErrForeign, c.HTTPAddr, got, c.Node)
	}
	leader, err := c.client.Status().LeaderWithQueryOptions(q)
	if err != nil {
		return err
	}
	if leader == "" {
		return errors.New("no leader yet")
	}
	node, _, err := c.client.Catalog().Node(c.Node, q)
	if err != nil {
		return err
	}
	if node == nil {
		return errors.New("node not registered yet")
	}
	return nil
}

// ConsulHarness gives the conformance suite consulstore stores on one
// agent, each under a key prefix of its own.
type ConsulHarness struct {
	// Agent is the agent the stores talk to.
	Agent *Consul
	// Config is the stores' configuration; KeyPrefix is replaced by a
	// unique one per store, and a zero MinSessionTTL becomes
	// [ConsulSessionTTLMin], the agent's session_ttl_min.
	Config consulstore.Config
}

// NewStore implements [storetest.Harness]: a store under
// "tenuretest/<unique name>/" with an API client of its own. Its cleanup
// closes it and deletes every key under its prefix; the sessions it
// created expire by themselves.
func (h ConsulHarness) NewStore(tb testing.TB) store.Store {
	tb.Helper()
	s, _ := h.New(tb)
	return s
}

// New is [ConsulHarness.NewStore] returning the concrete store and its
// client, for backend-specific tests.
func (h ConsulHarness) New(tb testing.TB) (*consulstore.Store, *api.Client) {
	tb.Helper()
	client := h.Agent.Client(tb)
	return h.storeOn(tb, client), client
}

// storeOn is [ConsulHarness.New] on client.
func (h ConsulHarness) storeOn(tb testing.TB, client *api.Client) *consulstore.Store {
	tb.Helper()
	cfg := h.Config
	cfg.KeyPrefix = "tenuretest/" + testutil.UniqueName(tb) + "/"
	if cfg.MinSessionTTL == 0 {
		cfg.MinSessionTTL = ConsulSessionTTLMin
	}
	s, err := consulstore.New(client, cfg)
	if err != nil {
		tb.Fatalf("testserver: %v", err)
	}
	tb.Cleanup(func() {
		_ = s.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := client.KV().DeleteTree(cfg.KeyPrefix, (&api.WriteOptions{}).WithContext(ctx)); err != nil {
			tb.Errorf("testserver: delete the keys under %q: %v", cfg.KeyPrefix, err)
		}
	})
	return s
}

// Capabilities implements [storetest.Harness].
func (h ConsulHarness) Capabilities() storetest.Capabilities {
	return storetest.Capabilities{Notify: true, Line: true, NoHandoff: true, ExpiryLag: ConsulExpiryLag, RoundTrip: h.roundTrip, Faults: h.Faults()}
}

// roundTrip is the store's cheapest call: a consistent read-only
// transaction, as every read the store makes.
func (h ConsulHarness) roundTrip(ctx context.Context) error {
	ops := api.TxnOps{{KV: &api.KVTxnOp{Verb: api.KVGetTree, Key: "tenuretest/roundtrip/"}}}
	ok, _, _, err := h.Agent.client.Txn().Txn(ops, (&api.QueryOptions{RequireConsistent: true}).WithContext(ctx))
	if err == nil && !ok {
		err = errors.New("testserver: the read-only transaction failed")
	}
	return err
}

// Shared is the Consul agent [testserver.Main] starts for a package's tests
// to share when its TestMain passes it:
//
//	func TestMain(m *testing.M) { testserver.Main(m, consulserver.Shared) }
var Shared = testserver.NewShared("consul agent", func(ctx context.Context) (*Consul, error) {
	return StartConsul(ctx, ConsulConfig{})
}, (*Consul).Stop)

// SharedConsul returns the Consul agent [testserver.Main] started
// ([testserver.Shared.Get]).
func SharedConsul(tb testing.TB) *Consul {
	tb.Helper()
	return Shared.Get(tb)
}
