package testserver

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tenure-dev/tenure/internal/testutil"
)

// SharedServer is a server [Main] starts before a package's tests and stops
// after them: a [*Shared].
type SharedServer interface {
	// start starts the server and keeps it, or the error, for the tests.
	start(ctx context.Context)
	// stop stops the server if start started it.
	stop()
}

// Shared is a server of type T that [Main] starts for a package's tests to
// share when a package's TestMain passes it to [Main]; tests take it with [Shared.Get]. Make one
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
		tb.Fatalf("testserver: no shared %s: the package's TestMain must pass it to testserver.Main", s.name)
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

// CleanupTimeout bounds each cleanup statement or key deletion a test
// server's helpers make.
const CleanupTimeout = 30 * time.Second

// Main runs a test package's tests: it starts the servers given, runs the
// tests, stops the servers in the reverse order, fails the run if
// goroutines leaked (goleak, as [testutil.VerifyTestMain] does, but after
// the servers are stopped) and exits. Call it from TestMain:
//
//	func TestMain(m *testing.M) { testserver.Main(m, etcdserver.Shared) }
//
// A server that cannot start is not an error here: [Shared.Get] reports it
// to each test that asks.
func Main(m *testing.M, servers ...SharedServer) {
	goleak.VerifyTestMain(mainRun{m: m, servers: servers})
}

// mainRun runs the tests between the start and the stop of the shared
// servers, so they are gone before goleak looks for leaks.
type mainRun struct {
	m       *testing.M
	servers []SharedServer
}

func (r mainRun) Run() int {
	ctx := context.Background()
	for _, s := range r.servers {
		s.start(ctx)
		defer s.stop()
	}
	return r.m.Run()
}
