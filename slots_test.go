package tenure_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure"
	"github.com/tenure-dev/tenure/store"
)

// runSlotClient runs a client over s until the test ends.
func runSlotClient(t *testing.T, s store.Store, label string) *tenure.Client {
	t.Helper()
	c, err := tenure.New(s, tenure.Config{Label: label, TTL: ttl})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-ran)
	})
	return c
}

// TestAcquireSlot: a name's n slots are n leases, each taken once, each
// with its own token; when all are held the refusal names every holder,
// and a slot given back is the one the next caller gets.
func TestAcquireSlot(t *testing.T) {
	t.Parallel()
	m := newMemstore(t)
	a, b := runSlotClient(t, m, "a"), runSlotClient(t, m, "b")
	var held []*tenure.Lease
	for k := range 3 {
		l, err := a.AcquireSlot(t.Context(), "migrations", 3)
		require.NoError(t, err)
		slot, ok := l.Slot()
		require.True(t, ok)
		require.Equal(t, k, slot)
		require.Equal(t, tenure.SlotName("migrations", k), l.Name())
		require.Positive(t, l.Token())
		rec, err := m.Get(t.Context(), l.Name())
		require.NoError(t, err)
		require.Equal(t, l.Token(), rec.Token)
		require.Equal(t, a.Holder(), rec.Holder)
		held = append(held, l)
	}
	_, err := b.AcquireSlot(t.Context(), "migrations", 3)
	require.ErrorIs(t, err, tenure.ErrHeld)
	var all *tenure.SlotsHeldError
	require.ErrorAs(t, err, &all)
	require.Len(t, all.Held, 3)
	for k, h := range all.Held {
		require.Equal(t, held[k].Token(), h.Token)
	}

	first := held[1].Token()
	require.NoError(t, held[1].Release(t.Context()))
	l, err := b.AcquireSlot(t.Context(), "migrations", 3)
	require.NoError(t, err)
	slot, _ := l.Slot()
	require.Equal(t, 1, slot, "the slot given back is the free one")
	require.Greater(t, l.Token(), first, "a slot's tokens grow")
	require.Equal(t, b.Holder(), l.Holder())

	_, err = a.AcquireSlot(t.Context(), "migrations", 0)
	require.ErrorIs(t, err, tenure.ErrInvalid)
	_, ok := held[0].Slot()
	require.True(t, ok)
	plain, err := a.Acquire(t.Context(), "plain")
	require.NoError(t, err)
	_, ok = plain.Slot()
	require.False(t, ok, "a plain lease is no slot")
}

// TestCampaignSlotTakesTheFirstFreed: a follower campaigning for a slot
// while all are held for a TTL of 30 s takes the slot that is released,
// when it is released: the store's announcement wakes it long before
// any expiry it was told.
func TestCampaignSlotTakesTheFirstFreed(t *testing.T) {
	t.Parallel()
	m := newMemstore(t)
	a, b := runSlotClient(t, m, "a"), runSlotClient(t, m, "b")
	var held []*tenure.Lease
	for range 2 {
		l, err := a.AcquireSlot(t.Context(), "consumers", 2)
		require.NoError(t, err)
		held = append(held, l)
	}
	got := make(chan *tenure.Lease, 1)
	errs := make(chan error, 1)
	go func() {
		l, err := b.CampaignSlot(t.Context(), "consumers", 2)
		if err != nil {
			errs <- err
			return
		}
		got <- l
	}()
	require.NoError(t, held[1].Release(t.Context()))
	select {
	case l := <-got:
		slot, _ := l.Slot()
		require.Equal(t, 1, slot)
		require.Less(t, l.Remaining(), ttl)
	case err := <-errs:
		t.Fatal(err)
	case <-time.After(10 * time.Second):
		t.Fatal("the campaign did not take the released slot within 10 s of a 30 s TTL")
	}
}

// TestDoSlot runs fn under a slot and releases it after; fn's lease says
// its slot, and an error of fn is returned.
func TestDoSlot(t *testing.T) {
	t.Parallel()
	m := newMemstore(t)
	c := runSlotClient(t, m, "worker")
	boom := errors.New("boom")
	var name string
	err := c.DoSlot(t.Context(), "jobs", 4, func(ctx context.Context, l *tenure.Lease) error {
		slot, ok := l.Slot()
		require.True(t, ok)
		require.Equal(t, 0, slot)
		name = l.Name()
		return boom
	})
	require.ErrorIs(t, err, boom)
	rec, err := m.Get(t.Context(), name)
	require.NoError(t, err)
	require.Equal(t, store.StateReleased, rec.State)
}

// TestSlotWithoutRun: a slot asked of a client whose Run never starts is
// refused once one TTL has passed, and not held.
func TestSlotWithoutRun(t *testing.T) {
	t.Parallel()
	m := newMemstore(t)
	c, err := tenure.New(m, tenure.Config{Label: "idle", TTL: tenure.MinTTL})
	require.NoError(t, err)
	_, err = c.AcquireSlot(t.Context(), "jobs", 2)
	require.ErrorIs(t, err, tenure.ErrNotRunning)
	rec, err := m.Get(t.Context(), tenure.SlotName("jobs", 0))
	require.NoError(t, err)
	require.NotEqual(t, store.StateHeld, rec.State, "the slot taken for nobody has run out by then")
}
