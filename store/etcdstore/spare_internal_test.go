package etcdstore

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A spare's age is the longer of the two clocks' measures: a suspension
// that stopped the monotonic clock shows on the wall clock, and a wall
// clock set back does not make a spare younger.
func TestSpareAgeTakesTheLongerClock(t *testing.T) {
	t.Parallel()
	now := time.Now()
	suspended := spare{sent: now, wall: now.Round(0).Add(-time.Hour)}
	require.GreaterOrEqual(t, suspended.age(), time.Hour, "the wall clock saw an hour pass")
	setBack := spare{sent: now.Add(-time.Minute), wall: now.Round(0).Add(time.Hour)}
	require.GreaterOrEqual(t, setBack.age(), time.Minute, "the monotonic clock saw a minute pass")
	require.Zero(t, spare{}.age(), "a lease granted by the acquisition itself")
}
