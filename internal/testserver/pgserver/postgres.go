package pgserver

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tenure-dev/tenure/internal/testserver"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/pgstore"
	"github.com/tenure-dev/tenure/store/storetest"
)

// PostgresPool returns a pool on the test server ([testutil.PostgresURL])
// whose connections use mode, closed when tb ends. With user non-empty it
// connects as that role instead of the URL's user (the test server trusts
// loopback connections). When the server is unreachable it stops tb
// through [testutil.NeedServer].
func PostgresPool(tb testing.TB, mode pgx.QueryExecMode, user string) *pgxpool.Pool {
	tb.Helper()
	cfg, err := pgxpool.ParseConfig(testutil.PostgresURL())
	if err != nil {
		tb.Fatalf("testserver: parse %q: %v", testutil.PostgresURL(), err)
	}
	cfg.ConnConfig.DefaultQueryExecMode = mode
	if user != "" {
		cfg.ConnConfig.User = user
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		tb.Fatalf("testserver: pool: %v", err)
	}
	tb.Cleanup(pool.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	testutil.NeedServer(tb, "PostgreSQL at "+testutil.PostgresURL(), pool.Ping(ctx))
	return pool
}

// PostgresConfig returns a pgstore configuration with a schema and a table
// prefix unique to this call, both derived from tb's name. The schema does
// not exist yet; [PostgresSchema] makes it.
func PostgresConfig(tb testing.TB) pgstore.Config {
	tb.Helper()
	return pgstore.Config{Schema: testutil.UniqueName(tb), TablePrefix: "t_"}
}

// PostgresWeirdConfig is [PostgresConfig] with a schema and a prefix that
// work only when every name is quoted as an identifier and every literal
// escaped: quotes, a backslash, spaces, upper case, punctuation and comment
// markers.
func PostgresWeirdConfig(tb testing.TB) pgstore.Config {
	tb.Helper()
	return pgstore.Config{
		Schema:      `Sch'\ "q";--` + testutil.UniqueName(tb),
		TablePrefix: `P-x "Y" ;'z/*`,
	}
}

// PostgresSchema migrates cfg's schema with owner (a pool of a role allowed
// to create it) and drops it, with everything in it, when tb ends.
func PostgresSchema(tb testing.TB, owner *pgxpool.Pool, cfg pgstore.Config) {
	tb.Helper()
	s, err := pgstore.New(owner, cfg)
	if err != nil {
		tb.Fatalf("testserver: %v", err)
	}
	tb.Cleanup(func() { PostgresDropSchema(tb, owner, cfg.Schema) })
	if err := s.Migrate(context.Background()); err != nil {
		tb.Fatalf("testserver: migrate: %v", err)
	}
	if err := s.Close(); err != nil {
		tb.Fatalf("testserver: close: %v", err)
	}
}

// PostgresDropSchema drops schema and everything in it, if it exists.
func PostgresDropSchema(tb testing.TB, owner *pgxpool.Pool, schema string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testserver.CleanupTimeout)
	defer cancel()
	if _, err := owner.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
		tb.Errorf("testserver: drop schema %q: %v", schema, err)
	}
}

// PostgresRole creates a login role with a name unique to this call and no
// privileges beyond those every role has, and drops it when tb ends (after
// the cleanups registered later, such as its pools). Grant it what it
// needs with [PostgresGrant].
func PostgresRole(tb testing.TB, owner *pgxpool.Pool) string {
	tb.Helper()
	role := testutil.UniqueName(tb) + "_role"
	ctx, cancel := context.WithTimeout(context.Background(), testserver.CleanupTimeout)
	defer cancel()
	if _, err := owner.Exec(ctx, "CREATE ROLE "+pgx.Identifier{role}.Sanitize()+" LOGIN"); err != nil {
		tb.Fatalf("testserver: create role %q: %v", role, err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testserver.CleanupTimeout)
		defer cancel()
		r := pgx.Identifier{role}.Sanitize()
		if _, err := owner.Exec(ctx, "DROP OWNED BY "+r); err != nil {
			tb.Errorf("testserver: drop owned by %q: %v", role, err)
		}
		if _, err := owner.Exec(ctx, "DROP ROLE "+r); err != nil {
			tb.Errorf("testserver: drop role %q: %v", role, err)
		}
	})
	return role
}

// PostgresGrant runs what [pgstore.Config.GrantSQL] prints for role, as
// owner.
func PostgresGrant(tb testing.TB, owner *pgxpool.Pool, cfg pgstore.Config, role string) {
	tb.Helper()
	grants, err := cfg.GrantSQL(role)
	if err != nil {
		tb.Fatalf("testserver: %v", err)
	}
	if _, err := owner.Exec(context.Background(), grants); err != nil {
		tb.Fatalf("testserver: grant to %q: %v", role, err)
	}
}

// PostgresHarness is a [storetest.Harness] for pgstore: every store gets a
// fresh schema, migrated by Owner and dropped when its test ends, and runs
// on Pool (which may belong to a less privileged role than Owner).
type PostgresHarness struct {
	// Owner creates, migrates and drops the schemas.
	Owner *pgxpool.Pool
	// Pool is what the stores use. Nil means Owner.
	Pool *pgxpool.Pool
	// Role, when set, is granted what the store needs at run time in
	// every new schema; it should be Pool's user.
	Role string
	// Config, when set, names each new store's schema and prefix; it must
	// return a schema unique to the call. Nil means [PostgresConfig].
	Config func(tb testing.TB) pgstore.Config
}

// NewStore implements [storetest.Harness].
func (h PostgresHarness) NewStore(tb testing.TB) store.Store {
	tb.Helper()
	return h.storeOn(tb, h.pool())
}

// storeOn is [PostgresHarness.NewStore] on pool.
func (h PostgresHarness) storeOn(tb testing.TB, pool *pgxpool.Pool) store.Store {
	tb.Helper()
	newConfig := h.Config
	if newConfig == nil {
		newConfig = PostgresConfig
	}
	cfg := newConfig(tb)
	PostgresSchema(tb, h.Owner, cfg)
	if h.Role != "" {
		PostgresGrant(tb, h.Owner, cfg, h.Role)
	}
	s, err := pgstore.New(pool, cfg)
	if err != nil {
		tb.Fatalf("testserver: %v", err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("testserver: close: %v", err)
		}
	})
	return s
}

// Capabilities implements [storetest.Harness]: PostgreSQL notifies, keeps
// followers in line and expires exactly; its round trip is `SELECT 1` on
// the store's pool.
func (h PostgresHarness) Capabilities() storetest.Capabilities {
	pool := h.pool()
	return storetest.Capabilities{
		Notify: true,
		Line:   true,
		Faults: h.Faults(),
		RoundTrip: func(ctx context.Context) error {
			var one int
			if err := pool.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
				return fmt.Errorf("testserver: select 1: %w", err)
			}
			return nil
		},
	}
}

func (h PostgresHarness) pool() *pgxpool.Pool {
	if h.Pool == nil {
		return h.Owner
	}
	return h.Pool
}
