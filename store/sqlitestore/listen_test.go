package sqlitestore_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/sqlitestore"
)

// TestListenAcrossStores checks what one store's Listen reports of
// another store's (another process's) commits to the same file: releases
// and new tenures in order, renewals not at all.
func TestListenAcrossStores(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "tenure.db")
	writer := openStore(t, path, sqlitestore.Config{})
	listener := openStore(t, path, sqlitestore.Config{PollInterval: time.Millisecond})

	names := make(chan string, 100)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- listener.Listen(ctx, func(n store.Notice) { names <- n.Name }) }()
	defer func() {
		cancel()
		require.ErrorIs(t, <-done, context.Canceled)
	}()
	next := func() string {
		t.Helper()
		select {
		case n := <-names:
			return n
		case <-time.After(10 * time.Second):
			t.Fatal("no notification within 10s")
			return ""
		}
	}
	require.Empty(t, next(), "Listen first announces its subscription")

	h := testutil.Holder(t, "holder")
	g, err := writer.Acquire(t.Context(), store.AcquireParams{Name: "a", Holder: h, TTL: time.Minute})
	require.NoError(t, err)
	require.Equal(t, "a", next(), "a new tenure")
	rs, err := writer.Renew(t.Context(), []store.RenewParams{{Name: "a", Holder: h, Token: g.Token, Seq: g.Seq, TTL: time.Minute}})
	require.NoError(t, err)
	require.True(t, rs[0].Renewed)
	gb, err := writer.Acquire(t.Context(), store.AcquireParams{Name: "b", Holder: h, TTL: time.Minute})
	require.NoError(t, err)
	require.NoError(t, writer.Release(t.Context(), store.ReleaseParams{Name: "b", Holder: h, Token: gb.Token}))
	require.NoError(t, writer.Release(t.Context(), store.ReleaseParams{Name: "a", Holder: h, Token: g.Token}))
	// The renewal of a announced nothing: after a's tenure come b's tenure
	// and release (one name, or two when a poll fell between them), then
	// a's release.
	require.Equal(t, "b", next())
	n := next()
	if n == "b" {
		n = next()
	}
	require.Equal(t, "a", n)
	select {
	case n := <-names:
		t.Fatalf("unexpected notification %q", n)
	default:
	}
}
