package cli

import (
	"context"
	"math"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/store"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/cmd/tenure/internal/storeurl"
	"github.com/tenure-dev/tenure/fence/pgfence"
	"github.com/tenure-dev/tenure/internal/testserver/pgserver"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store/pgstore"
)

// roleBundle is a schema migrated with tenure migrate and the store URLs
// of its owner and of roles given what migrate --print prints for them.
type roleBundle struct {
	owner  *pgxpool.Pool
	schema string
	url    string // the owner's
}

func setupRoles(t *testing.T) *roleBundle {
	t.Helper()
	b := &roleBundle{owner: pgserver.PostgresPool(t, pgx.QueryExecModeCacheStatement, ""), schema: testutil.UniqueName(t)}
	t.Cleanup(func() { pgserver.PostgresDropSchema(t, b.owner, b.schema) })
	b.url = withParam(t, testutil.PostgresURL(), storeurl.ParamSchema, b.schema)
	o := cli(t, "migrate", "--store", b.url)
	require.Equal(t, ExitOK, o.code, o.stderr)
	return b
}

func withParam(t *testing.T, raw, key, value string) string {
	t.Helper()
	u, err := url.Parse(raw)
	require.NoError(t, err)
	q := u.Query()
	q.Set(key, value)
	u.RawQuery = q.Encode()
	return u.String()
}

// role creates a role, runs as the owner what `tenure migrate --print` with
// flag (--grant or --grant-read) prints for it, and returns its store URL
// and name.
func (b *roleBundle) role(t *testing.T, flag string) (string, string) {
	t.Helper()
	role := pgserver.PostgresRole(t, b.owner)
	o := cli(t, "migrate", "--print", flag, role, "--store", b.url)
	require.Equal(t, ExitOK, o.code, o.stderr)
	require.Contains(t, o.stdout, "GRANT")
	_, err := b.owner.Exec(context.Background(), o.stdout)
	require.NoError(t, err, "the printed SQL runs as the owner")
	u, err := url.Parse(b.url)
	require.NoError(t, err)
	u.User = url.User(role)
	return u.String(), role
}

func (b *roleBundle) cfg() pgstore.Config { return pgstore.Config{Schema: b.schema} }

func TestFenceReset(t *testing.T) {
	t.Parallel()
	b := setupRoles(t)
	ctx := context.Background()
	worker, role := b.role(t, "--grant")

	// A worker, as the run-time role, runs and fences with its token.
	o := cli(t, "run", "--name", "job", "--store", worker, "--", "sh", "-c", "echo $TENURE_TOKEN")
	require.Equal(t, ExitOK, o.code, o.stderr)
	n, err := strconv.ParseInt(strings.TrimSpace(o.stdout), 10, 64)
	require.NoError(t, err)
	tok := store.Token(n)
	f, err := pgfence.New(b.cfg())
	require.NoError(t, err)
	workerPool := pgserver.PostgresPool(t, pgx.QueryExecModeCacheStatement, role)
	require.NoError(t, f.Fence(ctx, workerPool, "invoices", tok))
	// Someone allowed foreign tokens poisons the fence.
	require.NoError(t, f.FenceForeign(ctx, b.owner, "invoices", math.MaxInt64))
	require.ErrorIs(t, f.Fence(ctx, workerPool, "invoices", tok), store.ErrFenced)

	o = cli(t, "fence", "reset", "invoices", "--to", "1", "--reason", "poisoned", "--store", worker)
	require.Equal(t, ExitFailure, o.code, o.stderr)
	requireOneLine(t, o)
	require.Contains(t, o.stderr, "permission denied")

	o = cli(t, "fence", "reset", "invoices", "--to", tok.String(), "--reason", "poisoned by a test", "--store", b.url)
	require.Equal(t, ExitOK, o.code, o.stderr)
	require.Equal(t, `reset the fence of "invoices" from 9223372036854775807 to `+tok.String()+`; recorded with the reason "poisoned by a test"`+"\n", o.stdout)
	require.NoError(t, f.Fence(ctx, workerPool, "invoices", tok), "the worker writes again")

	obj, err := b.cfg().Objects()
	require.NoError(t, err)
	var (
		oldTok, newTok int64
		reason, by     string
		at             time.Time
		me             string
	)
	require.NoError(t, b.owner.QueryRow(ctx, "SELECT current_user").Scan(&me))
	require.NoError(t, b.owner.QueryRow(ctx, "SELECT old_token, new_token, reason, reset_by, reset_at FROM "+
		pgx.Identifier{obj.Schema, obj.FenceResets}.Sanitize()).Scan(&oldTok, &newTok, &reason, &by, &at))
	require.Equal(t, int64(math.MaxInt64), oldTok)
	require.Equal(t, int64(tok), newTok)
	require.Equal(t, "poisoned by a test", reason)
	require.Equal(t, me, by)
	require.WithinDuration(t, time.Now(), at, time.Minute)

	o = cli(t, "fence", "reset", "absent", "--to", "0", "--reason", "r", "--store", b.url)
	require.Equal(t, ExitFailure, o.code, o.stderr)
	require.Contains(t, o.stderr, "has no fence")
	o = cli(t, "fence", "reset", "invoices", "--to", (tok + 1).String(), "--reason", "r", "--store", b.url)
	require.Equal(t, ExitUsage, o.code, o.stderr)
	require.Contains(t, o.stderr, "never issued")
}

func TestFenceResetUsage(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"NoSubcommand": {[]string{"fence"}, "the only subcommand is reset"},
		"Other":        {[]string{"fence", "set", "r"}, "the only subcommand is reset"},
		"NoResource":   {[]string{"fence", "reset", "--to", "1", "--reason", "r"}, "reset takes one RESOURCE, got 0"},
		"NoTo":         {[]string{"fence", "reset", "r", "--reason", "r"}, "--to N is required"},
		"BadTo":        {[]string{"fence", "reset", "r", "--to", "x", "--reason", "r"}, `--to "x" is not a token`},
		"NegativeTo":   {[]string{"fence", "reset", "r", "--to", "-1", "--reason", "r"}, "is not a token"},
		"NoReason":     {[]string{"fence", "reset", "r", "--to", "1"}, "--reason is required"},
		"ControlChar":  {[]string{"fence", "reset", "a\x1bb", "--to", "1", "--reason", "r"}, "control character"},
		"SQLite":       {[]string{"fence", "reset", "r", "--to", "1", "--reason", "r", "--store", "sqlite:" + t.TempDir() + "/x.db"}, "PostgreSQL store"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			o := cli(t, tc.args...)
			require.Equal(t, ExitUsage, o.code, o.stderr)
			requireOneLine(t, o)
			require.Contains(t, o.stderr, tc.want)
		})
	}
}

// TestPrintedRoles: what migrate --print --grant prints is enough to run
// and check leases; what --grant-read prints is enough for status and
// changes nothing.
func TestPrintedRoles(t *testing.T) {
	t.Parallel()
	b := setupRoles(t)
	worker, _ := b.role(t, "--grant")
	reader, _ := b.role(t, "--grant-read")

	o := cli(t, "run", "--name", "job", "--store", worker, "--", "true")
	require.Equal(t, ExitOK, o.code, o.stderr)
	o = cli(t, "status", "job", "--store", reader)
	require.Equal(t, ExitOK, o.code, o.stderr)
	require.Contains(t, o.stdout, "job")
	o = cli(t, "agents", "--store", reader)
	require.Equal(t, ExitOK, o.code, o.stderr)
	o = cli(t, "run", "--name", "job", "--store", reader, "--", "true")
	require.NotEqual(t, ExitOK, o.code, o.stderr)
	require.Contains(t, o.stderr, "permission denied")
	st, err := pgstore.New(b.owner, b.cfg())
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	acquire(t, st, "held", testutil.Holder(t, "a"))
	o = cli(t, "release", "--force", "held", "--store", reader)
	require.NotEqual(t, ExitOK, o.code, o.stderr)
	require.Contains(t, o.stderr, "permission denied")
}
