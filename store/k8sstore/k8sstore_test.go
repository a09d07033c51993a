package k8sstore_test

import (
	"testing"

	"github.com/tenure-dev/tenure/internal/testserver/kubeserver"
	"github.com/tenure-dev/tenure/store/storetest"
)

func harness(t *testing.T) kubeserver.Harness {
	t.Helper()
	return kubeserver.Harness{Server: kubeserver.Shared.Get(t)}
}

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, harness(t))
}

func BenchmarkStore(b *testing.B) {
	storetest.Benchmark(b, kubeserver.Harness{Server: kubeserver.Shared.Get(b)})
}
