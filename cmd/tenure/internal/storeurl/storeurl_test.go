package storeurl_test

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tenure-dev/tenure/store"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/cmd/tenure/internal/storeurl"
	"github.com/tenure-dev/tenure/internal/testutil"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

func TestParse(t *testing.T) {
	t.Parallel()
	home, err := os.UserHomeDir()
	require.NoError(t, err)
	for _, tc := range []struct {
		name, raw      string
		kind           string
		display        string
		path           string
		schema, prefix string
	}{
		{name: "Postgres", raw: "postgres://alice@db.example:5433/jobs?sslmode=disable",
			kind: "PostgreSQL", display: "postgres://alice@db.example:5433/jobs?sslmode=disable"},
		{name: "PostgresQL", raw: "postgresql://db.example/jobs",
			kind: "PostgreSQL", display: "postgresql://db.example/jobs"},
		{name: "UpperCaseScheme", raw: "POSTGRES://db.example/jobs",
			kind: "PostgreSQL", display: "postgres://db.example/jobs"},
		{name: "EverythingFromEnvironment", raw: "postgres://",
			kind: "PostgreSQL", display: "postgres://"},
		{name: "OnlyParameters", raw: "postgres://?sslmode=disable&tenure_schema=ops",
			kind: "PostgreSQL", display: "postgres://?sslmode=disable&tenure_schema=ops", schema: "ops"},
		{name: "PasswordMasked", raw: "postgres://alice:s3cr3t@db.example/jobs",
			kind: "PostgreSQL", display: "postgres://alice:xxxxx@db.example/jobs"},
		{name: "AtSignInPassword", raw: "postgres://alice:pa@55word@db.example/jobs",
			kind: "PostgreSQL", display: "postgres://alice:xxxxx@db.example/jobs"},
		{name: "PasswordParamsMasked", raw: "postgres://db.example/jobs?password=s3cr3t&sslpassword=k3y",
			kind: "PostgreSQL", display: "postgres://db.example/jobs?password=xxxxx&sslpassword=xxxxx"},
		{name: "SchemaAndPrefix", raw: "postgres://db.example/jobs?tenure_schema=ops&tenure_prefix=lease_&sslmode=disable",
			kind: "PostgreSQL", display: "postgres://db.example/jobs?tenure_schema=ops&tenure_prefix=lease_&sslmode=disable",
			schema: "ops", prefix: "lease_"},
		{name: "ListenURLMasked", raw: "postgres://bouncer:6432/jobs?tenure_listen=postgres%3A%2F%2Falice%3Ap%2540ss%40db%3A5432%2Fjobs",
			kind: "PostgreSQL", display: "postgres://bouncer:6432/jobs?tenure_listen=postgres%3A%2F%2Falice%3Axxxxx%40db%3A5432%2Fjobs"},
		{name: "ListenOff", raw: "postgres://bouncer:6432/jobs?tenure_listen=off",
			kind: "PostgreSQL", display: "postgres://bouncer:6432/jobs?tenure_listen=off"},
		{name: "SurroundingSpace", raw: "  sqlite:/var/lib/job/tenure.db\n",
			kind: "SQLite", display: "sqlite:/var/lib/job/tenure.db", path: "/var/lib/job/tenure.db"},
		{name: "SQLiteAbsolute", raw: "sqlite:/var/lib/job/tenure.db",
			kind: "SQLite", display: "sqlite:/var/lib/job/tenure.db", path: "/var/lib/job/tenure.db"},
		{name: "SQLiteRelative", raw: "sqlite:state/tenure.db",
			kind: "SQLite", display: "sqlite:state/tenure.db", path: "state/tenure.db"},
		{name: "SQLiteTripleSlash", raw: "sqlite:///var/lib/job/tenure.db",
			kind: "SQLite", display: "sqlite:/var/lib/job/tenure.db", path: "/var/lib/job/tenure.db"},
		{name: "SQLiteHome", raw: "sqlite:~/jobs/tenure.db",
			kind: "SQLite", display: "sqlite:" + filepath.Join(home, "jobs/tenure.db"), path: filepath.Join(home, "jobs/tenure.db")},
		{name: "SQLiteLiteralPath", raw: "SQLite:/tmp/a%20b?c.db",
			kind: "SQLite", display: "sqlite:/tmp/a%20b?c.db", path: "/tmp/a%20b?c.db"},
		{name: "AlwaysLeader", raw: "always:the report is idempotent",
			kind: "always-leader", display: "always:the report is idempotent"},
		{name: "AlwaysLeaderEncoded", raw: "always:the%20report%20is%20idempotent",
			kind: "always-leader", display: "always:the report is idempotent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := storeurl.Parse(tc.raw)
			require.NoError(t, err)
			require.Equal(t, tc.kind, got.Backend.Name())
			require.Equal(t, tc.display, got.Display)
			path, schema, prefix := fields(got)
			require.Equal(t, tc.path, path)
			require.Equal(t, tc.schema, schema)
			require.Equal(t, tc.prefix, prefix)
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
		{name: "RedisPrefixTwice", raw: "redis://localhost?tenure_prefix=a&tenure_prefix=b", want: []string{"tenure_prefix must be given once"}},
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
		{name: "AlwaysLeaderBadEscape", raw: "always:50%", want: []string{"percent-encoding"}},
		{name: "SQLiteHost", raw: "sqlite://host/x.db", want: []string{"names a host"}},
		{name: "PostgresOpaque", raw: "postgres:db.example/jobs", want: []string{"not a valid PostgreSQL URL"}},
		{name: "PostgresBadPort", raw: "postgres://alice:pa55word@db.example:port/jobs", want: []string{"not a valid URL", "invalid port"}, secret: "pa55word"},
		{name: "PostgresBadUserinfo", raw: "postgres://alice:pa55word@db.exa mple/jobs", want: []string{"not a valid URL", "xxxxx"}, secret: "pa55word"},
		{name: "PostgresBadEscape", raw: "postgres://db.example/jobs?password=hunter2%zz", want: []string{"not a valid URL"}, secret: "hunter2"},
		{name: "ListenTwice", raw: "postgres://h/db?tenure_listen=off&tenure_listen=off", want: []string{"tenure_listen must be given once"}},
		{name: "ListenNotPostgres", raw: "postgres://h/db?tenure_listen=redis%3A%2F%2Fu%3Apw1234%40h", want: []string{"tenure_listen", "off", "postgres://"}, secret: "pw1234"},
		{name: "ListenWithTenureParams", raw: "postgres://h/db?tenure_listen=postgres%3A%2F%2Fu%3Apw1234%40h%2Fdb%3Ftenure_schema%3Dx", want: []string{"tenure_listen", "no tenure_ parameters"}, secret: "pw1234"},
		{name: "ListenBadURL", raw: "postgres://h/db?tenure_listen=postgres%3A%2F%2Fu%3Apw1234%40h%3Aport", want: []string{"tenure_listen", "invalid port"}, secret: "pw1234"},
		{name: "SchemaTwice", raw: "postgres://h/db?tenure_schema=a&tenure_schema=b", want: []string{"tenure_schema must be given once"}},
		{name: "SchemaEmpty", raw: "postgres://h/db?tenure_schema=", want: []string{"tenure_schema must be given once, with a value"}},
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
		require.Equal(t, &storeurl.SQLite{Path: "/a.db"}, got.Backend)
	})
	t.Run("Environment", func(t *testing.T) {
		t.Parallel()
		got, err := storeurl.Resolve("", env(map[string]string{storeurl.EnvVar: "postgres://h/db"}))
		require.NoError(t, err)
		require.IsType(t, &storeurl.Postgres{}, got.Backend)
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
	require.Equal(t, &storeurl.SQLite{Path: filepath.Join(dir, "tenure", "tenure.db")}, got.Backend)
	require.Equal(t, got.Backend.(*storeurl.SQLite).Path, got.File())
	require.Equal(t, "sqlite:"+got.File(), got.Display)
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

func TestWrapRedactsAndKeepsSentinels(t *testing.T) {
	t.Parallel()
	tg, err := storeurl.Parse("postgres://u:Sup3rSecret@h/db")
	require.NoError(t, err)
	err = tg.Wrap(&store.HeldError{Name: "Sup3rSecret\nx"})
	require.ErrorIs(t, err, store.ErrHeld)
	require.NotContains(t, err.Error(), "Sup3rSecret")
	require.NotContains(t, err.Error(), "\n")
	require.NoError(t, tg.Wrap(nil))
}

// TestSchemesAreTheParsedOnes: every scheme of Schemes parses (a URL of it
// may be refused for its parts, never for its scheme), Supported shows it,
// and a scheme left out of Schemes is refused as unsupported.
func TestSchemesAreTheParsedOnes(t *testing.T) {
	t.Parallel()
	for _, s := range storeurl.Schemes {
		_, err := storeurl.Parse(s + "://")
		if err != nil {
			require.NotContains(t, err.Error(), "not supported", s)
		}
		require.Contains(t, storeurl.Supported, s+":", "Supported shows %s", s)
	}
	_, err := storeurl.Parse("zookeeper://h")
	require.ErrorContains(t, err, `scheme "zookeeper" is not supported`)
}

func TestParseListen(t *testing.T) {
	t.Parallel()
	got, err := storeurl.Parse("postgres://bouncer:6432/jobs?default_query_exec_mode=exec&tenure_listen=" +
		url.QueryEscape("postgres://alice:p@ss@db:5432/jobs?sslmode=disable"))
	require.NoError(t, err)
	pg := got.Backend.(*storeurl.Postgres)
	require.Equal(t, "postgres://alice:p%40ss@db:5432/jobs?sslmode=disable", pg.Listen)
	require.False(t, pg.NoListen)
	require.Equal(t, "postgres://bouncer:6432/jobs?default_query_exec_mode=exec", pg.URL, "tenure_listen is tenure's, not pgx's")
	require.NotContains(t, got.Display, "p@ss")
	require.NotContains(t, got.Redact("failed: "+pg.Listen), "p@ss")

	got, err = storeurl.Parse("postgres://bouncer:6432/jobs?tenure_listen=off")
	require.NoError(t, err)
	require.Equal(t, &storeurl.Postgres{URL: "postgres://bouncer:6432/jobs", NoListen: true}, got.Backend)
}

// fields returns what TestParse compares of a parsed URL: an SQLite
// store's path, a PostgreSQL store's schema and prefix.
func fields(t storeurl.Target) (path, schema, prefix string) {
	if s, ok := t.Backend.(*storeurl.SQLite); ok {
		path = s.Path
	}
	if p, ok := t.Backend.(*storeurl.Postgres); ok {
		schema, prefix = p.Schema, p.Prefix
	}
	return path, schema, prefix
}
