package sqlitestore

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/store"
)

// FuzzRecord feeds the decoding of a lease row (row.record and row.grant,
// what Get, List, Acquire and Renew report from what they read) arbitrary
// column values, as a damaged or hand-edited file could hold them, at any
// time by the host clock. Properties: the state is exactly one of held,
// released and expired, as the row's released flag and expiry say; a held
// lease has time left, and nothing else does; the grant shows the holder
// only while held, the record always; token, seq and acquisition time come
// through unchanged.
func FuzzRecord(f *testing.F) {
	const sec = int64(time.Second)
	f.Add("w", "i1", int64(7), int64(3), 100*sec, 130*sec, false, 110*sec)
	f.Add("w", "i1", int64(7), int64(3), 100*sec, 130*sec, true, 110*sec)
	f.Add("w", "i1", int64(7), int64(3), 100*sec, 130*sec, false, 130*sec)
	f.Add("", "", int64(-1), int64(0), int64(-1<<63), int64(1<<63-1), false, int64(0))
	f.Add("job\u202e", "\x00", int64(1<<63-1), int64(1<<63-1), int64(1<<63-1), int64(-1<<63), false, int64(1<<62))
	f.Fuzz(func(t *testing.T, label, instance string, token, seq, acquiredAt, expiresAt int64, released bool, now int64) {
		if now < 0 {
			now = -(now + 1) // the host clock reads after 1970
		}
		r := row{holder: store.Holder{Label: label, Instance: instance}, token: store.Token(token), seq: seq,
			acquiredAt: acquiredAt, expiresAt: expiresAt, released: released}
		rec := r.record("n", now)
		g := r.grant("n", now)

		held := !released && expiresAt > now
		switch {
		case released:
			require.Equal(t, store.StateReleased, rec.State)
		case held:
			require.Equal(t, store.StateHeld, rec.State)
		default:
			require.Equal(t, store.StateExpired, rec.State)
		}
		require.Equal(t, held, r.held(now))
		if held {
			require.Positive(t, g.Remaining, "a held lease has time left")
			require.Equal(t, time.Duration(expiresAt-now), g.Remaining)
			require.Equal(t, r.holder, g.Holder)
		} else {
			require.Zero(t, g.Remaining)
			require.Zero(t, g.Holder, "a lease not held shows no holder in a grant")
		}
		require.Equal(t, "n", g.Name)
		require.Equal(t, store.Token(token), g.Token)
		require.Equal(t, seq, g.Seq)
		require.Equal(t, g.Name, rec.Name)
		require.Equal(t, g.Token, rec.Token)
		require.Equal(t, g.Seq, rec.Seq)
		require.Equal(t, g.Remaining, rec.Remaining)
		require.Equal(t, r.holder, rec.Holder, "a record names the last holder, held or not")
		require.Equal(t, acquiredAt, rec.AcquiredAt.UnixNano())
		require.Equal(t, time.UTC, rec.AcquiredAt.Location())
	})
}
