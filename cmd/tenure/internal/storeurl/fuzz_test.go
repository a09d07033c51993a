package storeurl_test

import (
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/cmd/tenure/internal/storeurl"
	"github.com/tenure-dev/tenure/store"
)

// FuzzParse feeds Parse arbitrary store URLs. It must never panic; a
// refusal matches store.ErrInvalid and is one line; an accepted URL has a
// backend, and its Display (when it masks no secret) parses again to the same backend and Display (what
// status and errors print is itself a valid URL for the same store).
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"postgres://alice:s3cr3t@db.example:5433/jobs?sslmode=verify-full&sslrootcert=/ca.pem",
		"postgresql://?tenure_schema=ops&tenure_prefix=lease_",
		"postgres://db/jobs?password=p&sslpassword=k",
		"postgres://bouncer:6432/jobs?default_query_exec_mode=exec&tenure_listen=postgres%3A%2F%2Fu%3Apw%40db%2Fjobs",
		"postgres://bouncer/jobs?tenure_listen=off",
		"sqlite:/var/lib/job/tenure.db", "sqlite:///abs", "sqlite:rel.db", "sqlite:", "sqlite://host/x",
		"redis://u:p@127.0.0.1:6379/2?tenure_prefix=x:", "rediss://127.0.0.1:6380", "redis://[::1]:6379",
		"etcd://root:pw@h1:2379,h2,[::1]:2380?tenure_prefix=p/", "etcd://", "etcd://,",
		"consul://127.0.0.1:8500?tenure_lock_delay=15s&tenure_session_ttl_min=1s", "consul://u:p@h",
		"nats://u:p@n1:4222,n2?tenure_bucket=jobs&tenure_replicas=3", "nats://", "nats://tok@h", "nats://h?token_file=/t",
		"always:the%20report%20is%20idempotent", "always:", "x", "/var/lib/x.db", "postgres:opaque", "%",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		tgt, err := storeurl.Parse(raw)
		if err != nil {
			require.ErrorIs(t, err, store.ErrInvalid)
			require.NotContains(t, err.Error(), "\n")
			return
		}
		require.NotNil(t, tgt.Backend)
		require.NotEmpty(t, tgt.Display)
		if s, ok := tgt.Backend.(*storeurl.SQLite); ok && !utf8.ValidString(s.Path) {
			return // a path is bytes, shown as given
		}
		if a, ok := tgt.Backend.(*storeurl.Always); ok {
			// Display shows the reason decoded, for people; the reason
			// written percent-encoded comes back unchanged.
			again, err := storeurl.Parse("always:" + url.PathEscape(a.Reason))
			require.NoError(t, err)
			require.Equal(t, a, again.Backend)
			return
		}
		if strings.Contains(tgt.Display, "xxxxx") {
			// Redact masks every occurrence of a secret, so a short
			// password also masks parts of the URL that merely contain
			// it: safe, not always a valid URL. FuzzSecrets checks these.
			return
		}
		again, err := storeurl.Parse(tgt.Display)
		require.NoError(t, err, "Display %q of %q does not parse", tgt.Display, raw)
		require.Equal(t, tgt.Backend.Name(), again.Backend.Name())
		require.Equal(t, tgt.Display, again.Display, "from %q", raw)
	})
}

// shown is what a user sees of a parse: the display, or the error.
func shown(tgt storeurl.Target, err error) string {
	if err != nil {
		return err.Error()
	}
	return tgt.Display
}

// FuzzSecrets builds URLs with a password (in the user info, or in a
// password parameter) for each server store and checks that the password
// shows neither in Display nor in any error Parse returns.
func FuzzSecrets(f *testing.F) {
	f.Add(uint8(0), "alice", "s3cr3t-pw", "db.example:5432", "sslmode=disable")
	f.Add(uint8(1), "default", "hunter2-longer", "127.0.0.1:6379", "tenure_prefix=x")
	f.Add(uint8(2), "root", "p@ss:w/rd", "h1:2379,h2", "")
	f.Add(uint8(3), "", "only-pass", "h:bad", "tenure_schema=%zz")
	f.Add(uint8(4), "u", "pw-in-param", "db", "")
	f.Add(uint8(5), "alice", "nats-secret", "n1:4222,n2", "tenure_bucket=b")
	f.Add(uint8(4), "u", "listen-secret", "bouncer:6432", "tenure_listen=postgres%3A%2F%2Fu%3Alisten-secret%40db%2Fjobs")
	f.Fuzz(func(t *testing.T, kind uint8, user, password, host, query string) {
		if len(password) < 6 {
			return // a short password can be a part of anything
		}
		build := func(pw string) string {
			switch kind % 6 {
			case 0:
				return "postgres://" + url.UserPassword(user, pw).String() + "@" + host + "/db?" + query
			case 1:
				return "redis://" + url.UserPassword(user, pw).String() + "@" + host + "?" + query
			case 2:
				return "etcd://" + url.UserPassword(user, pw).String() + "@" + host + "?" + query
			case 3:
				return "rediss://" + url.UserPassword(user, pw).String() + "@" + host + "/0?" + query
			case 5:
				return "nats://" + url.UserPassword(user, pw).String() + "@" + host + "?" + query
			}
			return "postgres://" + host + "/db?password=" + url.QueryEscape(pw) + "&" + query
		}
		raw, without := build(password), build("")
		forms := []string{password, url.QueryEscape(password), url.PathEscape(password)}
		// What Parse shows of the same URL without the password: text of
		// the password's that shows there too comes from elsewhere in the
		// URL (or from quoting it), not from the password.
		shownWithout := shown(storeurl.Parse(without))
		for _, form := range forms {
			if strings.Contains(without, form) || strings.Contains(shownWithout, form) {
				return
			}
		}
		got := shown(storeurl.Parse(raw))
		for _, form := range forms {
			require.NotContains(t, got, form, "the password of %q shows", raw)
		}
	})
}
