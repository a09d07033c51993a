package storetest

import (
	"testing"

	"github.com/tenure-dev/tenure/store"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/testutil"
)

// tenures is how many tenures the token tests go through.
const tenures = 25

func testToken(t *testing.T, h Harness) {
	t.Run("IncreasesAcrossTenures", func(t *testing.T) {
		t.Parallel()
		b := setup(t, h)
		n := name(t)
		// Holders alternate in pairs, so tenures pass both to the same
		// holder and to another one.
		holders := []store.Holder{testutil.Holder(t, "a"), testutil.Holder(t, "b")}
		var last store.Token
		for i := range tenures {
			g := b.acquire(t, n, holders[(i/2)%2], longTTL)
			require.Greater(t, g.Token, last, "tenure %d", i)
			last = g.Token
			if i%2 == 0 {
				require.True(t, b.renew(t, g, longTTL).Renewed)
				require.Equal(t, last, b.get(t, n).Token, "a renewal keeps the token")
			}
			b.release(t, g)
		}
	})

	t.Run("IndependentOfName", func(t *testing.T) {
		t.Parallel()
		b := setup(t, h)
		prefix := name(t)
		names := []string{prefix + "_a", prefix + "_b", prefix + "_c"}
		holder := testutil.Holder(t, "holder")
		last := make(map[string]store.Token)
		for i := range tenures {
			n := names[(i+i/3)%len(names)]
			g := b.acquire(t, n, holder, longTTL)
			require.Greater(t, g.Token, last[n], "tenure %d of %q", i, n)
			last[n] = g.Token
			b.release(t, g)
		}
		require.Len(t, last, len(names))
	})

	t.Run("RenewalKeepsToken", func(t *testing.T) {
		t.Parallel()
		b, g := setupHeld(t, h)
		for range 5 {
			res := b.renew(t, g, longTTL)
			require.True(t, res.Renewed)
			require.Equal(t, g.Token, res.Grant.Token)
			g = res.Grant
		}
		require.Equal(t, int64(6), g.Seq)
	})
}
