package storeurl_test

import (
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/cmd/tenure/internal/storeurl"
	"github.com/tenure-dev/tenure/internal/testserver"
	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/mysqlstore"
)

func TestParseMySQL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, raw, display string
		cfg                mysqlstore.Config
	}{
		{name: "Plain", raw: "mysql://alice@db.example:3307/jobs",
			display: "mysql://alice@db.example:3307/jobs", cfg: mysqlstore.Config{Database: "jobs"}},
		{name: "MariaDB", raw: "mariadb://db.example/jobs",
			display: "mariadb://db.example/jobs", cfg: mysqlstore.Config{Database: "jobs"}},
		{name: "PasswordMasked", raw: "mysql://alice:s3cr3t@db.example/jobs",
			display: "mysql://alice:xxxxx@db.example/jobs", cfg: mysqlstore.Config{Database: "jobs"}},
		{name: "PrefixAndDriverParams", raw: "mysql://db.example/jobs?tenure_prefix=lease_&tls=false&readTimeout=5s",
			display: "mysql://db.example/jobs?tenure_prefix=lease_&tls=false&readTimeout=5s", cfg: mysqlstore.Config{Database: "jobs", TablePrefix: "lease_"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			target, err := storeurl.Parse(tc.raw)
			require.NoError(t, err)
			require.Equal(t, storeurl.MySQL, target.Kind)
			require.Equal(t, tc.display, target.Display)
			require.Equal(t, tc.cfg, target.MySQL)
		})
	}
}

func TestParseMySQLRefuses(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct{ raw, want string }{
		"NoDatabase":    {raw: "mysql://alice:s3cr3t@db.example", want: "names no database"},
		"NestedPath":    {raw: "mysql://db.example/a/b", want: "names no database"},
		"BadPrefix":     {raw: "mysql://db.example/jobs?tenure_prefix=a%0Ab", want: "control character"},
		"EmptyPrefix":   {raw: "mysql://db.example/jobs?tenure_prefix=", want: "must be given once"},
		"BadDriverParm": {raw: "mysql://alice:s3cr3t@db.example/jobs?timeout=soon", want: "timeout"},
		"Opaque":        {raw: "mysql:db.example/jobs", want: "not a valid mysql URL"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := storeurl.Parse(tc.raw)
			require.ErrorIs(t, err, store.ErrInvalid)
			require.ErrorContains(t, err, tc.want)
			require.NotContains(t, err.Error(), "s3cr3t", "secrets are never echoed")
		})
	}
}

func TestOpenMySQL(t *testing.T) {
	t.Parallel()
	owner := testserver.MySQLDB(t, "")
	cfg := testserver.MySQLConfig(t)
	t.Cleanup(func() { testserver.MySQLDrop(t, owner, cfg) })
	u, err := url.Parse(testserver.MySQLURL())
	require.NoError(t, err)
	q := u.Query()
	q.Set(storeurl.ParamPrefix, cfg.TablePrefix)
	u.RawQuery = q.Encode()
	target, err := storeurl.Parse(u.String())
	require.NoError(t, err)
	opened, err := target.Open(t.Context(), storeurl.Options{})
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
		_, err = target.Open(t.Context(), storeurl.Options{})
		require.ErrorIs(t, err, store.ErrUnavailable)
		require.NotContains(t, err.Error(), "s3cr3t")
	})
}
