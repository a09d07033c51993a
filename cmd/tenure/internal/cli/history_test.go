package cli

import (
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/store"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/cmd/tenure/internal/storeurl"
	"github.com/tenure-dev/tenure/internal/testserver/pgserver"
	"github.com/tenure-dev/tenure/internal/testserver/redisserver"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store/pgstore"
)

// historyOf runs history --json and decodes it.
func historyOf(t *testing.T, args ...string) historyJSON {
	t.Helper()
	o := cli(t, append([]string{"history", "--json"}, args...)...)
	require.Equal(t, ExitOK, o.code, o.stderr)
	requireNothingHidden(t, o.stdout)
	var out historyJSON
	require.NoError(t, json.Unmarshal([]byte(o.stdout), &out), o.stdout)
	return out
}

// eventsOf lists the events as "event holder token previous_holder
// previous_token".
func eventsOf(h historyJSON) []string {
	var lines []string
	for _, ev := range h.Events {
		lines = append(lines, fmt.Sprintf("%s %s %d %s %d", ev.Event, ev.Holder, ev.Token, ev.PreviousHolder, ev.PreviousToken))
	}
	return lines
}

func TestHistoryOnSQLite(t *testing.T) {
	t.Parallel()
	db := sqliteURL(t)
	st := openSQLite(t, db)
	a, b := testutil.Holder(t, "a"), testutil.Holder(t, "b")
	first := acquire(t, st, "job", a)
	require.NoError(t, st.Release(t.Context(), store.ReleaseParams{Name: "job", Holder: a, Token: first.Token}))
	second := acquire(t, st, "job", b)
	o := cli(t, "release", "--force", "--now", "job", "--store", db)
	require.Equal(t, ExitOK, o.code, o.stderr)

	h := historyOf(t, "job", "--store", db)
	require.Equal(t, "job", h.Lease)
	require.Equal(t, []string{
		fmt.Sprintf("granted %s %d  0", a, first.Token),
		fmt.Sprintf("released %s %d  0", a, first.Token),
		fmt.Sprintf("granted %s %d %s %d", b, second.Token, a, first.Token),
		fmt.Sprintf("force-released %s %d  0", b, second.Token),
	}, eventsOf(h))
	require.Equal(t, b.Label, h.Events[2].Label)
	require.Equal(t, a.Instance, h.Events[2].PreviousInstance)
	for _, ev := range h.Events {
		require.Equal(t, time.UTC, ev.At.Location())
	}

	o = cli(t, "history", "job", "--store", db)
	require.Equal(t, ExitOK, o.code, o.stderr)
	lines := strings.Split(strings.TrimSpace(o.stdout), "\n")
	require.Len(t, lines, 5)
	require.Regexp(t, `^TIME\s+EVENT\s+HOLDER\s+TOKEN\s+PREVIOUS$`, lines[0])
	require.Regexp(t, `^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z\s+granted\s+`+regexp.QuoteMeta(b.String())+
		fmt.Sprintf(`\s+%d\s+`, second.Token)+regexp.QuoteMeta(fmt.Sprintf("%s (token %d)", a, first.Token))+`$`, lines[3])
	require.Regexp(t, `\sforce-released\s+`+regexp.QuoteMeta(b.String())+fmt.Sprintf(`\s+%d\s+-$`, second.Token), lines[4])

	require.Equal(t, eventsOf(h)[3:], eventsOf(historyOf(t, "job", "--limit", "1", "--store", db)), "--limit keeps the most recent")
	require.Equal(t, eventsOf(h), eventsOf(historyOf(t, "job", "--since", "1h", "--store", db)))
	require.Equal(t, eventsOf(h)[2:], eventsOf(historyOf(t, "job", "--since", h.Events[2].At.Format(time.RFC3339Nano), "--store", db)),
		"--since takes an RFC 3339 time")
	require.Empty(t, historyOf(t, "job", "--since", time.Now().Add(time.Hour).Format(time.RFC3339), "--store", db).Events)
	require.Empty(t, historyOf(t, "never", "--store", db).Events)
	o = cli(t, "history", "never", "--store", db)
	require.Equal(t, ExitOK, o.code, o.stderr)
	require.Equal(t, "no events for lease never\n", o.stdout)
}

func TestHistoryUsage(t *testing.T) {
	t.Parallel()
	db := sqliteURL(t)
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"NoName":          {[]string{"history"}, "takes one lease NAME, got 0 arguments"},
		"TwoNames":        {[]string{"history", "a", "b"}, "takes one lease NAME, got 2 arguments"},
		"HiddenName":      {[]string{"history", "job\u202e"}, `lease name "job\u202e" contains the bidirectional control U+202E`},
		"LimitZero":       {[]string{"history", "job", "--limit", "0"}, "--limit 0 is outside 1–10000"},
		"LimitHuge":       {[]string{"history", "job", "--limit", "10001"}, "--limit 10001 is outside 1–10000"},
		"SinceNegative":   {[]string{"history", "job", "--since", "-1h"}, "--since -1h must be a positive duration"},
		"SinceGarbage":    {[]string{"history", "job", "--since", "yesterday"}, `--since "yesterday" is neither a duration`},
		"SinceBeforeUnix": {[]string{"history", "job", "--since", "1960-01-01T00:00:00Z"}, "history since 1960-01-01T00:00:00Z is outside 1970–9999"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			o := cli(t, append(tc.args, "--store", db)...)
			require.Equal(t, ExitUsage, o.code, o.stderr)
			requireOneLine(t, o)
			requireNothingHidden(t, o.stderr)
			require.Contains(t, o.stderr, tc.want)
		})
	}
}

// TestHistoryUnsupported: a store that keeps no history is refused with
// exit 64 and a message that says which stores do.
func TestHistoryUnsupported(t *testing.T) {
	t.Parallel()
	o := cli(t, "history", "job", "--store", redisserver.RedisURL())
	require.Equal(t, ExitUsage, o.code, o.stderr)
	requireOneLine(t, o)
	require.Contains(t, o.stderr, "keeps no history of its leases; only the PostgreSQL and SQLite stores do")
}

// TestHistoryEscapesStoredHolders: a holder label that holds characters
// which would act on the terminal is printed escaped, as status does.
func TestHistoryEscapesStoredHolders(t *testing.T) {
	t.Parallel()
	db := sqliteURL(t)
	st := openSQLite(t, db)
	acquire(t, st, "job", testutil.Holder(t, "worker"))
	const label = "ops\u2066\ufeff\x1b[2J"
	_, err := st.DB().ExecContext(t.Context(), "UPDATE tenure_history SET holder_label = ?", label)
	require.NoError(t, err)

	o := cli(t, "history", "job", "--store", db)
	require.Equal(t, ExitOK, o.code, o.stderr)
	requireNothingHidden(t, o.stdout)
	require.Contains(t, o.stdout, `"ops\u2066\ufeff\x1b[2J/`)

	h := historyOf(t, "job", "--store", db)
	require.Equal(t, label, h.Events[0].Label, "JSON readers get the stored label")
}

// TestHistoryOnPostgres runs history against a schema migrated by the CLI
// and read by the read-only role of migrate --grant-read, and checks that
// release --force is recorded as forced.
func TestHistoryOnPostgres(t *testing.T) {
	t.Parallel()
	owner := pgserver.PostgresPool(t, pgx.QueryExecModeCacheStatement, "")
	schema := testutil.UniqueName(t)
	t.Cleanup(func() { pgserver.PostgresDropSchema(t, owner, schema) })
	sep := "?"
	if strings.Contains(testutil.PostgresURL(), "?") {
		sep = "&"
	}
	u := testutil.PostgresURL() + sep + storeurl.ParamSchema + "=" + schema

	o := cli(t, "history", "job", "--store", u)
	require.Equal(t, ExitNotMigrated, o.code, o.stderr)
	require.Contains(t, o.stderr, "tenure migrate")
	o = cli(t, "migrate", "--store", u)
	require.Equal(t, ExitOK, o.code, o.stderr)

	st, err := pgstore.New(owner, pgstore.Config{Schema: schema})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	a, b := testutil.Holder(t, "a"), testutil.Holder(t, "b")
	first := acquire(t, st, "job", a)
	require.NoError(t, st.Release(t.Context(), store.ReleaseParams{Name: "job", Holder: a, Token: first.Token}))
	second := acquire(t, st, "job", b)
	o = cli(t, "release", "--force", "--now", "job", "--store", u)
	require.Equal(t, ExitOK, o.code, o.stderr)

	role := pgserver.PostgresRole(t, owner)
	grants, err := pgstore.Config{Schema: schema}.ReadGrantSQL(role)
	require.NoError(t, err)
	_, err = owner.Exec(t.Context(), grants)
	require.NoError(t, err)
	parsed, err := url.Parse(u)
	require.NoError(t, err)
	parsed.User = url.User(role)
	reader := parsed.String()

	h := historyOf(t, "job", "--store", reader)
	require.Equal(t, []string{
		fmt.Sprintf("granted %s %d  0", a, first.Token),
		fmt.Sprintf("released %s %d  0", a, first.Token),
		fmt.Sprintf("granted %s %d %s %d", b, second.Token, a, first.Token),
		fmt.Sprintf("force-released %s %d  0", b, second.Token),
	}, eventsOf(h), "read as the read-only role")
}
