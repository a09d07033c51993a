package cli

import (
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/testserver/mysqlserver"
	"github.com/tenure-dev/tenure/internal/testutil"
)

// TestMessages runs each mistake a user can make on the command line and
// reads what the user reads: the exit code documented for it, and one line
// on standard error, prefixed "tenure: " once, that names the flag or URL
// part the user typed and no Go package or field.
func TestMessages(t *testing.T) {
	t.Parallel()
	db := sqliteURL(t)
	pg := testutil.PostgresURL()
	sep := "?"
	if strings.Contains(pg, "?") {
		sep = "&"
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string // a part of the message: the flag or URL part typed
	}{
		{"HealthNotHostPort", []string{"run", "--store", db, "--name", "a", "--health", "bogus", "--", "true"}, ExitUsage, "--health"},
		{"HealthBadPort", []string{"run", "--store", db, "--name", "a", "--health", ":99999", "--", "true"}, ExitUsage, "--health"},
		{"MetricsNotHostPort", []string{"run", "--store", db, "--name", "a", "--metrics", "bogus", "--", "true"}, ExitUsage, "--metrics"},
		{"HTTPBadPort", []string{"serve", "--store", db, "--http", ":99999"}, ExitUsage, "--http"},
		{"SingleDashStore", []string{"status", "-store", db}, ExitUsage, "--store"},
		{"SingleDashName", []string{"run", "--store", db, "-name", "a", "--", "true"}, ExitUsage, "--name"},
		{"SingleDashGlobal", []string{"-log-format", "json", "status", "--store", db}, ExitUsage, "--log-format"},
		{"SingleDashValue", []string{"status", "-store=postgres://u:Sup3rSecret@127.0.0.1:1/x"}, ExitUsage, "--store"},
		{"SingleDashHelp", []string{"-help"}, ExitUsage, "--help"},
		{"SingleDashVersion", []string{"-version"}, ExitUsage, "--version"},
		{"UnknownFlag", []string{"status", "--nope", "--store", db}, ExitUsage, "--nope"},
		{"BadFlagValue", []string{"run", "--store", db, "--name", "a", "--grace", "-5s", "--", "true"}, ExitUsage, "--grace"},
		{"GraceTooLong", []string{"run", "--store", db, "--name", "a", "--ttl", "2s", "--grace", "5s", "--", "true"}, ExitUsage, "--grace"},
		{"PayloadTooLong", []string{"run", "--store", db, "--name", "a", "--payload", strings.Repeat("p", 2000), "--", "true"}, ExitUsage, "--payload"},
		{"LabelControlCharacter", []string{"run", "--store", db, "--name", "a", "--label", "TTL\tx", "--", "true"}, ExitUsage, `--label "TTL\tx" contains`},
		{"TTLTooShort", []string{"run", "--store", db, "--name", "a", "--ttl", "1ms", "--", "true"}, ExitUsage, "--ttl"},
		{"SQLiteNoPath", []string{"status", "--store", "sqlite:"}, ExitUsage, `"sqlite:"`},
		{"UnknownScheme", []string{"status", "--store", "bogus://x"}, ExitUsage, `"bogus"`},
		{"RedisBadDB", []string{"status", "--store", "redis://127.0.0.1:6379/abc"}, ExitUsage, `"abc"`},
		{"PostgresBadSSLMode", []string{"status", "--store", pg + sep + "sslmode=bogus"}, ExitUsage, "sslmode"},
		{"PostgresUnknownParameter", []string{"status", "--store", pg + sep + "nosuchparameter=1"}, ExitUsage, "nosuchparameter"},
		{"PostgresUnknownRole", []string{"status", "--store", withUser(t, pg, url.UserPassword("nosuchrole", "Sup3rSecret"))}, ExitUsage, `"nosuchrole"`},
		{"BadBoolValue", []string{"status", "--store", db, "--watch=bogus"}, ExitUsage, "--watch"},
		{"MySQLUnknownDatabase", []string{"status", "--store", withPath(t, mysqlserver.MySQLURL(), "/nosuchdb")}, ExitUsage, "nosuchdb"},
		{"PostgresRefused", []string{"status", "--store", "postgres://postgres@" + closedPort(t) + "/test"}, ExitUnavailable, "cannot reach PostgreSQL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o := cli(t, tc.args...)
			require.Equal(t, tc.code, o.code, "%q: %s", tc.args, o.stderr)
			requireOneLine(t, o)
			require.Contains(t, o.stderr, tc.want)
			for _, leak := range []string{"storeurl:", "tenure: tenure:", ": tenure: ", "Grace", "RenewInterval", "TTL (", " -grace", " -nope", " -watch", "invalid argument", "Sup3rSecret"} {
				require.NotContains(t, o.stderr, leak)
			}
		})
	}
}

// withUser returns the URL raw with its user set to u.
func withUser(t *testing.T, raw string, u *url.Userinfo) string {
	t.Helper()
	parsed, err := url.Parse(raw)
	require.NoError(t, err)
	parsed.User = u
	return parsed.String()
}

// withPath returns the URL raw with its path set to path.
func withPath(t *testing.T, raw, path string) string {
	t.Helper()
	parsed, err := url.Parse(raw)
	require.NoError(t, err)
	parsed.Path = path
	return parsed.String()
}
