package storeurl

import (
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/consulstore"
)

// TestConsulMinTTL checks that a Consul URL's tenure_session_ttl_min
// reaches the store, whose minimum TTL ([store.MinTTLOf]) it sets.
func TestConsulMinTTL(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]time.Duration{
		"consul://h":                           consulstore.DefaultMinSessionTTL,
		"consul://h?tenure_session_ttl_min=2s": 2 * time.Second,
		// The contract's minimum still applies below a lower server floor.
		"consul://h?tenure_session_ttl_min=100ms": store.MinTTL,
	} {
		tg, err := Parse(raw)
		require.NoError(t, err)
		client, err := api.NewClient(api.DefaultConfig())
		require.NoError(t, err)
		st, err := consulstore.New(client, tg.Backend.(*Consul).config()) // contacts nothing
		require.NoError(t, err)
		require.Equal(t, want, store.MinTTLOf(st), raw)
	}
}
