package consulstore

import (
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/store"
)

// unreachableStore is a store whose agent cannot be reached: its watches
// fail and back off until they are ended.
func unreachableStore(t *testing.T) *Store {
	t.Helper()
	client, err := api.NewClient(&api.Config{Address: "127.0.0.1:1"})
	require.NoError(t, err)
	s, err := New(client, Config{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

// headOf returns the holder whose place at the head of lease name's line h
// remembers, and whether it remembers one.
func (h *heads) headOf(name string) (store.Holder, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	p := h.places[name]
	if p == nil {
		return store.Holder{}, false
	}
	return p.holder, true
}

func TestHeadsRememberFirstPlacesOnly(t *testing.T) {
	t.Parallel()
	h := unreachableStore(t).heads
	a, b := store.Holder{Label: "a", Instance: "1"}, store.Holder{Label: "b", Instance: "1"}
	held := lease{name: "x", exists: true, index: 7, session: "s"}
	requireHead := func(want store.Holder, msg string) {
		t.Helper()
		got, ok := h.headOf("x")
		require.True(t, ok, msg)
		require.Equal(t, want, got, msg)
	}
	requireNone := func(msg string) {
		t.Helper()
		_, ok := h.headOf("x")
		require.False(t, ok, msg)
	}

	h.placed(b, held, 2, time.Minute)
	requireNone("a place behind the head is not remembered")
	h.placed(a, held, 1, time.Minute)
	requireHead(a, "the head's place is remembered")
	h.placed(b, held, 2, time.Minute)
	requireHead(a, "another follower's later place leaves the head alone")
	h.acquired("x", b)
	requireHead(a, "another holder's acquisition leaves the head in line")
	h.placed(a, held, 2, time.Minute)
	requireNone("a later place for the head forgets it")
	h.placed(a, held, 1, time.Minute)
	h.acquired("x", a)
	requireNone("the head's acquisition forgets it")
	h.placed(a, held, 1, time.Minute)
	h.placed(b, held, 1, time.Minute)
	requireHead(b, "the last refusal to give place 1 names the head")
}

func TestHeadsWatchAtMostMaxAndEndWithListen(t *testing.T) {
	t.Parallel()
	h := unreachableStore(t).heads
	a := store.Holder{Label: "a", Instance: "1"}
	watching := func() int {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.run == nil {
			return 0
		}
		return len(h.run.watches)
	}

	for i := range 3 {
		h.placed(a, lease{name: fmt.Sprintf("early%d", i), exists: true, index: 1, session: "s"}, 1, time.Minute)
	}
	require.Zero(t, watching(), "no watch runs while nobody listens")
	box := h.subscribe()
	require.Equal(t, 3, watching(), "a listener starts the watches of the places known")
	for i := range maxHeadWatches {
		h.placed(a, lease{name: fmt.Sprintf("late%d", i), exists: true, index: 1, session: "s"}, 1, time.Minute)
	}
	require.Equal(t, maxHeadWatches, watching(), "the watches are bounded")
	h.acquired("early0", a)
	require.Equal(t, maxHeadWatches, watching(), "a place forgotten frees a watch for one that waited")
	other := h.subscribe()
	require.Equal(t, maxHeadWatches, watching(), "listeners share the watches")
	h.unsubscribe(other)
	require.Equal(t, maxHeadWatches, watching(), "the watches outlive a listener while another listens")
	h.unsubscribe(box)
	require.Zero(t, watching(), "the last listener ends the watches, and waited for them")
}
