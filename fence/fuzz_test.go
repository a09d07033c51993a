package fence_test

import (
	"errors"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/fence"
	"github.com/tenure-dev/tenure/store"
)

// FuzzValidateWrite checks the one rule every fence applies to a write:
// an accepted resource is a name every store accepts, 1 to 255 bytes of
// valid UTF-8 with no control, format or line-separator character, and an
// accepted token is positive; a refusal matches store.ErrInvalid and its
// message is one line that shows nothing raw a terminal would act on; and
// validation agrees with store.ValidateName, so a resource one kit accepts,
// every kit and store accepts.
func FuzzValidateWrite(f *testing.F) {
	f.Add("orders", int64(1))
	f.Add("", int64(1))
	f.Add("orders", int64(0))
	f.Add("orders", int64(-1))
	f.Add("r", int64(1<<63-1))
	f.Add("café/名前🔒", int64(7))
	f.Add("a\nb", int64(1))
	f.Add("job\u202egpj", int64(1))
	f.Add("ord\u200bers", int64(1))
	f.Add("\ufeff", int64(1))
	f.Add("a\u2028b", int64(1))
	f.Add("r\xff", int64(1))
	f.Add(strings.Repeat("r", store.MaxNameLen+1), int64(1))
	f.Fuzz(func(t *testing.T, resource string, tok int64) {
		err := fence.ValidateWrite(resource, store.Token(tok))
		nameErr := store.ValidateName(resource)
		if err == nil {
			require.NoError(t, nameErr, "a resource the fence accepts is a name every store accepts")
			require.Positive(t, tok)
			require.NotEmpty(t, resource)
			require.LessOrEqual(t, len(resource), store.MaxNameLen)
			require.True(t, utf8.ValidString(resource))
			for _, r := range resource {
				require.False(t, unicode.Is(unicode.Cc, r) || unicode.Is(unicode.Cf, r) || unicode.Is(unicode.Zl, r) || unicode.Is(unicode.Zp, r),
					"accepted %U in %q", r, resource)
			}
			return
		}
		require.ErrorIs(t, err, store.ErrInvalid)
		require.True(t, nameErr != nil || tok <= 0, "refused %q with token %d although both are valid: %v", resource, tok, err)
		if nameErr == nil {
			require.ErrorIs(t, fence.ValidateToken(store.Token(tok)), store.ErrInvalid)
		}
		msg := err.Error()
		require.True(t, utf8.ValidString(msg), "message is not UTF-8: %q", msg)
		for _, r := range msg {
			require.True(t, r == ' ' || unicode.IsPrint(r), "message shows %U raw: %q", r, msg)
		}
		var fe *store.FencedError
		require.False(t, errors.As(err, &fe), "bad input is not a fenced write")
	})
}
