//go:build unix

package sqlitestore_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/testserver/sqliteserver"
	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/sqlitestore"
)

// BenchmarkListenIdle measures what polling costs: the CPU time of this
// process per idle listener and second of wall time, with listeners of
// their own Stores on one file that nobody writes, each op one second: one
// listener alone (a process with one client) and 20 at once (whose timers
// the runtime wakes together). The process's CPU time while idle without
// listeners, measured first for one second, is not counted.
func BenchmarkListenIdle(b *testing.B) {
	for _, listeners := range []int{1, 20} {
		for _, poll := range []time.Duration{25 * time.Millisecond, 10 * time.Millisecond, 5 * time.Millisecond} {
			b.Run(fmt.Sprintf("Listeners%d/%s", listeners, poll), func(b *testing.B) {
				benchmarkListenIdle(b, listeners, poll)
			})
		}
	}
}

func benchmarkListenIdle(b *testing.B, listeners int, poll time.Duration) {
	// What the process spends idle without listeners (the runtime's own
	// timers, the test framework) is measured first and not counted.
	before, start := cpuTime(b), time.Now()
	time.Sleep(time.Second) // the idle time being measured
	idle := float64(cpuTime(b)-before) / float64(time.Since(start))
	path := filepath.Join(b.TempDir(), "tenure.db")
	ctx, cancel := context.WithCancel(b.Context())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	subscribed := make(chan struct{}, listeners)
	for range listeners {
		st := sqliteserver.SQLiteStore(b, path, sqlitestore.Config{PollInterval: poll})
		wg.Go(func() {
			_ = st.Listen(ctx, func(n store.Notice) { // Returns ctx's error when the benchmark ends.
				if n.Name == "" {
					subscribed <- struct{}{}
				}
			})
		})
	}
	for range listeners {
		<-subscribed
	}
	before, start = cpuTime(b), time.Now()
	for b.Loop() {
		time.Sleep(time.Second) // the idle time being measured
	}
	busy := float64(cpuTime(b)-before) / float64(time.Since(start))
	b.ReportMetric(100*(busy-idle)/float64(listeners), "cpu-%/listener")
}

// cpuTime returns the user and system CPU time this process has used.
func cpuTime(tb testing.TB) time.Duration {
	tb.Helper()
	var ru syscall.Rusage
	require.NoError(tb, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
