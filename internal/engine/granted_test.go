package engine

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tenure-dev/tenure/store"
)

// TestGranted: a tenure acquired outside the engine (a slot taken in one
// store step) is held as if the engine had sent the acquisition: trusted
// from when it was sent, renewed by the engine, and given back when it
// cannot be trusted or the name is taken.
func TestGranted(t *testing.T) {
	t.Parallel()
	grant := func(h *harness, name string, token store.Token) Granted {
		return Granted{Holder: h.e.Holder(), SentAt: h.now,
			Grant: store.Grant{Name: name, Holder: h.e.Holder(), Token: token, Seq: 1, Remaining: ttl}}
	}

	t.Run("HeldFromWhenSent", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		g := grant(h, "jobs#1", 7)
		h.advance(time.Second)
		a := only[Acquired](t, h.step(g))
		require.Equal(t, "jobs#1", a.Name)
		require.Equal(t, store.Token(7), a.Token)
		require.Equal(t, g.SentAt, a.Anchor, "trust counts from the send, not the answer")
		require.Less(t, a.Deadline, g.SentAt.Mono+ttl)
		send := only[SendRenew](t, h.tick())
		require.Equal(t, "jobs#1", send.Items[0].Name, "the engine renews it")
	})

	t.Run("RetiredIdentityGivesBack", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		g := grant(h, "jobs#0", 3)
		h.step(Revoke{})
		acts := h.step(g)
		rel := only[SendRelease](t, acts)
		require.Equal(t, store.Token(3), rel.Token)
		require.Equal(t, g.Holder, rel.Holder)
	})

	t.Run("TooLateGivesBack", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		g := grant(h, "jobs#0", 3)
		h.advance(ttl)
		acts := h.step(g)
		require.Equal(t, store.Token(3), only[SendRelease](t, acts).Token)
		require.NotNil(t, only[AcquireFailed](t, acts).Err)
	})

	t.Run("TrackedNameIsBusy", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		h.acquire("jobs#2", 1, time.Millisecond)
		acts := h.step(grant(h, "jobs#2", 9))
		require.True(t, only[AcquireFailed](t, acts).Busy)
		require.Equal(t, store.Token(9), only[SendRelease](t, acts).Token)
	})
}
