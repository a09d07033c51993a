package httpfence_test

import (
	"net/http"
	"testing"

	"github.com/tenure-dev/tenure/store"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/fence/httpfence"
	"github.com/tenure-dev/tenure/internal/testserver/pgserver"
	"github.com/tenure-dev/tenure/store/pgstore"
)

func TestPostgres(t *testing.T) {
	t.Parallel()

	t.Run("TwoInstancesShareTheFence", func(t *testing.T) {
		t.Parallel()
		owner := pgserver.PostgresPool(t, pgx.QueryExecModeCacheStatement, "")
		cfg := pgserver.PostgresConfig(t)
		pgserver.PostgresSchema(t, owner, cfg)
		role := pgserver.PostgresRole(t, owner)
		pgserver.PostgresGrant(t, owner, cfg, role)
		pool := pgserver.PostgresPool(t, pgx.QueryExecModeCacheStatement, role)
		obj, err := cfg.Objects()
		require.NoError(t, err)
		// A fence takes only tokens the store issued: count 1..10 as issued.
		_, err = owner.Exec(t.Context(), "SELECT setval($1::regclass, 10)", pgx.Identifier{obj.Schema, obj.TokenSeq}.Sanitize())
		require.NoError(t, err)

		// Two instances of one service, each with its own pool and fence store.
		instance := func() *testBundle {
			fences, err := httpfence.NewPostgres(pool, cfg)
			require.NoError(t, err)
			b := &testBundle{errs: make(chan error, 1)}
			b.handler = b.wrap(t, fences)
			return b
		}
		one, two := instance(), instance()

		require.Equal(t, http.StatusOK, one.put(t, "invoices", "", "7").StatusCode)
		require.Equal(t, http.StatusOK, two.put(t, "invoices", "", "7").StatusCode, "an equal token passes")
		resp := two.put(t, "invoices", "", "6")
		require.Equal(t, http.StatusConflict, resp.StatusCode, "the other instance refuses a stale token")
		var fe *store.FencedError
		require.ErrorAs(t, httpfence.ResponseError(resp), &fe)
		require.Equal(t, store.FencedError{Resource: "invoices", Offered: 6, Recorded: 7}, *fe)
		require.Equal(t, int64(1), two.calls.Load(), "the stale request never reached the handler")

		require.Equal(t, http.StatusOK, two.put(t, "invoices", "", "8").StatusCode)
		require.Equal(t, http.StatusConflict, one.put(t, "invoices", "", "7").StatusCode)
		require.Equal(t, http.StatusOK, one.put(t, "other", "", "1").StatusCode)

		var recorded int64
		require.NoError(t, owner.QueryRow(t.Context(),
			"SELECT token FROM "+pgx.Identifier{obj.Schema, obj.Fences}.Sanitize()+" WHERE resource = 'invoices'").Scan(&recorded))
		require.Equal(t, int64(8), recorded, "the fence lives in tenure's fence table")
	})

	t.Run("NotMigrated", func(t *testing.T) {
		t.Parallel()
		owner := pgserver.PostgresPool(t, pgx.QueryExecModeCacheStatement, "")
		fences, err := httpfence.NewPostgres(owner, pgserver.PostgresConfig(t))
		require.NoError(t, err)
		b := &testBundle{errs: make(chan error, 1)}
		b.handler = b.wrap(t, fences)
		resp := b.put(t, "invoices", "", "1")
		require.Equal(t, http.StatusInternalServerError, resp.StatusCode)
		require.ErrorIs(t, <-b.errs, store.ErrNotMigrated)
		require.Zero(t, b.calls.Load())
	})

	t.Run("Invalid", func(t *testing.T) {
		t.Parallel()
		_, err := httpfence.NewPostgres(nil, pgstore.Config{})
		require.ErrorIs(t, err, store.ErrInvalid)
		owner := pgserver.PostgresPool(t, pgx.QueryExecModeCacheStatement, "")
		_, err = httpfence.NewPostgres(owner, pgstore.Config{TablePrefix: "a$"})
		require.ErrorIs(t, err, store.ErrInvalid)
		fences, err := httpfence.NewPostgres(owner, pgstore.Config{})
		require.NoError(t, err)
		require.ErrorIs(t, fences.Fence(t.Context(), "", 1), store.ErrInvalid)
		require.ErrorIs(t, fences.Fence(t.Context(), "r", 0), store.ErrInvalid)
	})
}
