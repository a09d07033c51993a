package redisstore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/storekit"
	"github.com/tenure-dev/tenure/internal/testserver/redisserver"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store/redisstore"
	"github.com/tenure-dev/tenure/store/storetest"
)

// acquireHook records how many leases every call of the acquire script
// carries, and holds the first ones until the test lets them go.
type acquireHook struct {
	mu    sync.Mutex
	calls []int // leases per script call
	hold  int   // calls still to hold

	held    chan struct{} // a value for each call held
	release chan struct{} // closed to let the held calls go
}

func (*acquireHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (*acquireHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *acquireHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args() // evalsha, the hash, the number of keys (the counter and three a lease), keys, args
		if cmd.Name() != "evalsha" || len(args) < 3 || args[1] != redisstore.AcquireScriptHash {
			return next(ctx, cmd)
		}
		h.mu.Lock()
		h.calls = append(h.calls, (args[2].(int)-1)/3)
		hold := h.hold > 0
		h.hold--
		h.mu.Unlock()
		if hold {
			h.held <- struct{}{}
			<-h.release
		}
		return next(ctx, cmd)
	}
}

// TestAcquireCallsMadeAtOnceGoTogether: hundreds of Acquire calls made at
// once from as many goroutines, for as many holders (clients sharing one
// store), take a few script calls, and each is answered as a lone call
// would be.
func TestAcquireCallsMadeAtOnceGoTogether(t *testing.T) {
	t.Parallel()
	c := redisserver.RedisClient(t)
	s := newStore(t, c, redisserver.RedisPrefix(t, c))
	acquire(t, s, "loads-the-script", testutil.Holder(t, "first"), time.Minute)
	h := &acquireHook{hold: storekit.Flights, held: make(chan struct{}, storekit.Flights), release: make(chan struct{})}
	c.AddHook(h)

	calls := storetest.ManyCallersAtOnce(t, s, h.held, h.release)
	h.mu.Lock()
	defer h.mu.Unlock()
	require.LessOrEqual(t, len(h.calls), 12, "%d calls made at once take a few script calls, not one each: %v", calls, h.calls)
}
