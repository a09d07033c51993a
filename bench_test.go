package tenure_test

import (
	"context"
	"testing"

	"github.com/tenure-dev/tenure"
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
