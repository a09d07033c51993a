package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/store"

	"github.com/stretchr/testify/require"
)

func testClose(t *testing.T, h Harness) {
	t.Run("EveryCallFails", func(t *testing.T) {
		t.Parallel()
		b, g := setupHeld(t, h)
		require.NoError(t, b.store.Close())
		ctx := t.Context()

		_, err := b.store.Acquire(ctx, store.AcquireParams{Name: g.Name + "_new", Holder: g.Holder, TTL: longTTL})
		require.ErrorIs(t, err, store.ErrClosed, "Acquire")
		_, err = b.store.Renew(ctx, []store.RenewParams{{Name: g.Name, Holder: g.Holder, Token: g.Token, Seq: g.Seq, TTL: longTTL}})
		require.ErrorIs(t, err, store.ErrClosed, "Renew")
		err = b.store.Release(ctx, store.ReleaseParams{Name: g.Name, Holder: g.Holder, Token: g.Token})
		require.ErrorIs(t, err, store.ErrClosed, "Release")
		_, err = b.store.Get(ctx, g.Name)
		require.ErrorIs(t, err, store.ErrClosed, "Get")

		if lister, ok := b.store.(store.Lister); ok {
			_, err = lister.List(ctx)
			require.ErrorIs(t, err, store.ErrClosed, "List")
		}
		if n, ok := b.store.(store.Notifier); ok {
			done := make(chan error, 1)
			go func() { done <- n.Listen(context.WithoutCancel(ctx), func(store.Notice) {}) }()
			select {
			case err := <-done:
				require.ErrorIs(t, err, store.ErrClosed, "Listen")
			case <-time.After(eventTimeout):
				t.Fatalf("Listen on a closed store did not return within %s", eventTimeout)
			}
		}
	})
}
