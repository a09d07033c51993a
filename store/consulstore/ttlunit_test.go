package consulstore_test

import (
	"testing"
	"time"

	"github.com/tenure-dev/tenure/internal/testserver/consulserver"
	"github.com/tenure-dev/tenure/internal/ttltest"
)

// TestFractionalTTL: a TTL with a fraction acquires at the first attempt
// or is refused when the client is made, never a silent wait.
func TestFractionalTTL(t *testing.T) {
	t.Parallel()
	ttltest.Run(t, consulserver.ConsulHarness{Agent: consulserver.SharedConsul(t)}.NewStore(t), time.Millisecond)
}
