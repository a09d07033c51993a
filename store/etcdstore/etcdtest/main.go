package etcdtest

import (
	"context"
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/tenure-dev/tenure/internal/testutil"
)

// The server [Main] started, or why it could not.
var (
	shared    *Server
	sharedErr error
)

// Main starts one etcd server for the package's tests, runs them, fails
// the run if goroutines leaked ([testutil.VerifyTestMain] does the same
// check, but cannot stop a server after it), stops the server and exits.
// Call it from TestMain. A server that cannot start is not an error here:
// [Shared] reports it to each test that asks.
func Main(m *testing.M) {
	shared, sharedErr = Start(context.Background())
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		if shared != nil {
			if err := shared.Stop(); err != nil {
				fmt.Fprintf(os.Stderr, "etcdtest: stop server %s: %v\n", shared.Name, err)
			}
		}
		os.Exit(code)
	}))
}

// Shared returns the server [Main] started. When there is none it stops tb
// through [testutil.NeedServer]: a skip, or a failure when CI is set.
func Shared(tb testing.TB) *Server {
	tb.Helper()
	if shared == nil && sharedErr == nil {
		sharedErr = fmt.Errorf("etcdtest: no shared server: call etcdtest.Main from TestMain")
	}
	testutil.NeedServer(tb, "etcd", sharedErr)
	return shared
}

// Own starts a server for tb alone and stops it when tb ends; with no
// binary it stops tb through [testutil.NeedServer].
func Own(tb testing.TB) *Server {
	tb.Helper()
	s, err := Start(tb.Context())
	testutil.NeedServer(tb, "etcd", err)
	tb.Cleanup(func() {
		if err := s.Stop(); err != nil {
			tb.Errorf("etcdtest: stop server %s: %v", s.Name, err)
		}
	})
	return s
}
