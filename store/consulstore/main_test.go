package consulstore_test

import (
	"testing"

	"github.com/tenure-dev/tenure/internal/testserver"
	"github.com/tenure-dev/tenure/internal/testserver/consulserver"
)

// TestMain starts one Consul dev agent for the package's tests, stops it
// after them and checks for leaked goroutines.
func TestMain(m *testing.M) { testserver.Main(m, consulserver.Shared) }
