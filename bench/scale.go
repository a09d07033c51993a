package main

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tenure-dev/tenure"
)

// scaleResult: tenure clients holding many leases on PostgreSQL.
type scaleResult struct {
	Leases  int `json:"leases"`
	Clients int `json:"clients"` // sharing one store: one pool, one listener
	// Acquired counts the leases held when the acquisitions ended.
	Acquired   int           `json:"acquired"`
	AcquireAll time.Duration `json:"acquire_all_ns"` // until all were held, or the limit
	TTL        time.Duration `json:"ttl_ns"`
	// RenewRound: the time from the first Renew call of a client's renewal
	// round to the end of its last (a client splits large rounds into
	// batches), every client's rounds together.
	RenewRound *dist         `json:"renew_round,omitempty"`
	RenewCalls int           `json:"renew_calls"`
	Shutdown   time.Duration `json:"shutdown_ns"` // Run's return after its ctx is done: releases everything
	// HeapPerLease is the client process's heap growth per lease acquired.
	HeapPerLease float64 `json:"heap_bytes_per_lease"`
	// From the lease table's statistics over the window, which PostgreSQL
	// updates a few seconds late: rows updated per second, the share of
	// them that were HOT updates, and the dead rows at the window's end.
	RowsUpdatedPerSec float64 `json:"rows_updated_per_sec"`
	HOTShare          float64 `json:"hot_share"`
	DeadRows          int64   `json:"dead_rows"`
	// CPU time over the window, holding the leases: the PostgreSQL
	// server's (every postgres process on this machine; zero when the
	// server is elsewhere) and the client process's, in CPU µs per
	// lease-second and in cores.
	ServerCPUPerLeaseSec float64  `json:"server_cpu_us_per_lease_second"`
	ServerCores          float64  `json:"server_cores"`
	ClientCPUPerLeaseSec float64  `json:"client_cpu_us_per_lease_second"`
	ClientCores          float64  `json:"client_cores"`
	Errors               []string `json:"errors,omitempty"`
}

// phaseScale acquires n leases in clients tenure clients over one
// PostgreSQL store (lease i in client i mod clients), conc acquisitions at
// a time for at most limit, watches the renewal rounds and the CPU for
// window, then times the shutdown.
func phaseScale(ctx context.Context, be *tenureBackend, e *env, n, clients, conc int, ttl, window, limit time.Duration) *scaleResult {
	res := &scaleResult{Leases: n, Clients: clients, TTL: ttl}
	fail := func(err error) *scaleResult {
		res.Errors = append(res.Errors, err.Error())
		return res
	}
	inner, closeInner, err := be.open(ctx, nil, int32(min(conc, 31))+1)
	if err != nil {
		return fail(err)
	}
	defer closeInner()
	var mu sync.Mutex
	calls := make([][]renewCall, clients)
	cls := make([]*tenure.Client, clients)
	rctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ran := make(chan error, clients)
	for i := range cls {
		cs := newCrashStore(inner)
		cs.onRenew = func(start, end time.Time, _ int) {
			mu.Lock()
			calls[i] = append(calls[i], renewCall{start, end})
			mu.Unlock()
		}
		if cls[i], err = tenure.New(withBatches(cs), tenure.Config{Label: fmt.Sprintf("scale%d", i), TTL: ttl}); err != nil {
			return fail(err)
		}
		go func() { ran <- cls[i].Run(rctx) }()
	}

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
				if _, err := cls[i%int64(clients)].Acquire(actx, e.key(fmt.Sprintf("scale%d", i))); err != nil {
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
	var srv0 time.Duration
	local := localURL(e.pgURL)
	if local {
		if srv0, err = serverCPU("postgres"); err != nil {
			res.Errors = append(res.Errors, "server CPU: "+err.Error())
			local = false
		}
	}
	cli0, w0 := selfCPU(), time.Now()

	mu.Lock()
	for i := range calls {
		calls[i] = calls[i][:0] // rounds that overlapped the acquisitions do not count
	}
	mu.Unlock()
	time.Sleep(window)
	mu.Lock()
	var rounds []time.Duration
	for _, c := range calls {
		rounds = append(rounds, renewRounds(c, ttl/3)...)
		res.RenewCalls += len(c)
	}
	mu.Unlock()
	held := time.Since(w0)
	leaseSeconds := float64(res.Acquired) * held.Seconds()
	cli := selfCPU() - cli0
	res.ClientCores = cli.Seconds() / held.Seconds()
	if leaseSeconds > 0 {
		res.ClientCPUPerLeaseSec = float64(cli.Microseconds()) / leaseSeconds
	}
	if local {
		if srv1, err := serverCPU("postgres"); err != nil {
			res.Errors = append(res.Errors, "server CPU: "+err.Error())
		} else {
			res.ServerCores = (srv1 - srv0).Seconds() / held.Seconds()
			if leaseSeconds > 0 {
				res.ServerCPUPerLeaseSec = float64((srv1 - srv0).Microseconds()) / leaseSeconds
			}
		}
	}
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
	for range cls {
		<-ran
	}
	res.Shutdown = time.Since(t1)
	res.RenewRound = summarise(rounds, false)
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
