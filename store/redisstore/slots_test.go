package redisstore_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store"
)

// commandCount counts the commands a client sends.
type commandCount struct{ n atomic.Int32 }

func (c *commandCount) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *commandCount) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}

func (c *commandCount) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestAcquireSlotIsOneScript: once the script is loaded, taking the last
// free of three slots, and being refused when all are held, are one
// command each (EVALSHA of the slot script).
func TestAcquireSlotIsOneScript(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := store.SlotParams{Name: "jobs", Slots: 3, Holder: testutil.Holder(t, "me"), TTL: time.Minute}
	for k := range 2 {
		h := testutil.Holder(t, fmt.Sprintf("h%d", k))
		_, err := b.store.AcquireSlot(t.Context(), store.SlotParams{Name: p.Name, Slots: p.Slots, Holder: h, TTL: p.TTL})
		require.NoError(t, err)
	}
	cc := &commandCount{}
	b.client.AddHook(cc)
	g, err := b.store.AcquireSlot(t.Context(), p)
	require.NoError(t, err)
	require.Equal(t, 2, g.Slot)
	require.Equal(t, int32(1), cc.n.Load(), "the last free slot is taken in one command")
	_, err = b.store.AcquireSlot(t.Context(), p)
	var all *store.SlotsHeldError
	require.ErrorAs(t, err, &all)
	require.Equal(t, int32(2), cc.n.Load(), "all held is one command too")
}
