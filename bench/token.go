package main

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/tenure-dev/tenure"
	"github.com/tenure-dev/tenure/store/memstore"
)

// tokenResult: the cost of Lease.Token, the check every fenced write
// makes, beside one reading of the clock, which Token cannot skip (a
// paused process must see the time that passed before it trusts its
// token). Token never calls the store, so an in-memory one serves.
type tokenResult struct {
	Trials      int     `json:"trials"`
	TokenNs     float64 `json:"token_ns"` // per call, median of the trials
	NowNs       float64 `json:"time_now_ns"`
	TokenAllocs int64   `json:"token_allocs_per_call"` // the most any trial saw
}

// phaseToken times Lease.Token and time.Now with testing.Benchmark,
// alternating between the two for trials rounds.
func phaseToken(ctx context.Context, trials int) (*tokenResult, error) {
	st := memstore.New(memstore.Config{})
	defer st.Close()
	c, err := tenure.New(st, tenure.Config{Label: "token"})
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- c.Run(rctx) }()
	defer func() { cancel(); <-ran }()
	l, err := c.Acquire(ctx, "token")
	if err != nil {
		return nil, err
	}
	lost := false
	tokenBench := func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if l.Token() == 0 {
				lost = true
			}
		}
	}
	var sink time.Time
	nowBench := func(b *testing.B) {
		for range b.N {
			sink = time.Now()
		}
	}
	res := &tokenResult{Trials: trials}
	var tok, now []float64
	for range trials {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		n := testing.Benchmark(nowBench)
		t := testing.Benchmark(tokenBench)
		now = append(now, float64(n.T.Nanoseconds())/float64(n.N))
		tok = append(tok, float64(t.T.Nanoseconds())/float64(t.N))
		res.TokenAllocs = max(res.TokenAllocs, t.AllocsPerOp())
	}
	if lost || sink.IsZero() {
		return nil, fmt.Errorf("the lease was lost while its token was read")
	}
	res.TokenNs, res.NowNs = median(tok), median(now)
	return res, nil
}

func median(xs []float64) float64 {
	c := slices.Clone(xs)
	slices.Sort(c)
	return c[len(c)/2]
}
