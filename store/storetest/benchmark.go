package storetest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/store"

	"github.com/tenure-dev/tenure/internal/testutil"
)

const (
	// benchTTL is long enough that no lease expires during a benchmark.
	benchTTL = 10 * time.Minute
	// benchBatch is how many leases one RenewBatch operation renews.
	benchBatch = store.MaxRenewBatch
	// benchAcquireBatch is how many new leases one AcquireBatch operation
	// takes: as many as a client sends in one round trip.
	benchAcquireBatch = 1000
	// roundTripSamples is how many round trips the baseline is the median of.
	roundTripSamples = 200
)

// Benchmark measures stores from h: Acquire (a new lease per operation),
// Renew (one lease), AcquireBatch1000 (1,000 new leases in one call, for a
// [store.BatchAcquirer]) and RenewBatch10000 (10,000 leases in one call). When
// [Capabilities.RoundTrip] is set it first measures the store's own round
// trip and reports Acquire and Renew as multiples of it ("x-roundtrip").
func Benchmark(b *testing.B, h Harness) {
	var roundTrip time.Duration
	if rt := h.Capabilities().RoundTrip; rt != nil {
		roundTrip = measureRoundTrip(b, rt)
		b.Logf("storetest: the store's own round trip takes %s (median of %d)", roundTrip, roundTripSamples)
	}

	b.Run("Acquire", func(b *testing.B) {
		s := h.NewStore(b)
		ctx := b.Context()
		prefix := testutil.UniqueName(b)
		holder := testutil.Holder(b, "bench")
		ops := 0
		for b.Loop() {
			p := store.AcquireParams{Name: fmt.Sprintf("%s_%d", prefix, ops), Holder: holder, TTL: benchTTL}
			if _, err := s.Acquire(ctx, p); err != nil {
				b.Fatalf("acquire %q: %v", p.Name, err)
			}
			ops++
		}
		reportRatio(b, roundTrip, ops)
	})

	b.Run("Renew", func(b *testing.B) {
		s := h.NewStore(b)
		ctx := b.Context()
		g, err := s.Acquire(ctx, store.AcquireParams{Name: testutil.UniqueName(b), Holder: testutil.Holder(b, "bench"), TTL: benchTTL})
		if err != nil {
			b.Fatalf("acquire: %v", err)
		}
		ps := []store.RenewParams{{Name: g.Name, Holder: g.Holder, Token: g.Token, Seq: g.Seq, TTL: benchTTL}}
		ops := 0
		for b.Loop() {
			rs, err := s.Renew(ctx, ps)
			if err != nil || len(rs) != 1 || !rs[0].Renewed {
				b.Fatalf("renew %+v: results %+v, error %v", ps[0], rs, err)
			}
			ps[0].Seq = rs[0].Grant.Seq
			ops++
		}
		reportRatio(b, roundTrip, ops)
	})

	b.Run(fmt.Sprintf("AcquireBatch%d", benchAcquireBatch), func(b *testing.B) {
		s := h.NewStore(b)
		ba, ok := s.(store.BatchAcquirer)
		if !ok {
			b.Skipf("storetest: %T does not implement store.BatchAcquirer", s)
		}
		ctx := b.Context()
		prefix := testutil.UniqueName(b)
		holder := testutil.Holder(b, "bench")
		ps := make([]store.AcquireParams, benchAcquireBatch)
		ops := 0
		for b.Loop() {
			for i := range ps {
				ps[i] = store.AcquireParams{Name: fmt.Sprintf("%s_%d_%04d", prefix, ops, i), Holder: holder, TTL: benchTTL}
			}
			rs, err := ba.AcquireBatch(ctx, ps)
			if err != nil || len(rs) != len(ps) {
				b.Fatalf("acquire batch of %d: %d results, error %v", len(ps), len(rs), err)
			}
			for i, r := range rs {
				if r.Err != nil {
					b.Fatalf("acquire batch: lease %q: %v", ps[i].Name, r.Err)
				}
			}
			ops++
		}
		if ops > 0 {
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(ops*benchAcquireBatch), "ns/lease")
		}
	})

	b.Run(fmt.Sprintf("RenewBatch%d", benchBatch), func(b *testing.B) {
		s := h.NewStore(b)
		ctx := b.Context()
		prefix := testutil.UniqueName(b)
		holder := testutil.Holder(b, "bench")
		ps := make([]store.RenewParams, benchBatch)
		for i := range ps {
			g, err := s.Acquire(ctx, store.AcquireParams{Name: fmt.Sprintf("%s_%05d", prefix, i), Holder: holder, TTL: benchTTL})
			if err != nil {
				b.Fatalf("acquire lease %d of %d: %v", i, benchBatch, err)
			}
			ps[i] = store.RenewParams{Name: g.Name, Holder: g.Holder, Token: g.Token, Seq: g.Seq, TTL: benchTTL}
		}
		ops := 0
		for b.Loop() {
			rs, err := s.Renew(ctx, ps)
			if err != nil || len(rs) != len(ps) {
				b.Fatalf("renew batch of %d: %d results, error %v", len(ps), len(rs), err)
			}
			for i, res := range rs {
				if !res.Renewed {
					b.Fatalf("renew batch: lease %q not renewed: %+v", ps[i].Name, res.Grant)
				}
				ps[i].Seq = res.Grant.Seq
			}
			ops++
		}
		b.ReportMetric(1, "round-trips/op")
		b.ReportMetric(benchBatch, "leases/op")
		if ops > 0 {
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(ops*benchBatch), "ns/lease")
		}
	})
}

// measureRoundTrip returns the median duration of the store's own round trip.
func measureRoundTrip(b *testing.B, rt func(ctx context.Context) error) time.Duration {
	b.Helper()
	ctx := b.Context()
	samples := make([]time.Duration, roundTripSamples)
	for i := -10; i < len(samples); i++ {
		start := time.Now()
		if err := rt(ctx); err != nil {
			b.Fatalf("storetest: the store's round trip failed: %v", err)
		}
		if i >= 0 {
			samples[i] = time.Since(start)
		}
	}
	slices.Sort(samples)
	return samples[len(samples)/2]
}

// reportRatio reports the mean operation time as a multiple of the store's
// round trip.
func reportRatio(b *testing.B, roundTrip time.Duration, ops int) {
	if roundTrip <= 0 || ops == 0 {
		return
	}
	perOp := float64(b.Elapsed().Nanoseconds()) / float64(ops)
	b.ReportMetric(perOp/float64(roundTrip.Nanoseconds()), "x-roundtrip")
}
