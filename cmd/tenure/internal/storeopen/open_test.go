package storeopen_test

import (
	"context"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/store"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/cmd/tenure/internal/storeopen"
	"github.com/tenure-dev/tenure/cmd/tenure/internal/storeurl"
	"github.com/tenure-dev/tenure/internal/testserver/pgserver"
	"github.com/tenure-dev/tenure/internal/testutil"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

// TestOpenRefuses checks that a URL Parse takes but its store does not
// (a prefix the store cannot use, a Redis URL go-redis refuses, ...) fails
// to open with an error matching store.ErrInvalid, before anything is
// connected, in one line without the URL's password.
func TestOpenRefuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, raw string
		want      []string // substrings of the message
		secret    string   // must not appear in the message
	}{
		{name: "RedisBadDB", raw: "redis://u:pw1234@localhost:6379/zero", want: []string{"invalid database number", "u:xxxxx@"}, secret: "pw1234"},
		{name: "RedisUnknownOption", raw: "redis://localhost:6379?bogus=1", want: []string{"unexpected option: bogus"}},
		{name: "RedisPrefixControl", raw: "redis://localhost?tenure_prefix=a%01b", want: []string{"tenure_prefix", "control character"}},
		{name: "AlwaysLeaderNoReason", raw: "always:", want: []string{"reason", "always:REASON"}},
		{name: "AlwaysLeaderBlankReason", raw: "always:%20%20", want: []string{"reason"}},
		{name: "PrefixDollar", raw: "postgres://u:pw9876@h/db?tenure_prefix=a$b", want: []string{"TablePrefix", "'$'"}, secret: "pw9876"},
		{name: "ListenBadParameter", raw: "postgres://u:pw9876@h/db?tenure_listen=postgres%3A%2F%2Fu%3Apw5432%40h%2Fdb%3Fsslmode%3Dsometimes", want: []string{"tenure_listen", "sslmode"}, secret: "pw5432"},
		{name: "PrefixTooLong", raw: "postgres://h/db?tenure_prefix=" + strings.Repeat("p", 60), want: []string{"TablePrefix", "maximum"}},
		{name: "MySQLBadPrefix", raw: "mysql://db.example/jobs?tenure_prefix=a%0Ab", want: []string{"control character"}, secret: "s3cr3t"},
		{name: "MySQLBadDriverParm", raw: "mysql://alice:s3cr3t@db.example/jobs?timeout=soon", want: []string{"timeout"}, secret: "s3cr3t"},
		{name: "NatsBadBucket", raw: "nats://h?tenure_bucket=a.b", want: []string{"Bucket"}},
		{name: "NatsTooManyReplicas", raw: "nats://h?tenure_replicas=9", want: []string{"Replicas (9)"}},
		{name: "KubernetesBadPrefix", raw: "k8s://jobs?tenure_prefix=Bad_One", want: []string{"Prefix"}, secret: "pw"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tg, err := storeurl.Parse(tc.raw)
			require.NoError(t, err)
			_, err = storeopen.Open(t.Context(), tg, storeopen.Options{ConnectTimeout: time.Second})
			require.ErrorIs(t, err, store.ErrInvalid)
			msg := err.Error()
			require.True(t, strings.HasPrefix(msg, "storeurl: "), msg)
			require.NotContains(t, msg, "\n")
			for _, w := range tc.want {
				require.Contains(t, msg, w)
			}
			if tc.secret != "" {
				require.NotContains(t, msg, tc.secret)
			}
		})
	}
}

func TestMigrationSQL(t *testing.T) {
	t.Parallel()
	t.Run("Postgres", func(t *testing.T) {
		t.Parallel()
		tg, err := storeurl.Parse("postgres://h/db?tenure_schema=ops&tenure_prefix=job_")
		require.NoError(t, err)
		s, err := storeopen.MigrationSQL(tg)
		require.NoError(t, err)
		require.Contains(t, s, `"ops"."job_leases"`)
		require.Contains(t, s, `"ops"."job_fence"`)
		require.Contains(t, s, `"ops"."job_agents"`)
		require.Contains(t, s, `"ops"."job_owners"`)
		g, err := storeopen.GrantSQL(tg, "runner")
		require.NoError(t, err)
		require.Contains(t, g, `"runner"`)
		require.Contains(t, g, `EXECUTE ON FUNCTION "ops"."job_acquire"`)
		require.NotContains(t, g, `"ops"."job_leases"`, "no privilege on the leases table")
		require.Contains(t, g, `"ops"."job_agent_register"`)
	})
	t.Run("SQLitePrintsItsSchema", func(t *testing.T) {
		t.Parallel()
		tg, err := storeurl.Parse("sqlite:/x.db")
		require.NoError(t, err)
		s, err := storeopen.MigrationSQL(tg)
		require.NoError(t, err)
		require.Contains(t, s, "CREATE TABLE IF NOT EXISTS tenure_leases")
		_, err = storeopen.GrantSQL(tg, "runner")
		require.ErrorIs(t, err, store.ErrInvalid)
	})
	for _, raw := range []string{"redis://h", "etcd://h", "consul://h"} {
		t.Run("NoneFor"+raw[:strings.Index(raw, ":")], func(t *testing.T) {
			t.Parallel()
			tg, err := storeurl.Parse(raw)
			require.NoError(t, err)
			_, err = storeopen.MigrationSQL(tg)
			require.ErrorIs(t, err, store.ErrInvalid)
			require.Contains(t, err.Error(), "keeps no schema")
			_, err = storeopen.GrantSQL(tg, "runner")
			require.ErrorIs(t, err, store.ErrInvalid)
		})
	}
}

func TestOpenSQLite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("CreatesAndServes", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "sub", "tenure.db")
		tg, err := storeurl.Parse("sqlite:" + path)
		require.NoError(t, err)
		o, err := storeopen.Open(ctx, tg, storeopen.Options{})
		require.NoError(t, err)
		g, err := o.Store.Acquire(ctx, store.AcquireParams{Name: "job", Holder: testutil.Holder(t, "t"), TTL: time.Minute})
		require.NoError(t, err)
		require.Positive(t, g.Token)
		msg, err := o.Migrate(ctx)
		require.NoError(t, err)
		require.Contains(t, msg, "schema version")
		require.NoError(t, o.Close())
		_, err = os.Stat(path)
		require.NoError(t, err)
	})

	t.Run("DirectoryIsUnavailable", func(t *testing.T) {
		t.Parallel()
		tg, err := storeurl.Parse("sqlite:" + t.TempDir())
		require.NoError(t, err)
		_, err = storeopen.Open(ctx, tg, storeopen.Options{})
		require.ErrorIs(t, err, store.ErrUnavailable)
		require.Contains(t, err.Error(), "is a directory")
	})
}

// pgURL returns the test server's URL with tenure's parameters added.
func pgURL(t *testing.T, userinfo *url.Userinfo, host string, params map[string]string) string {
	t.Helper()
	u, err := url.Parse(testutil.PostgresURL())
	require.NoError(t, err)
	if userinfo != nil {
		u.User = userinfo
	}
	if host != "" {
		u.Host = host
	}
	q := u.Query()
	for k, v := range params {
		q.Set(k, v)
	}
	u.RawQuery = q.Encode()
	return u.String()
}

func TestOpenPostgres(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	owner := pgserver.PostgresPool(t, pgx.QueryExecModeCacheStatement, "")

	t.Run("MigrateAndServe", func(t *testing.T) {
		t.Parallel()
		schema := testutil.UniqueName(t)
		t.Cleanup(func() { pgserver.PostgresDropSchema(t, owner, schema) })
		tg, err := storeurl.Parse(pgURL(t, nil, "", map[string]string{"tenure_schema": schema, "tenure_prefix": "x_"}))
		require.NoError(t, err)
		require.Equal(t, schema, tg.Backend.(*storeurl.Postgres).Schema)
		require.Equal(t, "x_", tg.Backend.(*storeurl.Postgres).Prefix)
		o, err := storeopen.Open(ctx, tg, storeopen.Options{})
		require.NoError(t, err)
		defer func() { require.NoError(t, o.Close()) }()

		_, err = o.Store.Get(ctx, "job")
		require.ErrorIs(t, err, store.ErrNotMigrated)

		msg, err := o.Migrate(ctx)
		require.NoError(t, err)
		require.Contains(t, msg, schema)
		require.Contains(t, msg, "x_leases")
		require.Contains(t, msg, "x_agents")
		reg, err := o.Registry()
		require.NoError(t, err)
		agents, err := reg.Agents(ctx)
		require.NoError(t, err)
		require.Empty(t, agents)
		g, err := o.Store.Acquire(ctx, store.AcquireParams{Name: "job", Holder: testutil.Holder(t, "t"), TTL: time.Minute})
		require.NoError(t, err)
		require.Positive(t, g.Token)

		var app string
		require.NoError(t, owner.QueryRow(ctx,
			"SELECT application_name FROM pg_stat_activity WHERE application_name = 'tenure' LIMIT 1").Scan(&app))
		require.Equal(t, "tenure", app)
	})

	t.Run("EverythingInParameters", func(t *testing.T) {
		t.Parallel()
		u, err := url.Parse(testutil.PostgresURL())
		require.NoError(t, err)
		q := u.Query()
		q.Set("host", u.Hostname())
		q.Set("port", u.Port())
		q.Set("user", u.User.Username())
		q.Set("dbname", strings.TrimPrefix(u.Path, "/"))
		q.Set("tenure_schema", testutil.UniqueName(t))
		tg, err := storeurl.Parse("postgres://?" + q.Encode())
		require.NoError(t, err)
		o, err := storeopen.Open(ctx, tg, storeopen.Options{})
		require.NoError(t, err)
		_, err = o.Store.Get(ctx, "job")
		require.ErrorIs(t, err, store.ErrNotMigrated)
		require.NoError(t, o.Close())
	})

	t.Run("UnreachableIsUnavailableAndRedacted", func(t *testing.T) {
		t.Parallel()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := ln.Addr().String()
		require.NoError(t, ln.Close())
		tg, err := storeurl.Parse(pgURL(t, url.UserPassword("alice", "Sup3rSecret"), addr, nil))
		require.NoError(t, err)
		_, err = storeopen.Open(ctx, tg, storeopen.Options{ConnectTimeout: 5 * time.Second})
		require.ErrorIs(t, err, store.ErrUnavailable)
		require.Contains(t, err.Error(), "cannot reach PostgreSQL at postgres://alice:xxxxx@"+addr)
		require.NotContains(t, err.Error(), "Sup3rSecret")
		require.NotContains(t, err.Error(), "\n")
	})

	t.Run("BadParameterIsInvalid", func(t *testing.T) {
		t.Parallel()
		tg, err := storeurl.Parse(pgURL(t, url.UserPassword("alice", "Sup3rSecret"), "", map[string]string{"sslmode": "sometimes"}))
		require.NoError(t, err)
		_, err = storeopen.Open(ctx, tg, storeopen.Options{})
		require.ErrorIs(t, err, store.ErrInvalid)
		require.Contains(t, err.Error(), "sslmode")
		require.NotContains(t, err.Error(), "Sup3rSecret")
	})
}

// TestMinTTL checks that the floor the tenure command applies comes from
// the opened store ([store.MinTTLOf]): the contract's minimum for SQLite
// and always-leader (storeurl's TestConsulMinTTL checks the servers'
// session_ttl_min a Consul URL gives).
func TestMinTTL(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{"sqlite:" + filepath.Join(t.TempDir(), "x.db"), "always:idempotent"} {
		tg, err := storeurl.Parse(raw)
		require.NoError(t, err)
		o, err := storeopen.Open(t.Context(), tg, storeopen.Options{})
		require.NoError(t, err)
		require.Equal(t, store.MinTTL, store.MinTTLOf(o.Store), raw)
		require.NoError(t, o.Close())
	}

}
