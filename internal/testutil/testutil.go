package testutil

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/store"

	"go.uber.org/goleak"
)

// DefaultPostgresURL is the PostgreSQL server tests use when
// TENURE_TEST_PG_URL is unset.
const DefaultPostgresURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// maxUniqueName is the longest name [UniqueName] returns, in bytes.
const maxUniqueName = 40

// Receive waits up to timeout for one value from ch, and fails the test,
// naming what it waited for, when none comes.
func Receive[T any](t testing.TB, ch <-chan T, what string, timeout time.Duration) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(timeout):
		t.Fatalf("no %s within %s", what, timeout)
		var zero T
		return zero
	}
}

// VerifyTestMain runs the package's tests and fails them if any goroutine is
// still running afterwards. Call it from TestMain.
func VerifyTestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// NeedServer stops the test when err reports that the server named what is
// unreachable: it fails the test when the environment variable CI is
// non-empty and skips it otherwise. It does nothing when err is nil.
func NeedServer(t testing.TB, what string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	const howTo = "start it on loopback (or point the test at one with its URL variable, e.g. TENURE_TEST_PG_URL) and rerun"
	if os.Getenv("CI") != "" {
		t.Fatalf("testutil: %s is unreachable and CI is set: %v; %s", what, err, howTo)
	}
	t.Skipf("testutil: skipping: %s is unreachable: %v; %s", what, err, howTo)
}

// PostgresURL returns TENURE_TEST_PG_URL, or [DefaultPostgresURL] when it is
// unset.
func PostgresURL() string {
	if u := os.Getenv("TENURE_TEST_PG_URL"); u != "" {
		return u
	}
	return DefaultPostgresURL
}

// UniqueName returns a name unique to this call: lowercase letters, digits
// and underscores only, starting with a letter, at most 40 bytes, made of the
// tail of t.Name() and ten random hex digits. It is safe as an SQL identifier,
// a key prefix or a file name.
func UniqueName(t testing.TB) string {
	t.Helper()
	suffix := "_" + RandomHex(5)
	base := sanitize(t.Name())
	if keep := maxUniqueName - len(suffix); len(base) > keep {
		base = strings.TrimLeft(base[len(base)-keep:], "_0123456789")
	}
	if base == "" {
		base = "t"
	}
	return base + suffix
}

// Holder returns a holder with the given label and a fresh random instance
// id, so no two calls return the same holder.
func Holder(t testing.TB, label string) store.Holder {
	t.Helper()
	return store.Holder{Label: label, Instance: RandomHex(16)}
}

// sanitize lowercases s, turns every run of other characters into one
// underscore and makes the result start with a letter.
func sanitize(s string) string {
	var b strings.Builder
	under := false
	for _, r := range strings.ToLower(s) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
			under = false
			continue
		}
		if !under && b.Len() > 0 {
			b.WriteByte('_')
			under = true
		}
	}
	return strings.TrimLeft(strings.TrimRight(b.String(), "_"), "_0123456789")
}

// RandomHex returns n random bytes from crypto/rand in lowercase hex, for
// names and secrets no other test or server may share.
func RandomHex(n int) string {
	buf := make([]byte, n)
	_, _ = rand.Read(buf) // crypto/rand.Read never fails; it crashes the program instead.
	return hex.EncodeToString(buf)
}
