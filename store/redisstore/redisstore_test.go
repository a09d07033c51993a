package redisstore_test

import (
	"testing"

	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store/redisstore/redisstoretest"
	"github.com/tenure-dev/tenure/store/storetest"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, redisstoretest.Harness{Client: redisstoretest.Client(t)})
}

func BenchmarkStore(b *testing.B) {
	storetest.Benchmark(b, redisstoretest.Harness{Client: redisstoretest.Client(b)})
}
