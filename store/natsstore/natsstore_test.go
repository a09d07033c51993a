package natsstore_test

import (
	"testing"

	"github.com/tenure-dev/tenure/internal/testserver/natsserver"
	"github.com/tenure-dev/tenure/store/storetest"
)

func harness(t *testing.T) natsserver.NatsHarness {
	t.Helper()
	srv := natsserver.SharedNats(t)
	return natsserver.NatsHarness{Server: srv, Probe: srv.Conn(t)}
}

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, harness(t))
}

func BenchmarkStore(b *testing.B) {
	srv := natsserver.SharedNats(b)
	storetest.Benchmark(b, natsserver.NatsHarness{Server: srv, Probe: srv.Conn(b)})
}
