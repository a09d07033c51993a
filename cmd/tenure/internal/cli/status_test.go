package cli

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/testserver/redisserver"
	"github.com/tenure-dev/tenure/internal/testserver/testca"
	"github.com/tenure-dev/tenure/internal/testutil"
)

// requireNothingHidden fails when out holds a character that would act on a
// terminal instead of showing (the newline and tab that status writes
// itself aside).
func requireNothingHidden(t *testing.T, out string) {
	t.Helper()
	require.True(t, utf8.ValidString(out), "output is not valid UTF-8: %q", out)
	for _, r := range out {
		if r == '\n' || r == '\t' || r == ' ' {
			continue
		}
		require.True(t, unicode.IsGraphic(r), "output shows %U raw: %q", r, out)
	}
}

func TestTerminalSafe(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in, want string
	}{
		{"Plain", "nightly-billing", "nightly-billing"},
		{"Empty", "", ""},
		{"Spaces", "a b", "a b"},
		{"Unicode", "café 名前 🔒", "café 名前 🔒"},
		{"RightToLeft", "مرحبا", "مرحبا"},
		{"Escape", "job\x1b[2J", `"job\x1b[2J"`},
		{"Newline", "a\nb", `"a\nb"`},
		{"Delete", "a\x7f", `"a\x7f"`},
		{"C1", "a\u009b", `"a\u009b"`},
		{"RightToLeftOverride", "job\u202egpj", `"job\u202egpj"`},
		{"LeftToRightIsolate", "\u2066job", `"\u2066job"`},
		{"ZeroWidthSpace", "jo\u200bb", `"jo\u200bb"`},
		{"ByteOrderMark", "\ufeffjob", `"\ufeffjob"`},
		{"LineSeparator", "a\u2028b", `"a\u2028b"`},
		{"InvalidUTF8", "a\x9bb", `"a\x9bb"`},
		{"LeadingQuote", `"job"`, `"\"job\""`},
		{"InnerQuote", `a"b`, `a"b`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := terminalSafe(tc.in)
			require.Equal(t, tc.want, got)
			requireNothingHidden(t, got)
			if got != tc.in {
				back, err := strconv.Unquote(got)
				require.NoError(t, err)
				require.Equal(t, tc.in, back, "the escaping loses nothing")
			}
		})
	}
}

func TestEscapeHiddenJSON(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in, want string
	}{
		{"Plain", "job", `"job"`},
		{"Unicode", "café🔒", `"café🔒"`},
		{"Control", "a\x1bb", `"a\u001bb"`},
		{"Delete", "a\x7fb", `"a\u007fb"`},
		{"C1", "a\u0085b", `"a\u0085b"`},
		{"RightToLeftOverride", "job\u202e", `"job\u202e"`},
		{"ZeroWidthJoiner", "a\u200db", `"a\u200db"`},
		{"ByteOrderMark", "\ufeff", `"\ufeff"`},
		{"AstralTag", "a\U000E0041", `"a\udb40\udc41"`},
		{"LineSeparator", "a\u2028", `"a\u2028"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b, err := json.Marshal(tc.in)
			require.NoError(t, err)
			got := escapeHiddenJSON(b)
			require.Equal(t, tc.want, string(got))
			requireNothingHidden(t, string(got))
			var back string
			require.NoError(t, json.Unmarshal(got, &back))
			require.Equal(t, tc.in, back, "a JSON reader gets the stored string back")
		})
	}
}

// TestStatusEscapesStoredNames writes a lease whose name and holder label
// would rewrite a terminal straight into an SQLite store (as an older
// tenure, or anyone with write access to the file, could) and checks that
// status shows them escaped, in the table and in JSON.
func TestStatusEscapesStoredNames(t *testing.T) {
	t.Parallel()
	db := sqliteURL(t)
	st := openSQLite(t, db)
	acquire(t, st, "job", testutil.Holder(t, "worker"))
	const name, label = "job\u202e\u200b\x1b[2J", "ops\u2066\ufeff"
	const payload = "addr\u202e\x1b[2J"
	_, err := st.DB().ExecContext(t.Context(),
		"UPDATE tenure_leases SET name = ?, holder_label = ?, payload = ? WHERE name = 'job'", name, label, payload)
	require.NoError(t, err)

	o := cli(t, "status", "--store", db)
	require.Equal(t, ExitOK, o.code, o.stderr)
	requireNothingHidden(t, o.stdout)
	require.Regexp(t, `(?m)^`+regexp.QuoteMeta(`"job\u202e\u200b\x1b[2J"`)+`\s+held\s+`+regexp.QuoteMeta(`"ops\u2066\ufeff/`), o.stdout)
	require.Regexp(t, `(?m)\s`+regexp.QuoteMeta(`"addr\u202e\x1b[2J"`)+`$`, o.stdout, "the payload is escaped too")

	o = cli(t, "status", "--json", "--store", db)
	require.Equal(t, ExitOK, o.code, o.stderr)
	requireNothingHidden(t, o.stdout)
	require.Contains(t, o.stdout, `"name":"job\u202e\u200b\u001b[2J"`)
	var snap snapshotJSON
	require.NoError(t, json.Unmarshal([]byte(o.stdout), &snap))
	require.Len(t, snap.Leases, 1)
	require.Equal(t, name, snap.Leases[0].Name, "JSON readers get the stored name")
	require.Equal(t, label, snap.Leases[0].Label)
	require.Equal(t, payload, snap.Leases[0].Payload)
	require.True(t, strings.HasPrefix(snap.Leases[0].Holder, label+"/"))

	o = cli(t, "status", "--store", db, "job\u202e")
	require.Equal(t, ExitUsage, o.code)
	require.Contains(t, o.stderr, `lease name "job\u202e" contains the bidirectional control U+202E`)
	requireNothingHidden(t, o.stderr)
}

// TestSecretsNeverPrinted runs status and run against a Redis server with
// TLS and an ACL user (started by the test, with a CA of its own) and
// checks that neither a right nor a wrong password, in the URL or in a
// password file, shows on standard output or standard error.
func TestSecretsNeverPrinted(t *testing.T) {
	t.Parallel()
	ca := testca.New(t)
	r := redisserver.OwnRedisTLS(t, ca, false)
	const wrong = "Wr0ngCliSecret"
	dir := t.TempDir()
	file := func(name, content string) string {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
		return url.QueryEscape(path)
	}
	base := fmt.Sprintf("rediss://%s@127.0.0.1:%d/0?tls_ca_file=%s&tenure_prefix=%s:", redisserver.RedisTLSUser, r.Port, url.QueryEscape(ca.CertFile), testutil.UniqueName(t))
	inURL := func(pw string) string { return strings.Replace(base, "@", ":"+pw+"@", 1) }
	for _, tc := range []struct {
		name, url string
		ok        bool
	}{
		{"RightPasswordFile", base + "&password_file=" + file("right", r.Password), true},
		{"RightPasswordInURL", inURL(r.Password), true},
		{"WrongPasswordFile", base + "&password_file=" + file("wrong", wrong), false},
		{"WrongPasswordInURL", inURL(wrong), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, args := range [][]string{
				{"status", "--store", tc.url},
				{"status", "--json", "--store", tc.url, "job"},
				{"run", "--name", "job-" + tc.name, "--ttl", "5s", "--store", tc.url, "--", "true"},
			} {
				o := cli(t, args...)
				if tc.ok {
					require.Equal(t, ExitOK, o.code, "%v: %s", args, o.stderr)
				} else {
					require.Equal(t, ExitUnavailable, o.code, "%v: %s", args, o.stderr)
					require.Contains(t, o.stderr, "WRONGPASS")
				}
				for _, secret := range []string{r.Password, wrong} {
					require.NotContains(t, o.stdout, secret, "%v", args)
					require.NotContains(t, o.stderr, secret, "%v", args)
				}
			}
		})
	}
}
