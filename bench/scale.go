package main

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tenure-dev/tenure"
)

// scaleResult: one tenure client holding many leases on PostgreSQL.
type scaleResult struct {
	Leases     int           `json:"leases"`
	Acquired   int           `json:"acquired"`
	AcquireAll time.Duration `json:"acquire_all_ns"` // until all were held, or the limit
	TTL        time.Duration `json:"ttl_ns"`
	// RenewRound: the time from the first Renew call of a renewal round to
	// the end of its last (a client splits large rounds into batches).
	RenewRound *dist         `json:"renew_round,omitempty"`
	RenewCalls int           `json:"renew_calls"`
	Shutdown   time.Duration `json:"shutdown_ns"` // Run's return after its ctx is done: releases everything
	// HeapPerLease is the client process's heap growth per lease acquired.
	HeapPerLease float64 `json:"heap_bytes_per_lease"`
	// From the lease table's statistics over the window, which PostgreSQL
	// updates a few seconds late: rows updated per second, the share of
	// them that were HOT updates, and the dead rows at the window's end.
	RowsUpdatedPerSec float64  `json:"rows_updated_per_sec"`
	HOTShare          float64  `json:"hot_share"`
	DeadRows          int64    `json:"dead_rows"`
	Errors            []string `json:"errors,omitempty"`
}

// phaseScale acquires n leases in one tenure client over PostgreSQL, conc
// acquisitions at a time for at most limit, watches the renewal rounds
// for window, then times the shutdown.
func phaseScale(ctx context.Context, be *tenureBackend, e *env, n, conc int, ttl, window, limit time.Duration) *scaleResult {
	res := &scaleResult{Leases: n, TTL: ttl}
	fail := func(err error) *scaleResult {
		res.Errors = append(res.Errors, err.Error())
		return res
	}
	inner, closeInner, err := be.open(ctx, nil, int32(min(conc, 31))+1)
	if err != nil {
		return fail(err)
	}
	defer closeInner()
	cs := newCrashStore(inner)
	var mu sync.Mutex
	var calls []renewCall
	cs.onRenew = func(start, end time.Time, _ int) {
		mu.Lock()
		calls = append(calls, renewCall{start, end})
		mu.Unlock()
	}
	cl, err := tenure.New(withBatches(cs), tenure.Config{Label: "scale", TTL: ttl})
	if err != nil {
		return fail(err)
	}
	rctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- cl.Run(rctx) }()

	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	actx, acancel := context.WithTimeout(ctx, limit)
	var next, acquired atomic.Int64
	var errOnce sync.Once
	var wg sync.WaitGroup
	t0 := time.Now()
	for range conc {
		wg.Go(func() {
			for actx.Err() == nil {
				i := next.Add(1)
				if i > int64(n) {
					return
				}
				if _, err := cl.Acquire(actx, e.key(fmt.Sprintf("scale%d", i))); err != nil {
					if actx.Err() == nil {
						errOnce.Do(func() { res.Errors = append(res.Errors, "acquire: "+err.Error()) })
					}
					continue
				}
				acquired.Add(1)
			}
		})
	}
	wg.Wait()
	acancel()
	res.AcquireAll, res.Acquired = time.Since(t0), int(acquired.Load())
	runtime.GC()
	runtime.ReadMemStats(&m1)
	if res.Acquired > 0 {
		res.HeapPerLease = (float64(m1.HeapAlloc) - float64(m0.HeapAlloc)) / float64(res.Acquired)
	}
	var st0 tableStats
	if be.tableStats != nil {
		if st0, err = be.tableStats(ctx); err != nil {
			res.Errors = append(res.Errors, "table statistics: "+err.Error())
		}
	}
	w0 := time.Now()

	mu.Lock()
	calls = calls[:0] // rounds that overlapped the acquisitions do not count
	mu.Unlock()
	time.Sleep(window)
	mu.Lock()
	got := slices.Clone(calls)
	mu.Unlock()
	if be.tableStats != nil {
		if st1, err := be.tableStats(ctx); err != nil {
			res.Errors = append(res.Errors, "table statistics: "+err.Error())
		} else if upd := st1.Updated - st0.Updated; upd > 0 {
			res.RowsUpdatedPerSec = float64(upd) / time.Since(w0).Seconds()
			res.HOTShare = float64(st1.HOTUpdated-st0.HOTUpdated) / float64(upd)
			res.DeadRows = st1.Dead
		}
	}

	t1 := time.Now()
	cancel()
	<-ran
	res.Shutdown = time.Since(t1)
	res.RenewCalls = len(got)
	res.RenewRound = summarise(renewRounds(got, ttl/3), false)
	return res
}

// renewCall is one Store.Renew call as the client made it.
type renewCall struct{ start, end time.Time }

// renewRounds groups Renew calls into rounds: the calls of one renewal
// (a client splits a large one into batches) start as others end, so a
// call that starts more than a tenth of the renew interval after the
// round's calls have all ended starts a new round. (The client's first
// renewals after a long acquisition come in two rounds a few seconds
// apart, until its leases converge on one: they are two rounds, not one
// long one.)
func renewRounds(calls []renewCall, interval time.Duration) []time.Duration {
	var out []time.Duration
	var first, last time.Time
	for _, s := range calls {
		if first.IsZero() || s.start.Sub(last) > interval/10 {
			if !first.IsZero() {
				out = append(out, last.Sub(first))
			}
			first, last = s.start, s.end
			continue
		}
		if s.end.After(last) {
			last = s.end
		}
	}
	if !first.IsZero() {
		out = append(out, last.Sub(first))
	}
	return out
}
