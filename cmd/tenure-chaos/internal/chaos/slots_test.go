package chaos

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSlotChecker: the postgres-slots cell's checker judges each slot's
// chain alone. Tokens of one sequence interleave across slots (slot 1's
// token 2 is written before slot 0's token 3) without a violation, a
// stale write within a slot is one, and a write acknowledged in one slot
// but missing from its chain is lost.
func TestSlotChecker(t *testing.T) {
	t.Parallel()
	base := func() *hb {
		h := &hb{}
		for _, p := range []string{"1:1", "2:1", "3:1"} {
			h.add(Event{Kind: kindStart, Proc: p, Detail: "worker"})
		}
		h.add(Event{Kind: kindAcquired, Proc: "1:1", Token: 1, Detail: "lease#0"})
		h.add(Event{Kind: kindAcquired, Proc: "2:1", Token: 2, Detail: "lease#1"})
		h.add(Event{Kind: kindAcquired, Proc: "3:1", Token: 3, Detail: "lease#0"})
		return h
	}
	cases := []struct {
		name   string
		hist   func() *hb
		chains [][]Row
		want   string // "" = no violation
	}{
		{"Clean", base, [][]Row{rows("1 1:1/1", "3 3:1/1"), rows("2 2:1/1", "2 2:1/2")}, ""},
		{"StaleInASlot", base, [][]Row{rows("1 1:1/1", "3 3:1/1", "1 1:1/2"), rows("2 2:1/1")}, invStale},
		{"Lost", func() *hb {
			h := base()
			h.add(Event{Kind: kindDone, Proc: "2:1", Res: resFenced, WID: "2:1/7", Token: 2, Result: resultOK})
			return h
		}, [][]Row{rows("1 1:1/1"), rows("2 2:1/1")}, invLost},
		{"AcknowledgedInItsSlot", func() *hb {
			h := base()
			h.add(Event{Kind: kindDone, Proc: "2:1", Res: resFenced, WID: "2:1/1", Token: 2, Result: resultOK})
			return h
		}, [][]Row{rows("1 1:1/1"), rows("2 2:1/1")}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v := checkCell(slotsBackend, tc.hist().evs, joinSlotChains(tc.chains), nil, 2*time.Second)
			if tc.want == "" {
				require.Zero(t, v.Fenced.Total(), "%v", v.Fenced.Examples)
				return
			}
			require.Positive(t, v.Fenced.Count[tc.want], "%v", v.Fenced)
		})
	}
	// Read as one lease's chain, without the slots' strides, the clean
	// case's interleaved tokens would be a stale acceptance.
	flat := append(rows("1 1:1/1", "3 3:1/1"), rows("2 2:1/1")...)
	for i := range flat {
		flat[i].N = int64(i + 1)
	}
	require.Positive(t, check(base().evs, flat, nil, 2*time.Second).Fenced.Count[invStale])
}
