package consulstore_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/consulstore"
)

// TestSubscriptionHearsWhatCameBeforeItsWatch: a subscription that waits
// for nothing runs no watch, yet a release announced after its Listen
// began reaches it once it follows that lease and its watch starts: the
// watch starts from the announcement key as it was when Listen began.
func TestSubscriptionHearsWhatCameBeforeItsWatch(t *testing.T) {
	t.Parallel()
	b := setup(t, consulstore.Config{})
	sub := b.store.Subscribe()
	r := testutil.NewNotifications()
	testutil.RunListener(t, t.Context(), sub.Listen, r.Notify, eventTimeout)
	require.True(t, r.Wait("", eventTimeout), "Listen announces its subscription")

	other, _ := countedStore(t, b.store.Config().KeyPrefix)
	h := testutil.Holder(t, "other")
	g, err := other.Acquire(t.Context(), store.AcquireParams{Name: b.name, Holder: h, TTL: longTTL})
	require.NoError(t, err)
	require.NoError(t, other.Release(t.Context(), store.ReleaseParams{Name: b.name, Holder: h, Token: g.Token}))

	sub.Follow(b.name)
	require.True(t, r.WaitFor(func(n store.Notice) bool { return n.Name == b.name && n.Kind == store.NoticeReleased }, eventTimeout),
		"the release made before the watch started was not delivered; got %+v", r.All())
}
