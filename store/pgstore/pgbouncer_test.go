package pgstore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/tenure-dev/tenure/store"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/testserver/pgserver"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store/pgstore"
	"github.com/tenure-dev/tenure/store/storetest"
)

// bouncerPool returns a pool through b whose connections use the
// default_query_exec_mode mode ("" for pgx's default), closed when t ends.
func bouncerPool(t *testing.T, b *pgserver.PgBouncer, mode string) *pgxpool.Pool {
	t.Helper()
	query := ""
	if mode != "" {
		query = "default_query_exec_mode=" + mode
	}
	pool, err := pgxpool.New(context.Background(), b.URL(query))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// directListen is a ListenConfig on the test server itself.
func directListen(t testing.TB) *pgx.ConnConfig {
	t.Helper()
	cfg, err := pgx.ParseConfig(testutil.PostgresURL())
	require.NoError(t, err)
	return cfg
}

// TestPgBouncerConformance runs the whole suite through PgBouncer in
// transaction mode, in each statement mode it passes, with notifications
// on a direct connection (Config.ListenConfig). With the pool's own
// connection for LISTEN, Notify and Line fail here (they hear nothing);
// with pgx's default mode, statements fail with missing prepared
// statements.
func TestPgBouncerConformance(t *testing.T) {
	t.Parallel()
	b := pgserver.OwnPgBouncer(t)
	owner := pgserver.PostgresPool(t, pgx.QueryExecModeCacheStatement, "")
	for _, mode := range []string{"exec", "simple_protocol", "cache_describe"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			pool := bouncerPool(t, b, mode)
			storetest.Run(t, pgserver.PostgresHarness{Owner: owner, Pool: pool, Config: func(tb testing.TB) pgstore.Config {
				cfg := pgserver.PostgresConfig(tb)
				cfg.ListenConfig = directListen(tb)
				return cfg
			}})
		})
	}
}

func TestPgBouncerCheckPooler(t *testing.T) {
	t.Parallel()
	b := pgserver.OwnPgBouncer(t)

	t.Run("DefaultModeAndPooledListenRefused", func(t *testing.T) {
		t.Parallel()
		s := newStore(t, bouncerPool(t, b, ""), pgserver.PostgresConfig(t))
		err := s.CheckPooler(t.Context())
		require.ErrorIs(t, err, store.ErrInvalid)
		pe, ok := errors.AsType[*pgstore.PoolerError](err)
		require.True(t, ok, "want a *PoolerError, got %v", err)
		require.Equal(t, pgx.QueryExecModeCacheStatement, pe.Mode)
		require.True(t, pe.Listen)
		require.NotEqual(t, pe.ClientPID, pe.ServerPID)
		require.ErrorContains(t, err, "default_query_exec_mode=exec")
		require.ErrorContains(t, err, "Config.ListenConfig")
		require.ErrorContains(t, err, "Config.NoListen")
	})
	t.Run("DescribeExecRefused", func(t *testing.T) {
		t.Parallel()
		cfg := pgserver.PostgresConfig(t)
		cfg.ListenConfig = directListen(t)
		s := newStore(t, bouncerPool(t, b, "describe_exec"), cfg)
		pe, ok := errors.AsType[*pgstore.PoolerError](s.CheckPooler(t.Context()))
		require.True(t, ok)
		require.Equal(t, pgx.QueryExecModeDescribeExec, pe.Mode)
		require.False(t, pe.Listen)
	})
	t.Run("ExecWithoutListenSettingRefused", func(t *testing.T) {
		t.Parallel()
		s := newStore(t, bouncerPool(t, b, "exec"), pgserver.PostgresConfig(t))
		err := s.CheckPooler(t.Context())
		pe, ok := errors.AsType[*pgstore.PoolerError](err)
		require.True(t, ok, "want a *PoolerError, got %v", err)
		require.Zero(t, pe.Mode)
		require.True(t, pe.Listen)
		require.NotContains(t, err.Error(), "default_query_exec_mode")
		// Listen refuses at once rather than LISTEN where nothing is heard.
		lerr := s.Listen(t.Context(), func(store.Notice) { t.Error("a notice through the pooler") })
		require.ErrorIs(t, lerr, store.ErrInvalid)
		_, ok = errors.AsType[*pgstore.PoolerError](lerr)
		require.True(t, ok, "want a *PoolerError, got %v", lerr)
		lerr = s.Subscribe().Listen(t.Context(), func(store.Notice) { t.Error("a notice through the pooler") })
		_, ok = errors.AsType[*pgstore.PoolerError](lerr)
		require.True(t, ok, "want a *PoolerError, got %v", lerr)
	})
	t.Run("ExecWithNoListenPasses", func(t *testing.T) {
		t.Parallel()
		cfg := pgserver.PostgresConfig(t)
		cfg.NoListen = true
		s := newStore(t, bouncerPool(t, b, "exec"), cfg)
		require.NoError(t, s.CheckPooler(t.Context()))
		err := s.Listen(t.Context(), func(store.Notice) {})
		require.ErrorIs(t, err, store.ErrInvalid)
		require.ErrorContains(t, err, "NoListen")
	})
	t.Run("ExecWithListenConfigPasses", func(t *testing.T) {
		t.Parallel()
		cfg := pgserver.PostgresConfig(t)
		cfg.ListenConfig = directListen(t)
		s := newStore(t, bouncerPool(t, b, "exec"), cfg)
		require.NoError(t, s.CheckPooler(t.Context()))
	})
	t.Run("DirectConnectionPasses", func(t *testing.T) {
		t.Parallel()
		s := newStore(t, pgserver.PostgresPool(t, pgx.QueryExecModeCacheStatement, ""), pgserver.PostgresConfig(t))
		require.NoError(t, s.CheckPooler(t.Context()))
	})
}

func TestListenConfigAndNoListenExclusive(t *testing.T) {
	t.Parallel()
	cfg := pgstore.Config{ListenConfig: directListen(t), NoListen: true}
	_, err := pgstore.New(pgserver.PostgresPool(t, pgx.QueryExecModeCacheStatement, ""), cfg)
	require.ErrorIs(t, err, store.ErrInvalid)
	require.ErrorContains(t, err, "ListenConfig and NoListen")
}

// TestPgBouncerLostStatementSaysWhy makes the pooler hand the store's one
// connection another server session than the one its statement was
// prepared on: the error says what the pooler did and what to set.
func TestPgBouncerLostStatementSaysWhy(t *testing.T) {
	t.Parallel()
	b := pgserver.OwnPgBouncer(t)
	owner := pgserver.PostgresPool(t, pgx.QueryExecModeCacheStatement, "")
	cfg := pgserver.PostgresConfig(t)
	pgserver.PostgresSchema(t, owner, cfg)
	pcfg, err := pgxpool.ParseConfig(b.URL(""))
	require.NoError(t, err)
	pcfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(context.Background(), pcfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	s := newStore(t, pool, cfg)
	ctx, cancel := context.WithTimeout(t.Context(), eventTimeout)
	defer cancel()

	// The first call prepares its statement on the pooler's only server
	// session.
	_, err = s.Get(ctx, "lost-statement")
	require.ErrorIs(t, err, store.ErrNotFound)
	// Another client holds that session in a transaction, so the next
	// call gets a new one, where the statement was never prepared.
	other, err := pgx.Connect(ctx, b.URL("default_query_exec_mode=simple_protocol"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = other.Close(context.Background()) })
	tx, err := other.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	_, err = tx.Exec(ctx, "SELECT 1")
	require.NoError(t, err)

	_, err = s.Get(ctx, "lost-statement")
	require.Error(t, err)
	require.NotErrorIs(t, err, store.ErrNotFound)
	require.ErrorContains(t, err, "26000")
	require.ErrorContains(t, err, "default_query_exec_mode=exec")
	require.ErrorContains(t, err, "CheckPooler")
}
