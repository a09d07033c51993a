package main

import (
	"math"
	"slices"
	"strconv"
	"time"
)

// dist summarises a set of latency samples.
type dist struct {
	N   int           `json:"n"`
	Min time.Duration `json:"min_ns"`
	P50 time.Duration `json:"p50_ns"`
	P90 time.Duration `json:"p90_ns"`
	P99 time.Duration `json:"p99_ns"`
	Max time.Duration `json:"max_ns"`
	// Samples are kept for the distributions the picture draws.
	Samples []time.Duration `json:"samples_ns,omitempty"`
}

// summarise returns the nearest-rank quantiles of s; keep says whether the
// samples themselves are kept.
func summarise(s []time.Duration, keep bool) *dist {
	if len(s) == 0 {
		return nil
	}
	c := slices.Clone(s)
	slices.Sort(c)
	q := func(p float64) time.Duration {
		return c[max(0, min(len(c)-1, int(math.Ceil(p*float64(len(c))))-1))]
	}
	d := &dist{N: len(c), Min: c[0], P50: q(0.5), P90: q(0.9), P99: q(0.99), Max: c[len(c)-1]}
	if keep {
		d.Samples = c
	}
	return d
}

// jain is Jain's fairness index of per-client counts: 1 when every client
// got the same share, 1/n when one got everything.
func jain(counts []int) float64 {
	var sum, sq float64
	for _, c := range counts {
		sum += float64(c)
		sq += float64(c) * float64(c)
	}
	if sq == 0 {
		return 0
	}
	return sum * sum / (float64(len(counts)) * sq)
}

// fmtDur prints d with three significant digits in a fitting unit.
func fmtDur(d time.Duration) string {
	switch {
	case d == 0:
		return "0"
	case d < time.Millisecond:
		return sig3(float64(d)/1e3) + " µs"
	case d < time.Second:
		return sig3(float64(d)/1e6) + " ms"
	default:
		return sig3(float64(d)/1e9) + " s"
	}
}

func sig3(v float64) string {
	switch {
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
}
