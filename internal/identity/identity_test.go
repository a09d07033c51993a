package identity_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/identity"
)

func TestInstanceIDsAreUniqueAndWellFormed(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for range 1000 {
		id := identity.New()
		require.Regexp(t, `^[a-z2-7]{26}$`, id)
		require.False(t, seen[id], "instance id %s repeated", id)
		seen[id] = true
	}
}
