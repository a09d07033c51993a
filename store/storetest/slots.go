package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/tenure-dev/tenure/store"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/testutil"
)

// slotCount is how many slots the slot tests give a name.
const slotCount = 3

// testSlots checks slots (see [store.SlotAcquirer]) through
// [store.AcquireSlot]: in one step on a store that implements
// SlotAcquirer, slot by slot on one that does not; the answers are the
// same.
func testSlots(t *testing.T, h Harness) {
	t.Run("AtMostN", func(t *testing.T) {
		t.Parallel()
		b := setup(t, h)
		n := name(t)
		var holders []store.Holder
		for k := range slotCount {
			hk := testutil.Holder(t, fmt.Sprintf("h%d", k))
			g := b.acquireSlot(t, n, hk)
			require.Equal(t, k, g.Slot, "the first free slot is taken")
			require.Equal(t, store.SlotName(n, k), g.Name)
			b.requireFresh(t, longTTL, g.Remaining)
			b.requireHeld(t, g.Grant, 1)
			holders = append(holders, hk)
		}
		all := b.slotsHeld(t, n, testutil.Holder(t, "late"))
		for k, held := range all.Held {
			require.Equal(t, holders[k], held.Holder, "slot %d", k)
			require.Equal(t, store.SlotName(n, k), held.Name)
			b.requireRemaining(t, longTTL, held.Remaining)
		}
		require.Positive(t, all.Soonest())
		b.requireAbsent(t, store.SlotName(n, slotCount), "no slot beyond the last is made")
	})

	t.Run("ReleasedSlotGoesToNext", func(t *testing.T) {
		t.Parallel()
		b := setup(t, h)
		n := name(t)
		gs := make([]store.SlotGrant, slotCount)
		for k := range slotCount {
			gs[k] = b.acquireSlot(t, n, testutil.Holder(t, fmt.Sprintf("h%d", k)))
		}
		b.release(t, gs[1].Grant)
		next := b.acquireSlot(t, n, testutil.Holder(t, "next"))
		require.Equal(t, 1, next.Slot, "the released slot is the free one")
		require.Greater(t, next.Token, gs[1].Token, "a slot's tokens grow across its tenures")
		b.slotsHeld(t, n, testutil.Holder(t, "late"))
	})

	t.Run("TokensGrowPerSlot", func(t *testing.T) {
		t.Parallel()
		b := setup(t, h)
		n := name(t)
		last := make(map[int]store.Token)
		for i := range tenures {
			held := make([]store.SlotGrant, 0, slotCount)
			for range 1 + i%slotCount {
				g := b.acquireSlot(t, n, testutil.Holder(t, fmt.Sprintf("h%d", i)))
				require.Greater(t, g.Token, last[g.Slot], "tenure %d of slot %d", i, g.Slot)
				last[g.Slot] = g.Token
				held = append(held, g)
			}
			for _, g := range held {
				res := b.renew(t, g.Grant, longTTL)
				require.True(t, res.Renewed, "a slot renews like any lease")
				b.release(t, res.Grant)
			}
		}
		require.Len(t, last, slotCount)
	})

	t.Run("ConcurrentAtMostN", func(t *testing.T) {
		t.Parallel()
		b := setup(t, h)
		n := name(t)
		const contenders = 8
		var (
			mu      sync.Mutex
			granted = make(map[int]store.Holder)
			refused int
			wg      sync.WaitGroup
			errs    = make(chan error, contenders)
		)
		for i := range contenders {
			hi := testutil.Holder(t, fmt.Sprintf("c%d", i))
			wg.Go(func() {
				g, err := store.AcquireSlot(t.Context(), b.store, store.SlotParams{Name: n, Slots: slotCount, Holder: hi, TTL: longTTL})
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					if prev, dup := granted[g.Slot]; dup {
						errs <- fmt.Errorf("slot %d granted to %s and %s", g.Slot, prev, hi)
					}
					granted[g.Slot] = hi
				case isSlotsHeld(err):
					refused++
				default:
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		require.Len(t, granted, slotCount, "every slot is taken, each once")
		require.Equal(t, contenders-slotCount, refused)
	})

	t.Run("RefusesBadInput", func(t *testing.T) {
		t.Parallel()
		b := setup(t, h)
		n := name(t)
		hh := testutil.Holder(t, "holder")
		for _, p := range []store.SlotParams{
			{Name: n, Slots: 0, Holder: hh, TTL: longTTL},
			{Name: n, Slots: store.MaxSlots + 1, Holder: hh, TTL: longTTL},
			{Name: "", Slots: 1, Holder: hh, TTL: longTTL},
			{Name: n, Slots: 2, TTL: longTTL},
			{Name: n, Slots: 2, Holder: hh},
		} {
			_, err := store.AcquireSlot(t.Context(), b.store, p)
			require.ErrorIs(t, err, store.ErrInvalid, "%+v", p)
			if sa, ok := b.store.(store.SlotAcquirer); ok {
				_, err := sa.AcquireSlot(t.Context(), p)
				require.ErrorIs(t, err, store.ErrInvalid, "the store's own AcquireSlot with %+v", p)
			}
		}
		for k := range 2 {
			b.requireAbsent(t, store.SlotName(n, k), "refused input changes nothing")
		}
	})
}

func (b *bundle) acquireSlot(t *testing.T, n string, h store.Holder) store.SlotGrant {
	t.Helper()
	g, err := store.AcquireSlot(t.Context(), b.store, store.SlotParams{Name: n, Slots: slotCount, Holder: h, TTL: longTTL})
	require.NoError(t, err, "acquire a slot of %q by %s", n, h)
	require.Equal(t, store.SlotName(n, g.Slot), g.Name)
	require.Equal(t, h, g.Holder)
	require.Positive(t, g.Token)
	require.Equal(t, int64(1), g.Seq)
	return g
}

// slotsHeld attempts a slot that must be refused because all are held.
func (b *bundle) slotsHeld(t *testing.T, n string, h store.Holder) *store.SlotsHeldError {
	t.Helper()
	g, err := store.AcquireSlot(t.Context(), b.store, store.SlotParams{Name: n, Slots: slotCount, Holder: h, TTL: longTTL})
	require.ErrorIs(t, err, store.ErrHeld, "a slot of %q while all are held: granted %+v", n, g)
	var all *store.SlotsHeldError
	require.ErrorAs(t, err, &all)
	require.Equal(t, n, all.Name)
	require.Len(t, all.Held, slotCount)
	return all
}

func isSlotsHeld(err error) bool {
	var all *store.SlotsHeldError
	return errors.As(err, &all)
}
