package k8sstore_test

import (
	"testing"

	"github.com/tenure-dev/tenure/internal/testserver"
)

func TestMain(m *testing.M) { testserver.Main(m, testserver.Servers{KubeAPIServer: true}) }
