package natsstore_test

import (
	"testing"

	"github.com/tenure-dev/tenure/internal/testserver"
	"github.com/tenure-dev/tenure/store/storetest"
)

func harness(t *testing.T) testserver.NatsHarness {
	t.Helper()
	srv := testserver.SharedNats(t)
	return testserver.NatsHarness{Server: srv, Probe: srv.Conn(t)}
}

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, harness(t))
}

func BenchmarkStore(b *testing.B) {
	srv := testserver.SharedNats(b)
	storetest.Benchmark(b, testserver.NatsHarness{Server: srv, Probe: srv.Conn(b)})
}
