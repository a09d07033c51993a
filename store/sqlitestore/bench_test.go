package sqlitestore_test

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure"
	"github.com/tenure-dev/tenure/store/sqlitestore"
)

// BenchmarkHandover measures a clean handover between two clients on one
// file: from the holder's release call to the follower, campaigning and
// in line, holding the lease. SameStore shares one Store (the release
// reaches the follower as its commit ends); OtherStore gives each client
// its own Store, as two processes would have, so the follower hears of
// the release by polling, at each poll interval. Each release comes at a
// random moment up to 50 ms (a whole number of every poll interval
// measured) after the follower got in line.
func BenchmarkHandover(b *testing.B) {
	for _, tc := range []struct {
		name string
		poll time.Duration
		same bool
	}{
		{"SameStore", 0, true},
		{"OtherStore/Poll25ms", 25 * time.Millisecond, false},
		{"OtherStore/Poll10ms", 10 * time.Millisecond, false},
		{"OtherStore/Poll5ms", 5 * time.Millisecond, false},
		{"OtherStore/PollDefault", 0, false},
	} {
		b.Run(tc.name, func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "tenure.db")
			cfg := sqlitestore.Config{PollInterval: tc.poll}
			first := refusals{Store: openStore(b, path, cfg), held: make(chan struct{}, 1)}
			second := first
			if !tc.same {
				second = refusals{Store: openStore(b, path, cfg), held: make(chan struct{}, 1)}
			}
			clients := []*tenure.Client{runClient(b, first, "a"), runClient(b, second, "b")}
			held := []chan struct{}{first.held, second.held}
			lease, err := clients[0].Acquire(b.Context(), "handover")
			require.NoError(b, err)
			var samples []time.Duration
			for i := 0; b.Loop(); i++ {
				next := clients[(i+1)%2]
				won := make(chan *tenure.Lease, 1)
				ctx, cancel := context.WithTimeout(b.Context(), 30*time.Second)
				var wg sync.WaitGroup
				wg.Go(func() {
					l, err := next.Campaign(ctx, "handover")
					if err != nil {
						b.Errorf("campaign: %v", err)
					}
					won <- l
				})
				select {
				case <-held[(i+1)%2]: // refused, and so in line
				case <-ctx.Done():
					b.Fatal("the follower's campaign never asked for the lease")
				}
				// A release at a random moment of the poll cycle, rather
				// than one locked to the poll that ended the last handover.
				time.Sleep(rand.N(50 * time.Millisecond))
				start := time.Now()
				require.NoError(b, lease.Release(b.Context()))
				lease = <-won
				samples = append(samples, time.Since(start))
				wg.Wait()
				cancel()
				require.NotNil(b, lease)
			}
			slices.Sort(samples)
			b.ReportMetric(float64(samples[len(samples)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(samples[len(samples)*9/10].Microseconds())/1000, "p90-ms")
		})
	}
}
