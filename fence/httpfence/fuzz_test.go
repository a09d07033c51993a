package httpfence_test

import (
	"net/http"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/fence/httpfence"
	"github.com/tenure-dev/tenure/store"
)

// FuzzTokenHeader checks that the Fencing-Token header has exactly one
// spelling per token: ParseToken accepts exactly the canonical decimals of
// positive tokens (so what it accepts formats back to the same bytes, and
// every canonical token is accepted), refuses everything else with an
// error matching store.ErrInvalid, and TokenOf reads a request's single
// header the same way and refuses two.
func FuzzTokenHeader(f *testing.F) {
	for _, s := range []string{"1", "42", "9223372036854775807", "9223372036854775808", "0", "007", "-1", "+1",
		" 1", "1 ", "1e3", "0x10", "", "١", "99999999999999999999", "12\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := httpfence.ParseToken(s)
		canonical := false
		if n, perr := strconv.ParseInt(s, 10, 64); perr == nil && n > 0 && strconv.FormatInt(n, 10) == s {
			canonical = true
		}
		if err != nil {
			require.ErrorIs(t, err, store.ErrInvalid)
			require.False(t, canonical, "refused the canonical token %q: %v", s, err)
			require.Zero(t, tok)
		} else {
			require.True(t, canonical, "accepted %q, which is not a canonical positive token", s)
			require.Equal(t, s, strconv.FormatInt(int64(tok), 10))
		}

		r, rerr := http.NewRequest(http.MethodPut, "http://resource.invalid/x", nil)
		require.NoError(t, rerr)
		r.Header.Set(httpfence.Header, s)
		got, gerr := httpfence.TokenOf(r)
		require.Equal(t, tok, got)
		require.Equal(t, err == nil, gerr == nil)
		r.Header.Add(httpfence.Header, s)
		_, gerr = httpfence.TokenOf(r)
		require.ErrorIs(t, gerr, store.ErrInvalid, "two headers are refused")
	})
}

// FuzzSetToken checks that SetToken and TokenOf round-trip every positive
// token and that SetToken refuses the others, leaving the request alone.
func FuzzSetToken(f *testing.F) {
	for _, n := range []int64{1, 2, 1<<63 - 1, 0, -1, -1 << 63} {
		f.Add(n)
	}
	f.Fuzz(func(t *testing.T, n int64) {
		r, err := http.NewRequest(http.MethodPut, "http://resource.invalid/x", nil)
		require.NoError(t, err)
		err = httpfence.SetToken(r, store.Token(n))
		if n <= 0 {
			require.ErrorIs(t, err, store.ErrInvalid)
			require.Empty(t, r.Header.Values(httpfence.Header))
			return
		}
		require.NoError(t, err)
		got, err := httpfence.TokenOf(r)
		require.NoError(t, err)
		require.Equal(t, store.Token(n), got)
	})
}
