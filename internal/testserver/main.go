package testserver

import (
	"context"
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/tenure-dev/tenure/internal/testutil"
)

// Servers names the servers [Main] starts for a package's tests to share.
type Servers struct {
	// Etcd starts one etcd server, for [SharedEtcd].
	Etcd bool
	// Consul starts one Consul dev agent, for [SharedConsul].
	Consul bool
	// Nats starts one nats-server with JetStream, for [SharedNats].
	Nats bool
	// Others are shared servers of the sub-packages whose clients are too
	// heavy for every test binary that imports testserver:
	// kubeserver.Shared and s3server.Shared. Main starts them after the
	// servers above, in order.
	Others []SharedServer
}

// SharedServer is a server [Main] starts before a package's tests and stops
// after them: a [*Shared].
type SharedServer interface {
	// start starts the server and keeps it, or the error, for the tests.
	start(ctx context.Context)
	// stop stops the server if start started it.
	stop()
}

// Shared is a server of type T that [Main] starts for a package's tests to
// share when [Servers] names it; tests take it with [Shared.Get]. Make one
// with [NewShared].
type Shared[T any] struct {
	name    string
	startFn func(context.Context) (T, error)
	stopFn  func(T) error

	// Main sets these before the tests run and leaves them alone after.
	asked  bool
	server T
	err    error
}

// NewShared returns a shared server that Main starts with start and stops
// with stop; name names it in messages ("kube-apiserver").
func NewShared[T any](name string, start func(context.Context) (T, error), stop func(T) error) *Shared[T] {
	return &Shared[T]{name: name, startFn: start, stopFn: stop}
}

// Get returns the server [Main] started. When it could not start, Get stops
// tb through [testutil.NeedServer]: a skip, or a failure when CI is set.
// When the package's TestMain did not ask Main for the server, Get fails
// tb.
func (s *Shared[T]) Get(tb testing.TB) T {
	tb.Helper()
	if !s.asked {
		tb.Fatalf("testserver: no shared %s: the package's TestMain must name it in the testserver.Servers it passes to testserver.Main", s.name)
	}
	testutil.NeedServer(tb, s.name, s.err)
	return s.server
}

func (s *Shared[T]) start(ctx context.Context) {
	s.asked = true
	s.server, s.err = s.startFn(ctx)
}

func (s *Shared[T]) stop() {
	if s.err != nil {
		return
	}
	if err := s.stopFn(s.server); err != nil {
		fmt.Fprintf(os.Stderr, "testserver: stop the shared %s: %v\n", s.name, err)
	}
}

// The servers [Servers] names with its fields.
var (
	sharedEtcd = NewShared("etcd", func(ctx context.Context) (*Etcd, error) {
		return StartEtcd(ctx, EtcdConfig{})
	}, (*Etcd).Stop)
	sharedConsul = NewShared("consul agent", func(ctx context.Context) (*Consul, error) {
		return StartConsul(ctx, ConsulConfig{})
	}, (*Consul).Stop)
	sharedNats = NewShared("nats-server", StartNats, (*Nats).Stop)
)

// list returns the servers s names, in the order Main starts them.
func (s Servers) list() []SharedServer {
	var l []SharedServer
	if s.Etcd {
		l = append(l, sharedEtcd)
	}
	if s.Consul {
		l = append(l, sharedConsul)
	}
	if s.Nats {
		l = append(l, sharedNats)
	}
	return append(l, s.Others...)
}

// Main runs a test package's tests: it starts the servers named, runs the
// tests, stops the servers in the reverse order, fails the run if
// goroutines leaked (goleak, as [testutil.VerifyTestMain] does, but after
// the servers are stopped) and exits. Call it from TestMain:
//
//	func TestMain(m *testing.M) { testserver.Main(m, testserver.Servers{Etcd: true}) }
//
// A server that cannot start is not an error here: [Shared.Get] reports it
// to each test that asks.
func Main(m *testing.M, servers Servers) {
	goleak.VerifyTestMain(mainRun{m: m, servers: servers})
}

// mainRun runs the tests between the start and the stop of the shared
// servers, so they are gone before goleak looks for leaks.
type mainRun struct {
	m       *testing.M
	servers Servers
}

func (r mainRun) Run() int {
	ctx := context.Background()
	for _, s := range r.servers.list() {
		s.start(ctx)
		defer s.stop()
	}
	return r.m.Run()
}

// SharedEtcd returns the etcd server [Main] started ([Shared.Get]).
func SharedEtcd(tb testing.TB) *Etcd {
	tb.Helper()
	return sharedEtcd.Get(tb)
}

// SharedConsul returns the Consul agent [Main] started ([Shared.Get]).
func SharedConsul(tb testing.TB) *Consul {
	tb.Helper()
	return sharedConsul.Get(tb)
}

// SharedNats returns the nats-server [Main] started ([Shared.Get]).
func SharedNats(tb testing.TB) *Nats {
	tb.Helper()
	return sharedNats.Get(tb)
}
