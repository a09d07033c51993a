package serve

import (
	"testing"

	"github.com/tenure-dev/tenure/internal/testutil"
)

func TestMain(m *testing.M) {
	testutil.VerifyTestMain(m)
}
