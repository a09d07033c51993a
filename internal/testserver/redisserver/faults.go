package redisserver

import (
	"testing"

	"github.com/tenure-dev/tenure/internal/testserver"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/storetest"
)

// key), through a proxy.
func (RedisHarness) Faults() storetest.Faults {
	return storetest.Faults{NewStore: func(tb testing.TB) (store.Store, storetest.Fault) {
		tb.Helper()
		srv := OwnRedis(tb, RedisConfig{})
		p := testserver.Proxy(tb, srv.Addr())
		c := redis.NewClient(&redis.Options{Addr: p.Addr(), ContextTimeoutEnabled: true})
		tb.Cleanup(func() { _ = c.Close() })
		s := RedisHarness{Client: c}.NewStore(tb)
		return s, testserver.CutFault(p, srv, s)
	}}
}
