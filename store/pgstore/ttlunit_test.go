package pgstore_test

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tenure-dev/tenure/internal/testserver/pgserver"
	"github.com/tenure-dev/tenure/internal/ttltest"
)

// TestFractionalTTL: a TTL with a fraction acquires at the first attempt
// or is refused when the client is made, never a silent wait.
func TestFractionalTTL(t *testing.T) {
	t.Parallel()
	ttltest.Run(t, pgserver.PostgresHarness{Owner: pgserver.PostgresPool(t, pgx.QueryExecModeCacheStatement, "")}.NewStore(t), time.Microsecond)
}
