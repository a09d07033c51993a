package mysqlstore_test

import (
	"testing"

	"github.com/tenure-dev/tenure/internal/testserver/mysqlserver"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store/storetest"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, mysqlserver.MySQLHarness{Owner: mysqlserver.MySQLDB(t, "")})
}

func BenchmarkStore(b *testing.B) {
	storetest.Benchmark(b, mysqlserver.MySQLHarness{Owner: mysqlserver.MySQLDB(b, "")})
}
