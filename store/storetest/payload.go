package storetest

import (
	"strings"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/store"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/testutil"
)

// payloads are payloads every store must keep exactly: an address, text
// that quoting or escaping in a store would change, and the longest one.
var payloads = map[string]string{
	"Address":    "10.0.0.7:8443",
	"Quotes":     `{"addr":"db-1:5432","note":"it's \\ fine; -- '); DROP"}`,
	"Unicode":    "lead-ünïcödé-名前-🔒",
	"MaxLen":     strings.Repeat("p", store.MaxPayloadLen-2) + "é",
	"Whitespace": "  spaced  out  ",
}

func testPayload(t *testing.T, h Harness) {
	t.Run("RoundTrip", func(t *testing.T) {
		t.Parallel()
		b := setup(t, h)
		prefix := name(t) + "-"
		for label, payload := range payloads {
			n := prefix + label
			g := b.acquireWith(t, n, testutil.Holder(t, "leader"), payload, longTTL)
			require.Equal(t, payload, g.Payload, "case %s: the grant carries the payload", label)
			require.Equal(t, payload, b.requireHeld(t, g, 1).Payload, "case %s: Get shows the payload", label)

			held := b.acquireHeld(t, n, testutil.Holder(t, "follower"), longTTL)
			require.Equal(t, payload, held.Payload, "case %s: a refused follower is told the holder's payload", label)

			renewed := b.renew(t, g, longTTL)
			require.True(t, renewed.Renewed)
			require.Empty(t, renewed.Grant.Payload, "case %s: a renewal reports no payload", label)
			require.Equal(t, payload, b.requireHeld(t, g, 2).Payload, "case %s: a renewal keeps the payload", label)
		}
		if l, ok := b.store.(store.Lister); ok {
			rs, err := l.List(t.Context())
			require.NoError(t, err)
			found := 0
			for _, r := range rs {
				label, ok := strings.CutPrefix(r.Name, prefix)
				if ok {
					require.Equal(t, payloads[label], r.Payload, "List shows the payload of %s", r.Name)
					found++
				}
			}
			require.Equal(t, len(payloads), found, "List shows every lease")
		}
	})

	t.Run("Empty", func(t *testing.T) {
		t.Parallel()
		b := setup(t, h)
		n := name(t)
		g := b.acquireWith(t, n, testutil.Holder(t, "leader"), "", longTTL)
		require.Empty(t, g.Payload)
		require.Empty(t, b.requireHeld(t, g, 1).Payload)
		require.Empty(t, b.acquireHeld(t, n, testutil.Holder(t, "follower"), longTTL).Payload)
	})

	t.Run("NextTenureReplaces", func(t *testing.T) {
		t.Parallel()
		b := setup(t, h)
		n := name(t)
		first := b.acquireWith(t, n, testutil.Holder(t, "first"), "first:1", longTTL)
		b.release(t, first)
		r := b.get(t, n)
		require.Equal(t, store.StateReleased, r.State)
		require.Equal(t, "first:1", r.Payload, "a released lease still shows its last tenure's payload")

		second := b.acquireWith(t, n, testutil.Holder(t, "second"), "second:2", longTTL)
		require.Equal(t, "second:2", b.requireHeld(t, second, 1).Payload, "a new tenure replaces the payload")
		require.Equal(t, "second:2", b.acquireHeld(t, n, first.Holder, longTTL).Payload)
		b.release(t, second)

		third := b.acquireWith(t, n, testutil.Holder(t, "third"), "", longTTL)
		require.Empty(t, b.requireHeld(t, third, 1).Payload, "a new tenure without a payload clears the last one's")
	})

	t.Run("ExpiredShowsLast", func(t *testing.T) {
		t.Parallel()
		b := setup(t, h)
		n := name(t)
		g := b.acquireWith(t, n, testutil.Holder(t, "first"), "first:1", b.expiring())
		b.waitExpiry(t, g.Remaining)
		r := b.get(t, n)
		require.Equal(t, store.StateExpired, r.State)
		require.Equal(t, "first:1", r.Payload, "an expired lease still shows its last tenure's payload")

		next := b.acquireWith(t, n, testutil.Holder(t, "second"), "second:2", longTTL)
		require.Equal(t, "second:2", b.requireHeld(t, next, 1).Payload, "a takeover replaces the payload")
	})
}

// acquireWith is [bundle.acquire] with a payload and a TTL.
func (b *bundle) acquireWith(t *testing.T, name string, h store.Holder, payload string, ttl time.Duration) store.Grant {
	t.Helper()
	p := store.AcquireParams{Name: name, Holder: h, TTL: ttl, Payload: payload}
	g, err := b.store.Acquire(t.Context(), p)
	require.NoError(t, err, "acquire %q by %s with payload %q", name, h, payload)
	require.Equal(t, h, g.Holder)
	require.Equal(t, int64(1), g.Seq)
	return g
}
