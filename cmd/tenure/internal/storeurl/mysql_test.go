package storeurl_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/cmd/tenure/internal/storeurl"
	"github.com/tenure-dev/tenure/store"
)

func TestParseMySQL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, raw, display string
		database, prefix   string
	}{
		{name: "Plain", raw: "mysql://alice@db.example:3307/jobs",
			display: "mysql://alice@db.example:3307/jobs", database: "jobs"},
		{name: "MariaDB", raw: "mariadb://db.example/jobs",
			display: "mariadb://db.example/jobs", database: "jobs"},
		{name: "PasswordMasked", raw: "mysql://alice:s3cr3t@db.example/jobs",
			display: "mysql://alice:xxxxx@db.example/jobs", database: "jobs"},
		{name: "PrefixAndDriverParams", raw: "mysql://db.example/jobs?tenure_prefix=lease_&tls=false&readTimeout=5s",
			display: "mysql://db.example/jobs?tenure_prefix=lease_&tls=false&readTimeout=5s", database: "jobs", prefix: "lease_"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			target, err := storeurl.Parse(tc.raw)
			require.NoError(t, err)
			m, ok := target.Backend.(*storeurl.MySQL)
			require.True(t, ok)
			require.Equal(t, tc.display, target.Display)
			require.Equal(t, tc.database, m.Database)
			require.Equal(t, tc.prefix, m.Prefix)
		})
	}
}

func TestParseMySQLRefuses(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct{ raw, want string }{
		"NoDatabase":  {raw: "mysql://alice:s3cr3t@db.example", want: "names no database"},
		"NestedPath":  {raw: "mysql://db.example/a/b", want: "names no database"},
		"EmptyPrefix": {raw: "mysql://db.example/jobs?tenure_prefix=", want: "must be given once"},
		"Opaque":      {raw: "mysql:db.example/jobs", want: "not a valid mysql URL"},
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
