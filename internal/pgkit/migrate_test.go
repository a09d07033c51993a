package pgkit_test

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/tenure-dev/tenure/store"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/pgkit"
	"github.com/tenure-dev/tenure/internal/storekit"
)

func TestLoad(t *testing.T) {
	t.Parallel()
	fsys := fstest.MapFS{
		"m/001_init.up.sql":  {Data: []byte("CREATE TABLE {{t}} ();")},
		"m/002_more.up.sql":  {Data: []byte("ALTER TABLE {{t}} ADD c int;")},
		"gap/001_a.up.sql":   {Data: []byte("")},
		"gap/003_c.up.sql":   {Data: []byte("")},
		"bad/1_init.up.sql":  {Data: []byte("")},
		"bad/002_x.down.sql": {Data: []byte("")},
	}
	ms, err := pgkit.Load("owner", fsys, "m")
	require.NoError(t, err)
	require.Equal(t, []pgkit.Migration{
		{Version: 1, Name: "init", SQL: "CREATE TABLE {{t}} ();"},
		{Version: 2, Name: "more", SQL: "ALTER TABLE {{t}} ADD c int;"},
	}, ms)
	_, err = pgkit.Load("owner", fsys, "gap")
	require.ErrorContains(t, err, "owner: embedded migration \"003_c.up.sql\": expected version 002")
	_, err = pgkit.Load("owner", fsys, "bad")
	require.ErrorContains(t, err, "is not named NNN_name.up.sql")
	_, err = pgkit.Load("owner", fsys, "missing")
	require.ErrorContains(t, err, "owner: embedded migrations are missing")
}

func TestLoadSet(t *testing.T) {
	t.Parallel()
	fsys := fstest.MapFS{"m/001_init.up.sql": {Data: []byte("CREATE TABLE t ();")}}
	ns := pgkit.Namespace{Schema: "s", Prefix: "p_"}
	base := pgkit.Set{
		Errors:    pgkit.Interpreter{Owner: "owner"},
		Namespace: ns,
		Title:     "owner schema",
		Table:     ns.Ident(ns.Name("migrations")),
		Render:    ns.Renderer(nil),
	}

	set, err := pgkit.LoadSet(base, fsys, "m")
	require.NoError(t, err)
	require.Equal(t, "owner schema", set.Title)
	require.Equal(t, []pgkit.Migration{{Version: 1, Name: "init", SQL: "CREATE TABLE t ();"}}, set.Migrations)
	script, err := pgkit.ScriptOf(set, err)
	require.NoError(t, err)
	require.Equal(t, set.Script(), script)

	set, err = pgkit.LoadSet(base, fsys, "missing")
	require.ErrorContains(t, err, "owner: embedded migrations are missing")
	require.Empty(t, set.Migrations)
	_, err = pgkit.ScriptOf(set, err)
	require.ErrorContains(t, err, "owner: embedded migrations are missing")
}

func TestScript(t *testing.T) {
	t.Parallel()
	ns := pgkit.Namespace{Schema: "o'brien", Prefix: `p\_`}
	set := pgkit.Set{
		Errors:     pgkit.Interpreter{Owner: "owner"},
		Namespace:  ns,
		Title:      "tenure test schema",
		Table:      ns.Ident(ns.Name("migrations")),
		Render:     ns.Renderer(map[string]string{"t": ns.Name("t")}),
		Migrations: []pgkit.Migration{{Version: 1, Name: "init", SQL: "CREATE TABLE {{t}} ();\n"}},
	}
	got := set.Script()
	for _, want := range []string{
		`-- tenure test schema: schema 'o''brien', table prefix E'p\\_'.` + "\n",
		"-- Run as the schema's owner; the run-time role needs only the grants owner.Config.GrantSQL lists.\nBEGIN;\n",
		`SELECT pg_advisory_xact_lock(hashtextextended('tenure migrate o''brien', 0));`,
		`CREATE SCHEMA "o'brien"; END IF; END $tenure$;`,
		`CREATE TABLE IF NOT EXISTS "o'brien"."p\_migrations"`,
		"-- owner migration 001_init\nCREATE TABLE \"o'brien\".\"p\\_t\" ();\n",
		`INSERT INTO "o'brien"."p\_migrations" (version, name) VALUES (1, 'init') ON CONFLICT (version) DO NOTHING;`,
	} {
		require.Contains(t, got, want)
	}
	require.True(t, strings.HasSuffix(got, "\nCOMMIT;\n"), got)
}

func TestGrantSQL(t *testing.T) {
	t.Parallel()
	ns := pgkit.Namespace{Schema: "s", Prefix: "p_"}
	got, err := ns.GrantSQL("owner", `app "role"`, "SELECT ON TABLE "+ns.Ident("p_t"), "USAGE ON SEQUENCE "+ns.Ident("p_seq"))
	require.NoError(t, err)
	require.Equal(t, `GRANT USAGE ON SCHEMA "s" TO "app ""role""";
GRANT SELECT ON TABLE "s"."p_t" TO "app ""role""";
GRANT USAGE ON SEQUENCE "s"."p_seq" TO "app ""role""";
`, got)
	_, err = ns.GrantSQL("owner", "")
	require.ErrorIs(t, err, store.ErrInvalid)
	require.ErrorContains(t, err, "owner: grant:")
}

func TestQueries(t *testing.T) {
	t.Parallel()
	fsys := fstest.MapFS{"q/get.sql": {Data: []byte("SELECT * FROM {{t}}")}}
	render := pgkit.Namespace{Schema: "s", Prefix: "p_"}.Renderer(map[string]string{"t": "p_t"})
	var get, missing string
	require.NoError(t, pgkit.Queries("owner", fsys, "q", render, map[string]*string{"get.sql": &get}))
	require.Equal(t, `SELECT * FROM "s"."p_t"`, get)
	err := pgkit.Queries("owner", fsys, "q", render, map[string]*string{"missing.sql": &missing})
	require.ErrorContains(t, err, "owner: embedded query missing.sql is missing")
}

func TestScriptFunctionsAndSquashed(t *testing.T) {
	t.Parallel()
	ns := pgkit.Namespace{Schema: "s", Prefix: "p_"}
	set := pgkit.Set{
		Errors:         pgkit.Interpreter{Owner: "owner"},
		Namespace:      ns,
		Title:          "tenure test schema",
		Table:          ns.Ident(ns.Name("migrations")),
		FunctionsTable: ns.Ident(ns.Name("functions")),
		Render:         ns.Renderer(map[string]string{"t": ns.Name("t"), "f": ns.Name("f")}),
		Migrations:     []pgkit.Migration{{Version: 1, Name: "tables", SQL: "CREATE TABLE {{t}} ();\n"}},
		Functions:      []storekit.Function{{Name: "f", Revision: 3, SQL: "-- revision 3\nCREATE FUNCTION {{f}}();\n", Hash: "abc"}},
		Squashed:       []string{"init", "more"},
	}
	got := set.Script()
	squash := strings.Index(got, `IF EXISTS (SELECT 1 FROM "s"."p_migrations" WHERE version = 1 AND name = 'init') THEN`)
	migration := strings.Index(got, "-- owner migration 001_tables\n")
	function := strings.Index(got, "-- owner function f, revision 3\n-- revision 3\nCREATE FUNCTION \"s\".\"p_f\"();\n")
	require.Positive(t, squash, got)
	require.Greater(t, migration, squash, "the older numbering is forgotten before the migrations run")
	require.Greater(t, function, migration, "functions are installed after the migrations")
	for _, want := range []string{
		`WHERE (version, name) IN (VALUES (1, 'init'), (2, 'more'))) = 2 THEN`,
		`DELETE FROM "s"."p_migrations" WHERE version <= 2;`,
		`RAISE EXCEPTION '%', 'owner: migrate: schema ''s'' records migrations of the numbering tenure used before v0.1.0 (001_init to 002_more), but not exactly those`,
		`CREATE TABLE IF NOT EXISTS "s"."p_functions"`,
		`INSERT INTO "s"."p_functions" (name, revision, sha256) VALUES ('f', 3, 'abc')`,
	} {
		require.Contains(t, got, want)
	}
	require.True(t, strings.HasSuffix(got, "\nCOMMIT;\n"), got)
}
