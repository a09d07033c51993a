package tenure_test

import (
	"context"
	"testing"
	"time"

	"github.com/tenure-dev/tenure"
	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/memstore"
)

// BenchmarkToken measures the hot path every fenced write takes: an atomic
// load, two clock reads and the trust-window check. It must not allocate.
func BenchmarkToken(b *testing.B) {
	st := memstore.New(memstore.Config{})
	defer st.Close()
	c, err := tenure.New(st, tenure.Config{})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(b.Context())
	ran := make(chan error, 1)
	go func() { ran <- c.Run(ctx) }()
	defer func() { cancel(); <-ran }()
	l, err := c.Acquire(ctx, "bench")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if l.Token() == 0 {
			b.Fatal("lost the lease during the benchmark")
		}
	}
}

// BenchmarkTimeNow is the floor BenchmarkToken is held to: one reading of
// the clock, which Token cannot skip (a paused process must see the time
// that passed before it trusts its token). Compare the two with benchstat.
func BenchmarkTimeNow(b *testing.B) {
	var last time.Time
	for b.Loop() {
		last = time.Now()
	}
	if last.IsZero() {
		b.Fatal("no clock reading")
	}
}

// BenchmarkAcquireRelease measures a client's acquire and release of a free
// lease on memstore, and reports the client's overhead over the same two
// store calls made bare, interleaved with them: the cost of the caller's
// path through the lease loop, without a network to hide it. ns/op counts
// both.
func BenchmarkAcquireRelease(b *testing.B) {
	st := memstore.New(memstore.Config{})
	defer st.Close()
	ctx := b.Context()
	holder := store.Holder{Label: "bench", Instance: "bare"}
	c, err := tenure.New(st, tenure.Config{})
	if err != nil {
		b.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- c.Run(rctx) }()
	defer func() { cancel(); <-ran }()
	b.ReportAllocs()
	var bare, client time.Duration
	for b.Loop() {
		t0 := time.Now()
		g, err := st.Acquire(ctx, store.AcquireParams{Name: "bare", Holder: holder, TTL: tenure.DefaultTTL})
		if err != nil {
			b.Fatal(err)
		}
		if err := st.Release(ctx, store.ReleaseParams{Name: "bare", Holder: holder, Token: g.Token}); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		l, err := c.Acquire(ctx, "bench")
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			b.Fatal(err)
		}
		client += time.Since(t1)
		bare += t1.Sub(t0)
	}
	b.ReportMetric(float64(client-bare)/float64(b.N), "overhead-ns/op")
}
