package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/store"
)

// unitStore keeps TTLs in unit, with floor as its shortest TTL.
type unitStore struct {
	store.Store
	unit, floor time.Duration
}

func (s unitStore) TTLUnit() time.Duration { return s.unit }
func (s unitStore) MinTTL() time.Duration  { return s.floor }

func TestCheckTTLUnit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		unit, floor time.Duration
		ttl         time.Duration
		want        string // "" when the TTL is kept as asked
	}{
		{"Exact", 0, 0, 2500*time.Millisecond + time.Nanosecond, ""},
		{"WholeSeconds", time.Second, 2 * time.Second, 3 * time.Second, ""},
		{"FractionOfASecond", time.Second, 2 * time.Second, 2500 * time.Millisecond,
			"tenure: invalid argument: TTL 2.5s: the store keeps TTLs in whole seconds; use 2s or 3s"},
		{"ShorterOneBelowTheFloor", time.Second, 3 * time.Second, 3500 * time.Millisecond,
			"tenure: invalid argument: TTL 3.5s: the store keeps TTLs in whole seconds; use 3s or 4s"},
		{"OnlyTheLongerOne", time.Second, 2 * time.Second, 1500 * time.Millisecond,
			"tenure: invalid argument: TTL 1.5s: the store keeps TTLs in whole seconds; use 2s"},
		{"FractionOfAMillisecond", time.Millisecond, 0, 2*time.Second + 500*time.Microsecond,
			"tenure: invalid argument: TTL 2.0005s: the store keeps TTLs in whole milliseconds; use 2s or 2.001s"},
		{"FractionOfAMicrosecond", time.Microsecond, 0, 2*time.Second + 1,
			"tenure: invalid argument: TTL 2.000000001s: the store keeps TTLs in whole microseconds; use 2s or 2.000001s"},
		{"UnnamedUnit", 250 * time.Millisecond, 0, 1100 * time.Millisecond,
			"tenure: invalid argument: TTL 1.1s: the store keeps TTLs in multiples of 250ms; use 1s or 1.25s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var s store.Store = unitStore{unit: tc.unit, floor: tc.floor}
			err := store.CheckTTLUnit(s, tc.ttl)
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, store.ErrInvalid)
			var ue *store.TTLUnitError
			require.ErrorAs(t, err, &ue)
			require.Equal(t, tc.unit, ue.Unit)
			require.EqualError(t, err, tc.want)
		})
	}
}
