package consulstore

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/store"

	"github.com/hashicorp/consul/api"
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

func TestNews(t *testing.T) {
	t.Parallel()
	holder := store.Holder{Label: "l", Instance: "i"}
	next := store.Holder{Label: "n", Instance: "j"}
	acquired := func(seq uint64, name string) announced {
		a := newAnnounced(store.Notice{Name: name, Kind: store.NoticeAcquired, Holder: holder, Remaining: 1500 * time.Millisecond})
		a.Seq = seq
		return a
	}
	released := func(seq uint64, name string) announced {
		a := newAnnounced(store.Notice{Name: name, Kind: store.NoticeReleased, Next: next})
		a.Seq = seq
		return a
	}
	gotA := store.Notice{Name: "a", Kind: store.NoticeAcquired, Holder: holder, Remaining: 1500 * time.Millisecond}
	gotB := store.Notice{Name: "b", Kind: store.NoticeReleased, Next: next}
	gotX := store.Notice{Name: "x", Kind: store.NoticeReleased, Next: next}
	board := announcements{Seq: 5, Recent: []announced{released(3, "x"), acquired(4, "a"), released(5, "b")}}
	// An announcement key as an older version of this store wrote it.
	older, err := parseBoard(&api.KVPair{Key: "p/.announce", ModifyIndex: 7, Value: []byte(
		`{"seq":2,"recent":[{"seq":1,"name":"c","kind":"acquired","holder_label":"l","holder_instance":"i","ttl_ms":1500},{"seq":2,"name":"d","kind":"released"}]}`)})
	require.NoError(t, err)

	for label, tc := range map[string]struct {
		seen uint64
		now  announcements
		want []store.Notice
	}{
		"Nothing":       {seen: 5, now: board},
		"One":           {seen: 4, now: board, want: []store.Notice{gotB}},
		"AllKept":       {seen: 2, now: board, want: []store.Notice{gotX, gotA, gotB}},
		"SomeNotKept":   {seen: 1, now: board, want: []store.Notice{{}, gotX, gotA, gotB}},
		"Backwards":     {seen: 9, now: board, want: []store.Notice{{}}},
		"Deleted":       {seen: 9, now: announcements{}, want: []store.Notice{{}}},
		"OlderLibrary":  {seen: 0, now: older.val, want: []store.Notice{{Name: "c", Kind: store.NoticeChanged}, {Name: "d", Kind: store.NoticeChanged}}},
		"NoneKeptAtAll": {seen: 0, now: announcements{Seq: 3}, want: []store.Notice{{}}},
	} {
		got, seq := news(tc.seen, tc.now)
		require.Equal(t, tc.want, got, "case %s", label)
		require.Equal(t, tc.now.Seq, seq, "case %s: the seq now seen", label)
	}
}

func TestBoardOp(t *testing.T) {
	t.Parallel()
	var b board
	for i := range announceKept + 3 {
		op, err := b.op("p/.announce", newAnnounced(store.Notice{Name: fmt.Sprintf("n%d", i), Kind: store.NoticeReleased}))
		require.NoError(t, err)
		require.Equal(t, api.KVCAS, op.KV.Verb)
		require.Equal(t, b.index, op.KV.Index, "the write is a compare-and-set on the index read")
		next, err := parseBoard(&api.KVPair{Key: op.KV.Key, Value: op.KV.Value, ModifyIndex: b.index + 10})
		require.NoError(t, err)
		require.Equal(t, uint64(i+1), next.val.Seq, "announcements are numbered without gaps")
		require.Len(t, next.val.Recent, min(i+1, announceKept))
		last := next.val.Recent[len(next.val.Recent)-1]
		require.Equal(t, uint64(i+1), last.Seq)
		require.Equal(t, store.Notice{Name: fmt.Sprintf("n%d", i), Kind: store.NoticeReleased}, last.notice())
		b = next
	}
	require.Equal(t, uint64(4), b.val.Recent[0].Seq, "only the latest are kept")

	// A transaction of a batch announces more than the key keeps: the
	// latest are kept, numbered in order, and a listener that saw none
	// of them hears the empty notice first.
	many := make([]announced, announceKept+3)
	for i := range many {
		many[i] = newAnnounced(store.Notice{Name: fmt.Sprintf("m%d", i), Kind: store.NoticeReleased})
	}
	op, err := b.op("p/.announce", many...)
	require.NoError(t, err)
	require.Equal(t, b.index, op.KV.Index)
	next, err := boardWritten(op, b.index+10)
	require.NoError(t, err)
	require.Equal(t, b.index+10, next.index)
	require.Equal(t, b.val.Seq+uint64(len(many)), next.val.Seq)
	require.Len(t, next.val.Recent, announceKept)
	for j, a := range next.val.Recent {
		require.Equal(t, next.val.Seq-announceKept+1+uint64(j), a.Seq)
		require.Equal(t, fmt.Sprintf("m%d", len(many)-announceKept+j), a.Name)
	}
	heard, _ := news(b.val.Seq, next.val)
	require.Len(t, heard, announceKept+1)
	require.Equal(t, store.Notice{}, heard[0], "more came than the key keeps")

	_, err = parseBoard(&api.KVPair{Key: "p/.announce", Value: []byte("not json"), ModifyIndex: 3})
	require.ErrorContains(t, err, "KeyPrefix")
	absent, err := parseBoard(&api.KVPair{Key: "p/.announce"})
	require.NoError(t, err)
	require.Zero(t, absent, "a get-or-empty of an absent key is an empty board")
}

func TestNextIndex(t *testing.T) {
	t.Parallel()
	require.Equal(t, uint64(42), nextIndex(0, 42))
	require.Equal(t, uint64(43), nextIndex(42, 43))
	require.Equal(t, uint64(42), nextIndex(42, 42), "a timed-out query waits on the same index")
	require.Equal(t, uint64(0), nextIndex(42, 7), "an index that went backwards starts again")
	require.Equal(t, uint64(1), nextIndex(0, 0), "never wait on index 0")
}

func TestMemo(t *testing.T) {
	t.Parallel()
	const ttl = 10 * time.Second
	h := store.Holder{Label: "l", Instance: "i"}
	at := func(session string, seq int64, ends time.Time) written {
		return written{token: 7, val: value{Label: h.Label, Instance: h.Instance, Seq: seq, TTLMillis: ttl.Milliseconds()}, index: 100 + uint64(seq), session: session, ends: ends}
	}
	later := time.Now().Add(time.Hour)

	type bundle struct{ m *memo }
	setup := func() *bundle {
		m := newMemo()
		require.Empty(t, m.wrote("a", at("S", 1, later), false))
		require.Empty(t, m.wrote("b", at("S", 1, later), false))
		return &bundle{m: m}
	}

	t.Run("Hint", func(t *testing.T) {
		t.Parallel()
		b := setup()
		w, ok := b.m.hint(store.RenewParams{Name: "a", Holder: h, Token: 7, Seq: 1})
		require.True(t, ok)
		require.Equal(t, uint64(101), w.index)
		for _, p := range []store.RenewParams{
			{Name: "a", Holder: h, Token: 7, Seq: 2},
			{Name: "a", Holder: h, Token: 8, Seq: 1},
			{Name: "a", Holder: store.Holder{Label: "l", Instance: "j"}, Token: 7, Seq: 1},
			{Name: "c", Holder: h, Token: 7, Seq: 1},
		} {
			_, ok := b.m.hint(p)
			require.False(t, ok, "%+v", p)
		}
	})

	t.Run("Reusable", func(t *testing.T) {
		t.Parallel()
		b := setup()
		id, ok := b.m.reusable([]string{"a", "b"}, ttl)
		require.True(t, ok)
		require.Equal(t, "S", id)
		_, ok = b.m.reusable([]string{"a"}, ttl)
		require.False(t, ok, "b is in the session too and not in the batch")
		_, ok = b.m.reusable([]string{"a", "b"}, 2*ttl)
		require.False(t, ok, "another TTL")
		_, ok = b.m.reusable([]string{"a", "b", "c"}, ttl)
		require.False(t, ok, "c is not known")
		b.m.taint("S")
		_, ok = b.m.reusable([]string{"a", "b"}, ttl)
		require.False(t, ok, "a tainted session may hold leases the memo does not know")
	})

	t.Run("EmptiedSessions", func(t *testing.T) {
		t.Parallel()
		b := setup()
		b.m.taint("S")
		require.Empty(t, b.m.wrote("a", at("N", 2, later), false), "b is still in S")
		require.Empty(t, b.m.lost("b", "S"), "read in the session the memo has: kept")
		require.Equal(t, "S", b.m.lost("b", ""), "b left S, which is now empty")
		require.Empty(t, b.m.tainted, "the mark goes with the session's last lease")
		require.Equal(t, "N", b.m.left("a"))
		require.Empty(t, b.m.left("a"), "forgotten already")
		require.Empty(t, b.m.members)
	})

	t.Run("SweepTakesWholeSessions", func(t *testing.T) {
		t.Parallel()
		b := setup()
		past := time.Now().Add(-time.Second)
		require.Empty(t, b.m.wrote("a", at("S", 2, past), true))
		b.m.mu.Lock()
		b.m.sweep(time.Now())
		b.m.mu.Unlock()
		require.Empty(t, b.m.leases, "b goes with a: the memo never counts fewer leases in S than it holds")
		require.Empty(t, b.m.members)
		require.Empty(t, b.m.wrote("b", at("S", 2, later), true), "a write in place does not bring a forgotten session back")
		_, ok := b.m.reusable([]string{"b"}, ttl)
		require.False(t, ok)
		require.Empty(t, b.m.leases)
	})
}
