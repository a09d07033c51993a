package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestJain(t *testing.T) {
	t.Parallel()
	require.InDelta(t, 1.0, jain([]int{5, 5, 5, 5}), 1e-9)
	require.InDelta(t, 0.25, jain([]int{20, 0, 0, 0}), 1e-9)
	require.InDelta(t, 0.0, jain([]int{0, 0}), 1e-9)
}

func TestSummariseNearestRank(t *testing.T) {
	t.Parallel()
	var s []time.Duration
	for i := 100; i >= 1; i-- {
		s = append(s, time.Duration(i)*time.Millisecond)
	}
	d := summarise(s, false)
	require.Equal(t, 100, d.N)
	require.Equal(t, 50*time.Millisecond, d.P50)
	require.Equal(t, 99*time.Millisecond, d.P99)
	require.Equal(t, time.Millisecond, d.Min)
	require.Nil(t, d.Samples)
	require.Nil(t, summarise(nil, true))
}
