package k8sstore_test

import (
	"testing"

	"github.com/tenure-dev/tenure/internal/testserver"
	"github.com/tenure-dev/tenure/store/storetest"
)

func harness(t *testing.T) testserver.KubeHarness {
	t.Helper()
	return testserver.KubeHarness{Server: testserver.SharedKubeAPIServer(t)}
}

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, harness(t))
}

func BenchmarkStore(b *testing.B) {
	storetest.Benchmark(b, testserver.KubeHarness{Server: testserver.SharedKubeAPIServer(b)})
}
