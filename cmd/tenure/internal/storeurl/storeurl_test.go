package storeurl_test

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

	"github.com/hashicorp/consul/api"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/cmd/tenure/internal/storeurl"
	"github.com/tenure-dev/tenure/internal/testserver"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store/consulstore"
	"github.com/tenure-dev/tenure/store/pgstore"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

func TestParse(t *testing.T) {
	t.Parallel()
	home, err := os.UserHomeDir()
	require.NoError(t, err)
	for _, tc := range []struct {
		name, raw string
		kind      storeurl.Kind
		display   string
		path      string
		pg        pgstore.Config
	}{
		{name: "Postgres", raw: "postgres://alice@db.example:5433/jobs?sslmode=disable",
			kind: storeurl.Postgres, display: "postgres://alice@db.example:5433/jobs?sslmode=disable"},
		{name: "PostgresQL", raw: "postgresql://db.example/jobs",
			kind: storeurl.Postgres, display: "postgresql://db.example/jobs"},
		{name: "UpperCaseScheme", raw: "POSTGRES://db.example/jobs",
			kind: storeurl.Postgres, display: "postgres://db.example/jobs"},
		{name: "EverythingFromEnvironment", raw: "postgres://",
			kind: storeurl.Postgres, display: "postgres://"},
		{name: "OnlyParameters", raw: "postgres://?sslmode=disable&tenure_schema=ops",
			kind: storeurl.Postgres, display: "postgres://?sslmode=disable&tenure_schema=ops", pg: pgstore.Config{Schema: "ops"}},
		{name: "PasswordMasked", raw: "postgres://alice:s3cr3t@db.example/jobs",
			kind: storeurl.Postgres, display: "postgres://alice:xxxxx@db.example/jobs"},
		{name: "AtSignInPassword", raw: "postgres://alice:pa@55word@db.example/jobs",
			kind: storeurl.Postgres, display: "postgres://alice:xxxxx@db.example/jobs"},
		{name: "PasswordParamsMasked", raw: "postgres://db.example/jobs?password=s3cr3t&sslpassword=k3y",
			kind: storeurl.Postgres, display: "postgres://db.example/jobs?password=xxxxx&sslpassword=xxxxx"},
		{name: "SchemaAndPrefix", raw: "postgres://db.example/jobs?tenure_schema=ops&tenure_prefix=lease_&sslmode=disable",
			kind: storeurl.Postgres, display: "postgres://db.example/jobs?tenure_schema=ops&tenure_prefix=lease_&sslmode=disable",
			pg: pgstore.Config{Schema: "ops", TablePrefix: "lease_"}},
		{name: "SurroundingSpace", raw: "  sqlite:/var/lib/job/tenure.db\n",
			kind: storeurl.SQLite, display: "sqlite:/var/lib/job/tenure.db", path: "/var/lib/job/tenure.db"},
		{name: "SQLiteAbsolute", raw: "sqlite:/var/lib/job/tenure.db",
			kind: storeurl.SQLite, display: "sqlite:/var/lib/job/tenure.db", path: "/var/lib/job/tenure.db"},
		{name: "SQLiteRelative", raw: "sqlite:state/tenure.db",
			kind: storeurl.SQLite, display: "sqlite:state/tenure.db", path: "state/tenure.db"},
		{name: "SQLiteTripleSlash", raw: "sqlite:///var/lib/job/tenure.db",
			kind: storeurl.SQLite, display: "sqlite:/var/lib/job/tenure.db", path: "/var/lib/job/tenure.db"},
		{name: "SQLiteHome", raw: "sqlite:~/jobs/tenure.db",
			kind: storeurl.SQLite, display: "sqlite:" + filepath.Join(home, "jobs/tenure.db"), path: filepath.Join(home, "jobs/tenure.db")},
		{name: "SQLiteLiteralPath", raw: "SQLite:/tmp/a%20b?c.db",
			kind: storeurl.SQLite, display: "sqlite:/tmp/a%20b?c.db", path: "/tmp/a%20b?c.db"},
		{name: "AlwaysLeader", raw: "always:the report is idempotent",
			kind: storeurl.AlwaysLeader, display: "always:the report is idempotent"},
		{name: "AlwaysLeaderEncoded", raw: "always:the%20report%20is%20idempotent",
			kind: storeurl.AlwaysLeader, display: "always:the report is idempotent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := storeurl.Parse(tc.raw)
			require.NoError(t, err)
			require.Equal(t, tc.kind, got.Kind)
			require.Equal(t, tc.display, got.Display)
			require.Equal(t, tc.path, got.Path)
			require.Equal(t, tc.pg, got.PG)
			require.False(t, got.Default)
		})
	}
}

func TestParseRefuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, raw string
		want      []string // substrings of the message
		secret    string   // must not appear in the message
	}{
		{name: "Empty", raw: "", want: []string{"has no scheme", "postgres://"}},
		{name: "BarePath", raw: "/var/lib/tenure.db", want: []string{"has no scheme", "sqlite:/var/lib/tenure.db"}},
		{name: "Unknown", raw: "mongodb://localhost/db", want: []string{`scheme "mongodb" is not supported`, "postgresql://", "redis://", "etcd://", "consul://"}},
		{name: "RedisOpaque", raw: "redis:localhost:6379", want: []string{"not a valid redis URL", "redis://"}},
		{name: "RedisBadDB", raw: "redis://u:pw1234@localhost:6379/zero", want: []string{"invalid database number", "u:xxxxx@"}, secret: "pw1234"},
		{name: "RedisUnknownOption", raw: "redis://localhost:6379?bogus=1", want: []string{"unexpected option: bogus"}},
		{name: "RedisPrefixTwice", raw: "redis://localhost?tenure_prefix=a&tenure_prefix=b", want: []string{"tenure_prefix must be given once"}},
		{name: "RedisPrefixControl", raw: "redis://localhost?tenure_prefix=a%01b", want: []string{"tenure_prefix", "control character"}},
		{name: "RedisBadPort", raw: "rediss://u:pw1234@localhost:port", want: []string{"not a valid URL", "invalid port"}, secret: "pw1234"},
		{name: "EtcdBadPort", raw: "etcd://127.0.0.1:2379,127.0.0.1:x", want: []string{`endpoint "127.0.0.1:x" is not HOST:PORT`}},
		{name: "EtcdPortRange", raw: "etcd://127.0.0.1:99999", want: []string{"from 1 to 65535"}},
		{name: "EtcdEmptyEndpoint", raw: "etcd://a:1,,b:2", want: []string{"an empty endpoint"}},
		{name: "EtcdPath", raw: "etcd://a:1/x", want: []string{"has a path"}},
		{name: "EtcdUnknownParam", raw: "etcd://a:1?dial_timeout=1s", want: []string{`parameter "dial_timeout" is not known`, "tenure_prefix"}},
		{name: "EtcdPasswordWithoutUser", raw: "etcd://:pw1234@a:1", want: []string{"no user name"}, secret: "pw1234"},
		{name: "EtcdOpaque", raw: "etcd:a:1", want: []string{"not a valid etcd URL"}},
		{name: "ConsulCredentials", raw: "consul://tok:pw1234@a:8500", want: []string{"CONSUL_HTTP_TOKEN"}, secret: "pw1234"},
		{name: "ConsulSeveralAgents", raw: "consul://a:1,b:2", want: []string{"several agents"}},
		{name: "ConsulBadDuration", raw: "consul://a:1?tenure_session_ttl_min=soon", want: []string{"tenure_session_ttl_min", "not a duration"}},
		{name: "ConsulNegativeDuration", raw: "consul://a:1?tenure_lock_delay=-1s", want: []string{"tenure_lock_delay", "not a duration"}},
		{name: "ConsulUnknownParam", raw: "consul://a:1?token=x", want: []string{`parameter "token" is not known`}},
		{name: "ConsulPath", raw: "consul://a:1/v1", want: []string{"has a path"}},
		{name: "SQLiteEmpty", raw: "sqlite:", want: []string{"no file path"}},
		{name: "AlwaysLeaderNoReason", raw: "always:", want: []string{"reason", "always:REASON"}},
		{name: "AlwaysLeaderBlankReason", raw: "always:%20%20", want: []string{"reason"}},
		{name: "AlwaysLeaderBadEscape", raw: "always:50%", want: []string{"percent-encoding"}},
		{name: "SQLiteHost", raw: "sqlite://host/x.db", want: []string{"names a host"}},
		{name: "PostgresOpaque", raw: "postgres:db.example/jobs", want: []string{"not a valid PostgreSQL URL"}},
		{name: "PostgresBadPort", raw: "postgres://alice:pa55word@db.example:port/jobs", want: []string{"not a valid URL", "invalid port"}, secret: "pa55word"},
		{name: "PostgresBadUserinfo", raw: "postgres://alice:pa55word@db.exa mple/jobs", want: []string{"not a valid URL", "xxxxx"}, secret: "pa55word"},
		{name: "PostgresBadEscape", raw: "postgres://db.example/jobs?password=hunter2%zz", want: []string{"not a valid URL"}, secret: "hunter2"},
		{name: "SchemaTwice", raw: "postgres://h/db?tenure_schema=a&tenure_schema=b", want: []string{"tenure_schema must be given once"}},
		{name: "SchemaEmpty", raw: "postgres://h/db?tenure_schema=", want: []string{"tenure_schema must be given once, with a value"}},
		{name: "PrefixDollar", raw: "postgres://u:pw9876@h/db?tenure_prefix=a$b", want: []string{"TablePrefix", "'$'"}, secret: "pw9876"},
		{name: "PrefixTooLong", raw: "postgres://h/db?tenure_prefix=" + strings.Repeat("p", 60), want: []string{"TablePrefix", "maximum"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := storeurl.Parse(tc.raw)
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

func TestResolve(t *testing.T) {
	t.Parallel()
	env := func(m map[string]string) func(string) string {
		return func(k string) string { return m[k] }
	}
	t.Run("FlagWins", func(t *testing.T) {
		t.Parallel()
		got, err := storeurl.Resolve("sqlite:/a.db", env(map[string]string{storeurl.EnvVar: "sqlite:/b.db"}))
		require.NoError(t, err)
		require.Equal(t, "/a.db", got.Path)
	})
	t.Run("Environment", func(t *testing.T) {
		t.Parallel()
		got, err := storeurl.Resolve("", env(map[string]string{storeurl.EnvVar: "postgres://h/db"}))
		require.NoError(t, err)
		require.Equal(t, storeurl.Postgres, got.Kind)
	})
	t.Run("EnvironmentNamedInError", func(t *testing.T) {
		t.Parallel()
		_, err := storeurl.Resolve("", env(map[string]string{storeurl.EnvVar: "mysql://h"}))
		require.ErrorIs(t, err, store.ErrInvalid)
		require.Contains(t, err.Error(), "(from TENURE_STORE)")
	})
}

// TestResolveDefault changes the environment, so it cannot run in parallel.
func TestResolveDefault(t *testing.T) { //nolint:paralleltest // t.Setenv
	dir := t.TempDir()
	t.Setenv("XDG_STATE_HOME", dir)
	got, err := storeurl.Resolve("", func(string) string { return "" })
	require.NoError(t, err)
	require.True(t, got.Default)
	require.Equal(t, storeurl.SQLite, got.Kind)
	require.Equal(t, filepath.Join(dir, "tenure", "tenure.db"), got.Path)
	require.Equal(t, "sqlite:"+got.Path, got.Display)
}

func TestRedact(t *testing.T) {
	t.Parallel()
	tg, err := storeurl.Parse("postgres://alice:p%40ss%2Fword@h/db?sslpassword=k%20ey")
	require.NoError(t, err)
	for _, in := range []string{"p@ss/word", "p%40ss%2Fword", "p@ss%2Fword", "k ey", "k+ey", "k%20ey"} {
		require.Equal(t, "a xxxxx b", tg.Redact("a "+in+" b"), in)
	}
	require.Equal(t, "postgres://alice:xxxxx@h/db?sslpassword=xxxxx", tg.Display)
	require.Equal(t, "nothing secret", tg.Redact("nothing secret"))
}

func TestMigrationSQL(t *testing.T) {
	t.Parallel()
	t.Run("Postgres", func(t *testing.T) {
		t.Parallel()
		tg, err := storeurl.Parse("postgres://h/db?tenure_schema=ops&tenure_prefix=job_")
		require.NoError(t, err)
		s, err := tg.MigrationSQL()
		require.NoError(t, err)
		require.Contains(t, s, `"ops"."job_leases"`)
		require.Contains(t, s, `"ops"."job_fence"`)
		require.Contains(t, s, `"ops"."job_agents"`)
		require.Contains(t, s, `"ops"."job_owners"`)
		g, err := tg.GrantSQL("runner")
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
		s, err := tg.MigrationSQL()
		require.NoError(t, err)
		require.Contains(t, s, "CREATE TABLE IF NOT EXISTS tenure_leases")
		_, err = tg.GrantSQL("runner")
		require.ErrorIs(t, err, store.ErrInvalid)
	})
	for _, raw := range []string{"redis://h", "etcd://h", "consul://h"} {
		t.Run("NoneFor"+raw[:strings.Index(raw, ":")], func(t *testing.T) {
			t.Parallel()
			tg, err := storeurl.Parse(raw)
			require.NoError(t, err)
			_, err = tg.MigrationSQL()
			require.ErrorIs(t, err, store.ErrInvalid)
			require.Contains(t, err.Error(), "keeps no schema")
			_, err = tg.GrantSQL("runner")
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
		o, err := tg.Open(ctx, storeurl.Options{})
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
		_, err = tg.Open(ctx, storeurl.Options{})
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
	owner := testserver.PostgresPool(t, pgx.QueryExecModeCacheStatement, "")

	t.Run("MigrateAndServe", func(t *testing.T) {
		t.Parallel()
		schema := testutil.UniqueName(t)
		t.Cleanup(func() { testserver.PostgresDropSchema(t, owner, schema) })
		tg, err := storeurl.Parse(pgURL(t, nil, "", map[string]string{"tenure_schema": schema, "tenure_prefix": "x_"}))
		require.NoError(t, err)
		require.Equal(t, pgstore.Config{Schema: schema, TablePrefix: "x_"}, tg.PG)
		o, err := tg.Open(ctx, storeurl.Options{})
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
		o, err := tg.Open(ctx, storeurl.Options{})
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
		_, err = tg.Open(ctx, storeurl.Options{ConnectTimeout: 5 * time.Second})
		require.ErrorIs(t, err, store.ErrUnavailable)
		require.Contains(t, err.Error(), "cannot reach PostgreSQL at postgres://alice:xxxxx@"+addr)
		require.NotContains(t, err.Error(), "Sup3rSecret")
		require.NotContains(t, err.Error(), "\n")
	})

	t.Run("BadParameterIsInvalid", func(t *testing.T) {
		t.Parallel()
		tg, err := storeurl.Parse(pgURL(t, url.UserPassword("alice", "Sup3rSecret"), "", map[string]string{"sslmode": "sometimes"}))
		require.NoError(t, err)
		_, err = tg.Open(ctx, storeurl.Options{})
		require.ErrorIs(t, err, store.ErrInvalid)
		require.Contains(t, err.Error(), "sslmode")
		require.NotContains(t, err.Error(), "Sup3rSecret")
	})

	t.Run("WrapRedactsAndKeepsSentinels", func(t *testing.T) {
		t.Parallel()
		tg, err := storeurl.Parse("postgres://u:Sup3rSecret@h/db")
		require.NoError(t, err)
		err = tg.Wrap(&store.HeldError{Name: "Sup3rSecret\nx"})
		require.ErrorIs(t, err, store.ErrHeld)
		require.NotContains(t, err.Error(), "Sup3rSecret")
		require.NotContains(t, err.Error(), "\n")
		require.NoError(t, tg.Wrap(nil))
	})
}

// TestMinTTL checks that the floor the tenure command applies comes from
// the opened store ([store.MinTTLOf]): the contract's minimum for SQLite
// and always-leader, the servers' session_ttl_min a Consul URL gives.
func TestMinTTL(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{"sqlite:" + filepath.Join(t.TempDir(), "x.db"), "always:idempotent"} {
		tg, err := storeurl.Parse(raw)
		require.NoError(t, err)
		o, err := tg.Open(t.Context(), storeurl.Options{})
		require.NoError(t, err)
		require.Equal(t, store.MinTTL, store.MinTTLOf(o.Store), raw)
		require.NoError(t, o.Close())
	}
	for raw, want := range map[string]time.Duration{
		"consul://h":                           consulstore.DefaultMinSessionTTL,
		"consul://h?tenure_session_ttl_min=2s": 2 * time.Second,
		// The contract's minimum still applies below a lower server floor.
		"consul://h?tenure_session_ttl_min=100ms": store.MinTTL,
	} {
		tg, err := storeurl.Parse(raw)
		require.NoError(t, err)
		client, err := api.NewClient(api.DefaultConfig())
		require.NoError(t, err)
		st, err := consulstore.New(client, tg.Consul) // contacts nothing
		require.NoError(t, err)
		require.Equal(t, want, store.MinTTLOf(st), raw)
	}
}
