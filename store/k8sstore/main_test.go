package k8sstore_test

import (
	"testing"

	"github.com/tenure-dev/tenure/internal/testserver"
	"github.com/tenure-dev/tenure/internal/testserver/kubeserver"
)

func TestMain(m *testing.M) {
	testserver.Main(m, kubeserver.Shared)
}
