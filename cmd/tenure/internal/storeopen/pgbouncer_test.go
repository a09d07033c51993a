package storeopen_test

import (
	"context"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/store"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/cmd/tenure/internal/storeopen"
	"github.com/tenure-dev/tenure/cmd/tenure/internal/storeurl"
	"github.com/tenure-dev/tenure/internal/testserver/pgserver"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store/pgstore"
)

// TestOpenThroughPgBouncer opens a postgres:// URL that names PgBouncer in
// transaction mode: without the settings it needs, Open refuses at once
// and says what to add to the URL; with them, the store migrates, grants,
// releases and hears the release on its direct listening connection.
func TestOpenThroughPgBouncer(t *testing.T) {
	t.Parallel()
	b := pgserver.OwnPgBouncer(t)
	owner := pgserver.PostgresPool(t, pgx.QueryExecModeCacheStatement, "")
	direct := url.QueryEscape(testutil.PostgresURL())

	open := func(t *testing.T, query string) (*storeopen.Opened, error) {
		t.Helper()
		schema := testutil.UniqueName(t)
		t.Cleanup(func() { pgserver.PostgresDropSchema(t, owner, schema) })
		tg, err := storeurl.Parse(b.URL("tenure_schema=" + schema + "&" + query))
		require.NoError(t, err)
		o, err := storeopen.Open(t.Context(), tg, storeopen.Options{})
		if err == nil {
			t.Cleanup(func() { require.NoError(t, o.Close()) })
		}
		return o, err
	}

	t.Run("DefaultsRefused", func(t *testing.T) {
		t.Parallel()
		_, err := open(t, "sslmode=disable")
		require.ErrorIs(t, err, store.ErrInvalid)
		_, ok := errors.AsType[*pgstore.PoolerError](err)
		require.True(t, ok, "want a *pgstore.PoolerError in the chain, got %v", err)
		require.ErrorContains(t, err, "PgBouncer")
		require.ErrorContains(t, err, "default_query_exec_mode=exec")
		require.ErrorContains(t, err, "tenure_listen=URL")
		require.ErrorContains(t, err, "tenure_listen=off")
	})
	t.Run("ListenMissingRefused", func(t *testing.T) {
		t.Parallel()
		_, err := open(t, "default_query_exec_mode=exec")
		require.ErrorIs(t, err, store.ErrInvalid)
		require.ErrorContains(t, err, "tenure_listen=URL")
		require.NotContains(t, err.Error(), "add default_query_exec_mode")
	})
	t.Run("DirectListen", func(t *testing.T) {
		t.Parallel()
		o, err := open(t, "default_query_exec_mode=exec&tenure_listen="+direct)
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		_, err = o.Migrate(ctx)
		require.NoError(t, err)

		notices := make(chan store.Notice, 16)
		lctx, stop := context.WithCancel(ctx)
		listened := make(chan error, 1)
		go func() {
			listened <- o.Store.(store.Notifier).Listen(lctx, func(n store.Notice) { notices <- n })
		}()
		defer func() {
			stop()
			<-listened
		}()
		require.Empty(t, testutil.Receive(t, notices, "the subscription's empty notice", 10*time.Second).Name)

		h := testutil.Holder(t, "bounced")
		g, err := o.Store.Acquire(ctx, store.AcquireParams{Name: "job", Holder: h, TTL: time.Minute})
		require.NoError(t, err)
		require.NoError(t, o.Store.Release(ctx, store.ReleaseParams{Name: "job", Holder: h, Token: g.Token}))
		for {
			n := testutil.Receive(t, notices, "the release's notice", 10*time.Second)
			if n.Name == "job" && n.Kind == store.NoticeReleased {
				break
			}
		}
	})
	t.Run("ListenOff", func(t *testing.T) {
		t.Parallel()
		o, err := open(t, "default_query_exec_mode=exec&tenure_listen=off")
		require.NoError(t, err)
		_, err = o.Migrate(t.Context())
		require.NoError(t, err)
		_, err = o.Store.Acquire(t.Context(), store.AcquireParams{Name: "job", Holder: testutil.Holder(t, "polling"), TTL: time.Minute})
		require.NoError(t, err)
		err = o.Store.(store.Notifier).Listen(t.Context(), func(store.Notice) {})
		require.ErrorIs(t, err, store.ErrInvalid)
	})
}
