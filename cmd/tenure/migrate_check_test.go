package main

import (
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/cmd/tenure/internal/cli"
	"github.com/tenure-dev/tenure/cmd/tenure/internal/storeurl"
	"github.com/tenure-dev/tenure/internal/testserver/pgserver"
	"github.com/tenure-dev/tenure/internal/testserver/redisserver"
	"github.com/tenure-dev/tenure/internal/testutil"
)

// TestMigrateCheck runs `tenure migrate --check` and `tenure migrate`
// against the real servers: --check changes nothing and exits 78 while the
// schema is behind, 0 once it is current; migrate reports each part's
// version and functions before and after.
func TestMigrateCheck(t *testing.T) {
	t.Parallel()

	t.Run("Postgres", func(t *testing.T) {
		t.Parallel()
		owner := pgserver.PostgresPool(t, pgx.QueryExecModeCacheStatement, "")
		schema := testutil.UniqueName(t)
		t.Cleanup(func() { pgserver.PostgresDropSchema(t, owner, schema) })
		u, err := url.Parse(testutil.PostgresURL())
		require.NoError(t, err)
		q := u.Query()
		q.Set(storeurl.ParamSchema, schema)
		u.RawQuery = q.Encode()
		env := testEnv(t, storeurl.EnvVar+"="+u.String())

		p := run(t, env, "migrate", "--check")
		require.Equal(t, cli.ExitNotMigrated, p.code, p.stderr.all())
		out := p.stdout.all()
		require.Contains(t, out, "PostgreSQL store "+u.String()+": schema not migrated (this library's version is 002), migrations to apply: 001_tables, 002_windows, 0 functions current, to install: ")
		require.Contains(t, out, "fleet registry: schema not migrated")
		require.Regexp(t, "^tenure: migrate --check: store schema is not migrated: the schema of .* is behind this version of tenure; run tenure migrate", p.stderr.all())
		var n int
		require.NoError(t, owner.QueryRow(t.Context(), "SELECT count(*) FROM pg_catalog.pg_namespace WHERE nspname = $1", schema).Scan(&n))
		require.Zero(t, n, "--check created nothing")

		p = run(t, env, "migrate")
		require.Equal(t, 0, p.code, p.stderr.all())
		require.Contains(t, p.stdout.all(), "PostgreSQL store "+u.String()+": before: schema not migrated (this library's version is 002)")
		require.Contains(t, p.stdout.all(), "; now: schema version 002 of 002, 19 functions current\n")

		p = run(t, env, "migrate", "--check")
		require.Equal(t, 0, p.code, p.stderr.all())
		require.Contains(t, p.stdout.all(), "PostgreSQL store "+u.String()+": schema version 002 of 002, 19 functions current\n")
		require.Empty(t, p.stderr.all())

		_, err = owner.Exec(t.Context(), "UPDATE "+pgx.Identifier{schema, "tenure_functions"}.Sanitize()+" SET sha256 = 'older' WHERE name = 'renew'")
		require.NoError(t, err)
		p = run(t, env, "migrate", "--check")
		require.Equal(t, cli.ExitNotMigrated, p.code, p.stderr.all())
		require.Contains(t, p.stdout.all(), "18 functions current, to install: renew (changed)")
		p = run(t, env, "migrate")
		require.Equal(t, 0, p.code, p.stderr.all())
		require.Contains(t, p.stdout.all(), "before: schema version 002 of 002, 18 functions current, to install: renew (changed); now: schema version 002 of 002, 19 functions current")
	})

	t.Run("MySQL", func(t *testing.T) {
		t.Parallel()
		u, _ := mysqlURL(t)
		env := testEnv(t, storeurl.EnvVar+"="+u.String())

		p := run(t, env, "migrate", "--check")
		require.Equal(t, cli.ExitNotMigrated, p.code, p.stderr.all())
		require.Contains(t, p.stdout.all(), "MySQL store "+u.String()+": schema not migrated (this library's version is 001), migrations to apply: 001_tables, 0 functions current, to install: ")

		p = run(t, env, "migrate")
		require.Equal(t, 0, p.code, p.stderr.all())
		require.Contains(t, p.stdout.all(), "MySQL store "+u.String()+": before: schema not migrated (this library's version is 001)")
		require.Contains(t, p.stdout.all(), "; now: schema version 001 of 001, 9 functions current")

		p = run(t, env, "migrate", "--check")
		require.Equal(t, 0, p.code, p.stderr.all())
		require.Contains(t, p.stdout.all(), "MySQL store "+u.String()+": schema version 001 of 001, 9 functions current")
	})

	// A store that keeps no schema says so and exits 0.
	t.Run("Redis", func(t *testing.T) {
		t.Parallel()
		p := run(t, testEnv(t), "migrate", "--check", "--store", redisserver.RedisURL())
		require.Equal(t, 0, p.code, p.stderr.all())
		require.Contains(t, p.stdout.all(), "keeps no schema: nothing to check")
	})

	// An SQLite file is not opened, so not created.
	t.Run("SQLite", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "tenure.db")
		p := run(t, testEnv(t), "migrate", "--check", "--store", "sqlite:"+path)
		require.Equal(t, 0, p.code, p.stderr.all())
		require.Contains(t, p.stdout.all(), "creates and upgrades its schema (version ")
		_, err := os.Stat(path)
		require.ErrorIs(t, err, os.ErrNotExist, "--check created the file")
	})

	t.Run("WithPrint", func(t *testing.T) {
		t.Parallel()
		p := run(t, testEnv(t), "migrate", "--check", "--print")
		require.Equal(t, cli.ExitUsage, p.code)
		require.Contains(t, p.stderr.all(), "--check changes nothing and prints no SQL; it does not go with --print or --token-floor")
	})
}
