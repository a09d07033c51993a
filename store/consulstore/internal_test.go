package consulstore

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/store"

	"github.com/stretchr/testify/require"
)

func TestEscapeName(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]string{
		"billing":                "billing",
		"Nightly-Run_2.v1":       "Nightly-Run_2.v1",
		"a/b":                    "a%2Fb",
		".":                      "%2E",
		"..":                     "%2E.",
		".hidden":                "%2Ehidden",
		"50%":                    "50%25",
		"with space":             "with%20space",
		"ünï":                    "%C3%BCn%C3%AF",
		`quote'"\`:               "quote%27%22%5C",
		"lease'); DROP TABLE --": "lease%27%29%3B%20DROP%20TABLE%20--",
	} {
		got := escapeName(name)
		require.Equal(t, want, got, "escapeName(%q)", name)
		require.NotContains(t, got, "/")
		back, ok := unescapeName(got)
		require.True(t, ok, "unescapeName(%q)", got)
		require.Equal(t, name, back)
	}
}

func TestEscapeNameRoundTrip(t *testing.T) {
	t.Parallel()
	names := []string{
		strings.Repeat("n", store.MaxNameLen),
		strings.Repeat("é", store.MaxNameLen/2) + "n",
		"lease-ünïcödé-名前-🔒",
		`lease/with spaces:and'quotes"and;semicolons%_\`,
		"...", "a.", "%2F", "%",
	}
	seen := make(map[string]string)
	for _, name := range names {
		seg := escapeName(name)
		require.NotContains(t, []string{".", ".."}, seg)
		back, ok := unescapeName(seg)
		require.True(t, ok, "unescapeName(escapeName(%q))", name)
		require.Equal(t, name, back)
		if other, dup := seen[seg]; dup {
			t.Fatalf("%q and %q escape to the same segment %q", other, name, seg)
		}
		seen[seg] = name
	}
}

func TestUnescapeNameRefuses(t *testing.T) {
	t.Parallel()
	for _, seg := range []string{
		"", "a/b", "a b", ".x", "%2", "%zz", "%2f", "%41", "%2E%2E", "x%", "ä",
	} {
		_, ok := unescapeName(seg)
		require.False(t, ok, "unescapeName(%q) accepted a segment escapeName cannot produce", seg)
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	good := map[string]Config{
		"Zero":          {},
		"Prefix":        {KeyPrefix: "apps/billing/leases/"},
		"NoSlashPrefix": {KeyPrefix: "tenure-"},
		"LockDelay":     {LockDelay: 15 * time.Second},
		"MaxLockDelay":  {LockDelay: MaxLockDelay},
		"MinTTL":        {MinSessionTTL: time.Second},
	}
	for label, cfg := range good {
		require.NoError(t, cfg.withDefaults().validate(), "config %s", label)
	}
	bad := map[string]Config{
		"LeadingSlash":      {KeyPrefix: "/tenure/"},
		"EmptySegment":      {KeyPrefix: "tenure//x/"},
		"Control":           {KeyPrefix: "ten\nure/"},
		"NotUTF8":           {KeyPrefix: "ten\xffure/"},
		"TooLong":           {KeyPrefix: strings.Repeat("p", MaxKeyPrefixLen+1)},
		"NegativeLockDelay": {LockDelay: -time.Second},
		"LongLockDelay":     {LockDelay: MaxLockDelay + time.Millisecond},
		"NegativeMinTTL":    {MinSessionTTL: -time.Second},
		"LongMinTTL":        {MinSessionTTL: MaxSessionTTL + time.Second},
	}
	for label, cfg := range bad {
		require.ErrorIs(t, cfg.withDefaults().validate(), store.ErrInvalid, "config %s", label)
	}
}

func TestSessionTTL(t *testing.T) {
	t.Parallel()
	cfg := Config{MinSessionTTL: 10 * time.Second}
	for ttl, want := range map[time.Duration]time.Duration{
		store.MinTTL:                        10 * time.Second,
		10 * time.Second:                    10 * time.Second,
		10*time.Second + time.Nanosecond:    10*time.Second + time.Millisecond,
		time.Minute + 1500*time.Microsecond: time.Minute + 2*time.Millisecond,
		MaxSessionTTL:                       MaxSessionTTL,
	} {
		got, err := cfg.sessionTTL(ttl)
		require.NoError(t, err, "ttl %s", ttl)
		require.Equal(t, want, got, "ttl %s", ttl)
	}
	_, err := cfg.sessionTTL(MaxSessionTTL + time.Millisecond)
	require.ErrorIs(t, err, store.ErrInvalid)
}

func TestChanged(t *testing.T) {
	t.Parallel()
	held := snapshot{token: 5, held: true}
	before := map[string]snapshot{
		"renewed":  held,
		"released": held,
		"expired":  held,
		"taken":    {token: 5},
		"deleted":  held,
		"idle":     {token: 3, released: true},
	}
	after := map[string]snapshot{
		"renewed":  held,
		"released": {token: 5, released: true},
		"expired":  {token: 5},
		"taken":    {token: 9, held: true},
		"idle":     {token: 3, released: true},
		"new":      {token: 11, held: true},
	}
	got := slices.Sorted(changed(before, after))
	require.Equal(t, []string{"deleted", "expired", "released", "taken"}, got)
	require.Empty(t, slices.Collect(changed(after, after)), "nothing changed")
}

func TestNextIndex(t *testing.T) {
	t.Parallel()
	require.Equal(t, uint64(42), nextIndex(0, 42))
	require.Equal(t, uint64(43), nextIndex(42, 43))
	require.Equal(t, uint64(42), nextIndex(42, 42), "a timed-out query waits on the same index")
	require.Equal(t, uint64(0), nextIndex(42, 7), "an index that went backwards starts again")
	require.Equal(t, uint64(1), nextIndex(0, 0), "never wait on index 0")
}
