package redisstore_test

import (
	"testing"

	"github.com/tenure-dev/tenure/internal/testserver/redisserver"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store/storetest"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, redisserver.RedisHarness{Client: redisserver.RedisClient(t)})
}

func BenchmarkStore(b *testing.B) {
	storetest.Benchmark(b, redisserver.RedisHarness{Client: redisserver.RedisClient(b)})
}
