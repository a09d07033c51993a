package registry_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/testserver/pgserver"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/registry"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

// testPrefix is not the default, so a hard-coded table name fails.
const testPrefix = "r_"

// bundle is one test's registry in a schema of its own.
type bundle struct {
	pool *pgxpool.Pool
	cfg  registry.Config
	reg  *registry.Registry
}

// setup migrates a fresh schema (dropped when t ends) and returns a
// registry on it. cfg's Schema and TablePrefix are replaced.
func setup(t *testing.T, cfg registry.Config) *bundle {
	t.Helper()
	return setupMode(t, cfg, pgx.QueryExecModeCacheStatement)
}

func setupMode(t *testing.T, cfg registry.Config, mode pgx.QueryExecMode) *bundle {
	t.Helper()
	pool := pgserver.PostgresPool(t, mode, "")
	cfg.Schema = testutil.UniqueName(t)
	cfg.TablePrefix = testPrefix
	reg, err := registry.New(pool, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { pgserver.PostgresDropSchema(t, pool, cfg.Schema) })
	require.NoError(t, reg.Migrate(context.Background()))
	return &bundle{pool: pool, cfg: cfg, reg: reg}
}

// register registers agent id at a made-up address.
func (b *bundle) register(t *testing.T, id string) registry.Registration {
	t.Helper()
	g, err := b.reg.Register(context.Background(), registry.RegisterParams{ID: id, Address: id + ".test:7000"})
	require.NoError(t, err)
	return g
}

// age makes agent id's last heartbeat age old by the store's clock.
func (b *bundle) age(t *testing.T, id string, age time.Duration) {
	t.Helper()
	require.NoError(t, registry.SetHeartbeatAge(context.Background(), b.reg, id, age))
}

// count returns the number of rows in the registry table named by suffix
// ("agents", "owners", "reassignments").
func (b *bundle) count(t *testing.T, suffix string) int {
	t.Helper()
	var n int
	table := pgx.Identifier{b.cfg.Schema, testPrefix + suffix}.Sanitize()
	require.NoError(t, b.pool.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n))
	return n
}

// table returns the quoted name of the registry table named by suffix.
func (b *bundle) table(suffix string) string {
	return pgx.Identifier{b.cfg.Schema, testPrefix + suffix}.Sanitize()
}

// stale is comfortably past the default StaleAfter.
const stale = registry.DefaultStaleAfter + 5*time.Second

// ctxT returns a context that ends with the test or after a minute.
func ctxT(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func ids(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%02d", prefix, i)
	}
	return out
}
