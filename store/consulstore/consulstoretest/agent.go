// Package consulstoretest runs Consul agents for tests and adapts
// [consulstore.Store] to the conformance suite
// ([github.com/tenure-dev/tenure/store/storetest]).
//
// A test package that needs Consul calls [Main] from its TestMain: it starts
// one `consul agent -dev` on free loopback ports for the whole package,
// stops it after the tests and then checks for leaked goroutines. Tests
// reach that agent with [Shared]; a test that must kill its agent starts one
// of its own with [StartAgent].
//
//	func TestMain(m *testing.M) { consulstoretest.Main(m) }
//
//	func TestSomething(t *testing.T) {
//		client := consulstoretest.Shared(t).Client(t)
//		...
//	}
//
// The binary is $TENURE_CONSUL_BIN, or consul on PATH; tools/consul/ensure.sh
// builds Consul v1.16.3 and prints its path. Without one, tests that need
// the agent skip, or fail when the environment variable CI is set
// (testutil.NeedServer).
package consulstoretest

import (
	"bytes"
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
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
)

// BinEnv names the environment variable that points at the consul binary.
const BinEnv = "TENURE_CONSUL_BIN"

// SessionTTLMin is the session_ttl_min agents started here run with:
// [store.MinTTL], so that the conformance suite's short leases are not
// rounded up to Consul's default of 10 s.
const SessionTTLMin = 500 * time.Millisecond

const (
	// readyTimeout bounds the wait for a new agent to elect itself and
	// register its node.
	readyTimeout = 60 * time.Second
	// readyPoll is how often readiness is asked.
	readyPoll = 50 * time.Millisecond
	// startAttempts is how many times StartAgent tries, in case another
	// process took one of the free ports it picked before the agent bound
	// it.
	startAttempts = 3
)

// Agent is a `consul agent -dev` child process bound to 127.0.0.1, with a
// temporary data directory and a node name of its own.
type Agent struct {
	// Node is the agent's node name, unique to this agent.
	Node string
	// HTTPAddr is the host:port of its HTTP API.
	HTTPAddr string

	dir     string
	log     string
	client  *api.Client // for readiness checks and RoundTrip
	tr      *http.Transport
	stop    chan struct{} // closed by Stop
	exited  chan struct{} // closed when the process has been waited for
	waitErr error         // set before exited is closed
}

// Binary returns the consul binary tests use: $TENURE_CONSUL_BIN, or consul
// on PATH.
func Binary() (string, error) {
	if bin := os.Getenv(BinEnv); bin != "" {
		if _, err := os.Stat(bin); err != nil {
			return "", fmt.Errorf("consulstoretest: %s=%q: %w", BinEnv, bin, err)
		}
		return bin, nil
	}
	bin, err := exec.LookPath("consul")
	if err != nil {
		return "", fmt.Errorf("consulstoretest: no consul binary: set %s or put consul on PATH (tools/consul/ensure.sh builds one and prints its path): %w", BinEnv, err)
	}
	return bin, nil
}

// StartAgent starts a dev agent on free loopback ports and returns once it
// answers as itself (its node name, checked through /v1/agent/self), has
// elected itself leader and has registered its node, so sessions can be
// created. Stop it with [Agent.Stop].
func StartAgent() (*Agent, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	var errs []error
	for range startAttempts {
		a, err := startAgent(bin)
		if err == nil {
			return a, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

func startAgent(bin string) (*Agent, error) {
	ports, err := freePorts(4)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "tenure-consul-")
	if err != nil {
		return nil, fmt.Errorf("consulstoretest: data dir: %w", err)
	}
	a := &Agent{
		Node:     "tenure-test-" + randomHex(6),
		HTTPAddr: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0])),
		dir:      dir,
		log:      filepath.Join(dir, "agent.log"),
		stop:     make(chan struct{}),
		exited:   make(chan struct{}),
	}
	if a.client, a.tr, err = a.newClient(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	logFile, err := os.Create(a.log)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("consulstoretest: agent log: %w", err)
	}
	defer logFile.Close()
	cmd := exec.Command(bin, "agent", "-dev",
		"-bind", "127.0.0.1", "-client", "127.0.0.1",
		"-http-port", strconv.Itoa(ports[0]),
		"-serf-lan-port", strconv.Itoa(ports[1]),
		"-serf-wan-port", strconv.Itoa(ports[2]),
		"-server-port", strconv.Itoa(ports[3]),
		"-dns-port", "-1", "-grpc-port", "-1", "-grpc-tls-port", "-1", "-https-port", "-1",
		"-data-dir", filepath.Join(dir, "data"),
		"-node", a.Node,
		"-log-level", "info",
		"-hcl", fmt.Sprintf("session_ttl_min = %q", SessionTTLMin.String()),
		"-hcl", "disable_update_check = true",
	)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	started := make(chan error, 1)
	// The process is started and waited for on a goroutine locked to its
	// OS thread: the agent is killed when that thread exits (Linux's
	// parent-death signal), so it cannot outlive a crashed test binary,
	// and the thread lives until the agent has been waited for.
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		setDeathSignal(cmd)
		if err := cmd.Start(); err != nil {
			started <- err
			a.waitErr = err
			close(a.exited)
			return
		}
		started <- nil
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case a.waitErr = <-done:
		case <-a.stop:
			_ = cmd.Process.Kill()
			a.waitErr = <-done
		}
		close(a.exited)
	}()
	if err := <-started; err != nil {
		<-a.exited
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("consulstoretest: start %s: %w", bin, err)
	}
	if err := a.waitReady(); err != nil {
		tail := a.logTail()
		_ = a.Stop()
		return nil, fmt.Errorf("consulstoretest: agent %s on %s: %w; its log ends:\n%s", a.Node, a.HTTPAddr, err, tail)
	}
	return a, nil
}

// waitReady polls the agent until it is ready, it exits or readyTimeout
// passes.
func (a *Agent) waitReady() error {
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	tick := time.NewTicker(readyPoll)
	defer tick.Stop()
	var last error
	for {
		if last = a.ready(ctx); last == nil {
			return nil
		}
		select {
		case <-a.exited:
			return fmt.Errorf("the agent exited before it was ready (%v): %w", a.waitErr, last)
		case <-ctx.Done():
			return fmt.Errorf("not ready within %s: %w", readyTimeout, last)
		case <-tick.C:
		}
	}
}

// ready reports why the agent is not ready yet, or nil.
func (a *Agent) ready(ctx context.Context) error {
	client := a.client
	q := (&api.QueryOptions{}).WithContext(ctx)
	var self map[string]map[string]any
	if _, err := client.Raw().Query("/v1/agent/self", &self, q); err != nil {
		return err
	}
	if got := self["Config"]["NodeName"]; got != a.Node {
		return fmt.Errorf("the agent on %s is node %v, not %s: another process owns the port", a.HTTPAddr, got, a.Node)
	}
	leader, err := client.Status().LeaderWithQueryOptions(q)
	if err != nil {
		return err
	}
	if leader == "" {
		return errors.New("no leader yet")
	}
	node, _, err := client.Catalog().Node(a.Node, q)
	if err != nil {
		return err
	}
	if node == nil {
		return errors.New("node not registered yet")
	}
	return nil
}

// Stop kills the agent, waits for it and removes its data directory.
// Stopping twice is harmless.
func (a *Agent) Stop() error {
	select {
	case <-a.stop:
	default:
		close(a.stop)
	}
	<-a.exited
	a.tr.CloseIdleConnections()
	return os.RemoveAll(a.dir)
}

// Client returns an API client for the agent with a transport of its own,
// whose idle connections are closed when tb's test ends.
func (a *Agent) Client(tb testing.TB) *api.Client {
	tb.Helper()
	return NewClient(tb, a.HTTPAddr)
}

// NewClient returns an API client for the agent at addr (host:port, for
// example a fault-injecting proxy in front of an [Agent]) with a transport
// of its own, whose idle connections are closed when tb's test ends.
func NewClient(tb testing.TB, addr string) *api.Client {
	tb.Helper()
	client, tr, err := newClient(addr)
	if err != nil {
		tb.Fatalf("%v", err)
	}
	tb.Cleanup(tr.CloseIdleConnections)
	return client
}

func (a *Agent) newClient() (*api.Client, *http.Transport, error) { return newClient(a.HTTPAddr) }

func newClient(addr string) (*api.Client, *http.Transport, error) {
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
		return nil, nil, fmt.Errorf("consulstoretest: api client for %s: %w", addr, err)
	}
	return client, tr, nil
}

// logTail returns the end of the agent's log, for error messages.
func (a *Agent) logTail() string {
	const max = 4000
	b, err := os.ReadFile(a.log)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	if len(b) > max {
		b = b[len(b)-max:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return string(b)
}

// freePorts returns n distinct loopback ports that were free for both TCP
// and UDP (Serf uses both) when asked.
func freePorts(n int) ([]int, error) {
	var (
		ports   []int
		closers []func() error
	)
	defer func() {
		for _, c := range closers {
			_ = c()
		}
	}()
	for len(ports) < n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("consulstoretest: free port: %w", err)
		}
		closers = append(closers, l.Close)
		port := l.Addr().(*net.TCPAddr).Port
		u, err := net.ListenPacket("udp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue // taken for UDP: keep the TCP listener so it is not offered again
		}
		closers = append(closers, u.Close)
		ports = append(ports, port)
	}
	return ports, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails; it crashes the program instead.
	return hex.EncodeToString(b)
}
