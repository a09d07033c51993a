// Package pgstoretest gives tests a real PostgreSQL to run tenure against:
// pools on the test server, fresh migrated schemas that vanish when the
// test ends, least-privilege roles, and a [storetest.Harness] for
// [pgstore]. It is for tests only; production code must never import it.
//
// The server is [testutil.PostgresURL]; when it is unreachable the test
// skips, or fails when the environment variable CI is set
// ([testutil.NeedServer]).
package pgstoretest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/store"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store/pgstore"
	"github.com/tenure-dev/tenure/store/storetest"
)

// cleanupTimeout bounds each cleanup statement.
const cleanupTimeout = 30 * time.Second

// Pool returns a pool on the test server whose connections use mode, closed
// when tb ends. With user non-empty it connects as that role instead of the
// URL's user (the test server trusts loopback connections).
func Pool(tb testing.TB, mode pgx.QueryExecMode, user string) *pgxpool.Pool {
	tb.Helper()
	cfg, err := pgxpool.ParseConfig(testutil.PostgresURL())
	if err != nil {
		tb.Fatalf("pgstoretest: parse %q: %v", testutil.PostgresURL(), err)
	}
	cfg.ConnConfig.DefaultQueryExecMode = mode
	if user != "" {
		cfg.ConnConfig.User = user
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		tb.Fatalf("pgstoretest: pool: %v", err)
	}
	tb.Cleanup(pool.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	testutil.NeedServer(tb, "PostgreSQL at "+testutil.PostgresURL(), pool.Ping(ctx))
	return pool
}

// Config returns a configuration with a schema and a table prefix unique to
// this call, both derived from tb's name. The schema does not exist yet;
// [Schema] makes it.
func Config(tb testing.TB) pgstore.Config {
	tb.Helper()
	return pgstore.Config{Schema: testutil.UniqueName(tb), TablePrefix: "t_"}
}

// WeirdConfig is [Config] with a schema and a prefix that work only when
// every name is quoted as an identifier and every literal escaped: quotes,
// a backslash, spaces, upper case, punctuation and comment markers.
func WeirdConfig(tb testing.TB) pgstore.Config {
	tb.Helper()
	return pgstore.Config{
		Schema:      `Sch'\ "q";--` + testutil.UniqueName(tb),
		TablePrefix: `P-x "Y" ;'z/*`,
	}
}

// Schema migrates cfg's schema with owner (a pool of a role allowed to
// create it) and drops it, with everything in it, when tb ends.
func Schema(tb testing.TB, owner *pgxpool.Pool, cfg pgstore.Config) {
	tb.Helper()
	s, err := pgstore.New(owner, cfg)
	if err != nil {
		tb.Fatalf("pgstoretest: %v", err)
	}
	tb.Cleanup(func() { DropSchema(tb, owner, cfg.Schema) })
	if err := s.Migrate(context.Background()); err != nil {
		tb.Fatalf("pgstoretest: migrate: %v", err)
	}
	if err := s.Close(); err != nil {
		tb.Fatalf("pgstoretest: close: %v", err)
	}
}

// DropSchema drops schema and everything in it, if it exists.
func DropSchema(tb testing.TB, owner *pgxpool.Pool, schema string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	if _, err := owner.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
		tb.Errorf("pgstoretest: drop schema %q: %v", schema, err)
	}
}

// Role creates a login role with a name unique to this call and no
// privileges beyond those every role has, and drops it when tb ends (after
// the cleanups registered later, such as its pools). Grant it what it needs
// with [Grant].
func Role(tb testing.TB, owner *pgxpool.Pool) string {
	tb.Helper()
	role := testutil.UniqueName(tb) + "_role"
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	if _, err := owner.Exec(ctx, "CREATE ROLE "+pgx.Identifier{role}.Sanitize()+" LOGIN"); err != nil {
		tb.Fatalf("pgstoretest: create role %q: %v", role, err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		r := pgx.Identifier{role}.Sanitize()
		if _, err := owner.Exec(ctx, "DROP OWNED BY "+r); err != nil {
			tb.Errorf("pgstoretest: drop owned by %q: %v", role, err)
		}
		if _, err := owner.Exec(ctx, "DROP ROLE "+r); err != nil {
			tb.Errorf("pgstoretest: drop role %q: %v", role, err)
		}
	})
	return role
}

// Grant runs what [pgstore.Config.GrantSQL] prints for role, as owner.
func Grant(tb testing.TB, owner *pgxpool.Pool, cfg pgstore.Config, role string) {
	tb.Helper()
	grants, err := cfg.GrantSQL(role)
	if err != nil {
		tb.Fatalf("pgstoretest: %v", err)
	}
	if _, err := owner.Exec(context.Background(), grants); err != nil {
		tb.Fatalf("pgstoretest: grant to %q: %v", role, err)
	}
}

// Harness is a [storetest.Harness] for [pgstore]: every store gets a fresh
// schema, migrated by Owner and dropped when its test ends, and runs on
// Pool (which may belong to a less privileged role than Owner).
type Harness struct {
	// Owner creates, migrates and drops the schemas.
	Owner *pgxpool.Pool
	// Pool is what the stores use. Nil means Owner.
	Pool *pgxpool.Pool
	// Role, when set, is granted what the store needs at run time in
	// every new schema; it should be Pool's user.
	Role string
	// Config, when set, names each new store's schema and prefix; it must
	// return a schema unique to the call. Nil means [Config].
	Config func(tb testing.TB) pgstore.Config
}

// NewStore implements [storetest.Harness].
func (h Harness) NewStore(tb testing.TB) store.Store {
	tb.Helper()
	newConfig := h.Config
	if newConfig == nil {
		newConfig = Config
	}
	cfg := newConfig(tb)
	Schema(tb, h.Owner, cfg)
	pool := h.Pool
	if pool == nil {
		pool = h.Owner
	}
	if h.Role != "" {
		Grant(tb, h.Owner, cfg, h.Role)
	}
	s, err := pgstore.New(pool, cfg)
	if err != nil {
		tb.Fatalf("pgstoretest: %v", err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("pgstoretest: close: %v", err)
		}
	})
	return s
}

// Capabilities implements [storetest.Harness]: PostgreSQL notifies and
// expires exactly; its round trip is `SELECT 1` on the store's pool.
func (h Harness) Capabilities() storetest.Capabilities {
	pool := h.Pool
	if pool == nil {
		pool = h.Owner
	}
	return storetest.Capabilities{
		Notify: true,
		RoundTrip: func(ctx context.Context) error {
			var one int
			if err := pool.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
				return fmt.Errorf("pgstoretest: select 1: %w", err)
			}
			return nil
		},
	}
}
