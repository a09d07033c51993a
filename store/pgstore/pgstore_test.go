package pgstore_test

import (
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/tenure-dev/tenure/internal/testserver/pgserver"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store/storetest"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

// modes are the query execution modes the suite runs under.
var modes = map[string]pgx.QueryExecMode{
	"CacheStatement": pgx.QueryExecModeCacheStatement,
	"SimpleProtocol": pgx.QueryExecModeSimpleProtocol,
}

func TestConformance(t *testing.T) {
	t.Parallel()
	for name, mode := range modes {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			storetest.Run(t, pgserver.PostgresHarness{Owner: pgserver.PostgresPool(t, mode, "")})
		})
	}
}

func BenchmarkStore(b *testing.B) {
	storetest.Benchmark(b, pgserver.PostgresHarness{Owner: pgserver.PostgresPool(b, pgx.QueryExecModeCacheStatement, "")})
}
