package sqlitestore

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/store"
)

// TestListenerOrder checks how a listener merges the changes its own
// Store's commits offer with those a poll read: each change is queued
// once, and never after a later change of the same lease, whichever way
// came first.
func TestListenerOrder(t *testing.T) {
	t.Parallel()
	acquired := func(c int64, name string) stamped {
		return stamped{change: c, notice: store.Notice{Name: name, Kind: store.NoticeAcquired}}
	}
	released := func(c int64, name string) stamped {
		return stamped{change: c, notice: store.Notice{Name: name, Kind: store.NoticeReleased}}
	}
	type step struct {
		offer []stamped // a commit of this Store
		poll  []stamped // a poll that read up to last
		last  int64
	}
	for _, tc := range []struct {
		name  string
		steps []step
		want  []stamped
	}{
		{
			name: "OfferedThenPolled",
			steps: []step{
				{offer: []stamped{acquired(1, "x")}},
				{poll: []stamped{acquired(1, "x")}, last: 1},
			},
			want: []stamped{acquired(1, "x")},
		},
		{
			name: "PolledThenOffered",
			steps: []step{
				{poll: []stamped{acquired(1, "x")}, last: 1},
				{offer: []stamped{acquired(1, "x")}},
			},
			want: []stamped{acquired(1, "x")},
		},
		{
			// The poll read before the release committed and queues
			// after it was offered: its older state of x is stale.
			name: "StalePollAfterOffer",
			steps: []step{
				{offer: []stamped{released(2, "x")}},
				{poll: []stamped{acquired(1, "x")}, last: 1},
				{poll: []stamped{released(2, "x")}, last: 2},
			},
			want: []stamped{released(2, "x")},
		},
		{
			// Another process changed x after this Store did; the poll
			// queued that first, so this Store's older change is stale.
			name: "StaleOfferAfterPoll",
			steps: []step{
				{poll: []stamped{acquired(3, "x")}, last: 3},
				{offer: []stamped{released(2, "x")}},
			},
			want: []stamped{acquired(3, "x")},
		},
		{
			name: "OtherLeasesKeepTheirOwn",
			steps: []step{
				{offer: []stamped{released(2, "x")}},
				{poll: []stamped{acquired(1, "y"), released(2, "x"), acquired(3, "x")}, last: 3},
			},
			want: []stamped{released(2, "x"), acquired(1, "y"), acquired(3, "x")},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l := &listener{wake: make(chan struct{}, 1), latest: make(map[string]int64)}
			for _, s := range tc.steps {
				if s.offer != nil {
					l.offer(s.offer)
				} else {
					l.polled(s.poll, s.last)
				}
			}
			want := make([]store.Notice, len(tc.want))
			for i, c := range tc.want {
				want[i] = c.notice
			}
			require.Equal(t, want, l.queue)
		})
	}
}
