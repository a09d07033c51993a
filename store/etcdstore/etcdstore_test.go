package etcdstore_test

import (
	"testing"

	"github.com/tenure-dev/tenure/internal/testserver"
	"github.com/tenure-dev/tenure/internal/testserver/etcdserver"
	"github.com/tenure-dev/tenure/store/storetest"
)

func TestMain(m *testing.M) { testserver.Main(m, etcdserver.Shared) }

func newHarness(tb testing.TB) etcdserver.EtcdHarness {
	srv := etcdserver.SharedEtcd(tb)
	return etcdserver.EtcdHarness{Server: srv, Probe: srv.Client(tb)}
}

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, newHarness(t))
}

func BenchmarkStore(b *testing.B) { storetest.Benchmark(b, newHarness(b)) }
