package store_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/store"
)

// announcer is a Notifier that announces the names in its list, in order,
// and returns; before, when set, runs before each.
type announcer struct {
	names  []string
	before func(name string)
}

func (a *announcer) Listen(ctx context.Context, notify func(store.Notice)) error {
	if notify == nil {
		return store.ErrInvalid
	}
	for _, name := range a.names {
		if a.before != nil {
			a.before(name)
		}
		notify(store.Notice{Name: name})
	}
	return nil
}

// subscribing is a Notifier that makes subscriptions of its own.
type subscribing struct {
	announcer
	sub store.Subscription
}

func (s *subscribing) Subscribe() store.Subscription { return s.sub }

func TestSubscribe(t *testing.T) {
	t.Parallel()

	t.Run("FiltersAPlainNotifier", func(t *testing.T) {
		t.Parallel()
		a := &announcer{names: []string{"", "billing", "reports", "payroll", "billing", ""}}
		sub := store.Subscribe(a)
		sub.Follow("billing")
		sub.Follow("billing")
		sub.Follow("payroll")
		a.before = func(name string) {
			if name == "payroll" {
				sub.Unfollow("billing")
			}
		}
		var heard []string
		require.NoError(t, sub.Listen(t.Context(), func(n store.Notice) { heard = append(heard, n.Name) }))
		require.Equal(t, []string{"", "billing", "payroll", ""}, heard, "followed names and the empty notice, as followed when announced")
		require.ErrorIs(t, sub.Listen(t.Context(), nil), store.ErrInvalid, "the store refuses a nil notify")
	})

	t.Run("UsesTheStoresOwn", func(t *testing.T) {
		t.Parallel()
		own := store.Subscribe(&announcer{})
		require.Same(t, own, store.Subscribe(&subscribing{sub: own}))
	})
}
