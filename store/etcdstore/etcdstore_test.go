package etcdstore_test

import (
	"testing"

	"github.com/tenure-dev/tenure/internal/testserver"
	"github.com/tenure-dev/tenure/store/storetest"
)

func TestMain(m *testing.M) { testserver.Main(m, testserver.Servers{Etcd: true}) }

func newHarness(tb testing.TB) testserver.EtcdHarness {
	srv := testserver.SharedEtcd(tb)
	return testserver.EtcdHarness{Server: srv, Probe: srv.Client(tb)}
}

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, newHarness(t))
}

func BenchmarkStore(b *testing.B) { storetest.Benchmark(b, newHarness(b)) }
