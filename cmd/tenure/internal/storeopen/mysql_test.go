package storeopen_test

import (
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/cmd/tenure/internal/storeopen"
	"github.com/tenure-dev/tenure/cmd/tenure/internal/storeurl"
	"github.com/tenure-dev/tenure/internal/testserver/mysqlserver"
	"github.com/tenure-dev/tenure/store"
)

func TestOpenMySQL(t *testing.T) {
	t.Parallel()
	owner := mysqlserver.MySQLDB(t, "")
	cfg := mysqlserver.MySQLConfig(t)
	t.Cleanup(func() { mysqlserver.MySQLDrop(t, owner, cfg) })
	u, err := url.Parse(mysqlserver.MySQLURL())
	require.NoError(t, err)
	q := u.Query()
	q.Set(storeurl.ParamPrefix, cfg.TablePrefix)
	u.RawQuery = q.Encode()
	target, err := storeurl.Parse(u.String())
	require.NoError(t, err)
	opened, err := storeopen.Open(t.Context(), target, storeopen.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, opened.Close()) })
	_, err = opened.Store.Get(t.Context(), "job")
	require.ErrorIs(t, err, store.ErrNotMigrated)
	msg, err := opened.Migrate(t.Context())
	require.NoError(t, err)
	require.Contains(t, msg, "migrated the MySQL store")
	_, err = opened.Store.Get(t.Context(), "job")
	require.ErrorIs(t, err, store.ErrNotFound)

	t.Run("Unreachable", func(t *testing.T) {
		t.Parallel()
		target, err := storeurl.Parse("mysql://alice:s3cr3t@127.0.0.1:1/jobs")
		require.NoError(t, err)
		_, err = storeopen.Open(t.Context(), target, storeopen.Options{})
		require.ErrorIs(t, err, store.ErrUnavailable)
		require.NotContains(t, err.Error(), "s3cr3t")
	})
}
