package cli

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/store"
)

func TestHeldLine(t *testing.T) {
	t.Parallel()
	holder := store.Holder{Label: "web-1", Instance: "9xk"}
	require.Equal(t, `lease "billing" is held by web-1/9xk with token 41 for another 28.1s by the store's clock`,
		heldLine("billing", &store.HeldError{Holder: holder, Token: 41, Remaining: 28100 * time.Millisecond}))
	require.Equal(t, `lease "billing" was just released and is kept for the next follower in line, web-1/9xk, for another 200ms by the store's clock`,
		heldLine("billing", &store.HeldError{Token: 41, Next: holder, Remaining: 200 * time.Millisecond}))
}
