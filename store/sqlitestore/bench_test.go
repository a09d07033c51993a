package sqlitestore_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure"
	"github.com/tenure-dev/tenure/internal/testserver/sqliteserver"
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
			first := refusals{Store: sqliteserver.SQLiteStore(b, path, cfg), held: make(chan struct{}, 1)}
			second := first
			if !tc.same {
				second = refusals{Store: sqliteserver.SQLiteStore(b, path, cfg), held: make(chan struct{}, 1)}
			}
			clients := []*tenure.Client{runClient(b, first, "a"), runClient(b, second, "b")}
			held := []chan struct{}{first.held, second.held}
			lease, err := clients[0].Acquire(b.Context(), "handover")
			require.NoError(b, err)
			var samples []time.Duration
			for i := 0; b.Loop(); i++ {
				won := campaignInLine(b, clients[(i+1)%2], held[(i+1)%2])
				// A release at a random moment of the poll cycle, rather
				// than one locked to the poll that ended the last handover.
				time.Sleep(rand.N(50 * time.Millisecond))
				start := time.Now()
				require.NoError(b, lease.Release(b.Context()))
				lease = <-won
				samples = append(samples, time.Since(start))
				require.NotNil(b, lease)
			}
			reportPercentiles(b, samples)
		})
	}
}

// campaignInLine starts a campaign of c for the lease "handover" and
// returns once the store has refused it, asking to wait, and so put it in
// line; held is where the store reports refusals. The lease arrives on
// the channel, nil when the campaign failed.
func campaignInLine(b *testing.B, c *tenure.Client, held chan struct{}) <-chan *tenure.Lease {
	b.Helper()
	select {
	case <-held: // a refusal of an earlier campaign
	default:
	}
	won := make(chan *tenure.Lease, 1)
	ctx, cancel := context.WithTimeout(b.Context(), 30*time.Second)
	var wg sync.WaitGroup
	b.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	wg.Go(func() {
		l, err := c.Campaign(ctx, "handover")
		if err != nil {
			b.Errorf("campaign: %v", err)
		}
		won <- l
	})
	select {
	case <-held:
	case <-ctx.Done():
		b.Fatal("the follower's campaign never asked for the lease")
	}
	return won
}

// reportPercentiles reports the median and the 90th percentile of
// samples, in milliseconds.
func reportPercentiles(b *testing.B, samples []time.Duration) {
	slices.Sort(samples)
	b.ReportMetric(float64(samples[len(samples)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(samples[len(samples)*9/10].Microseconds())/1000, "p90-ms")
}

// BenchmarkHandoverAcrossProcesses measures a clean handover from a
// client in another process (this test binary run again, see
// handoverChild) to a client of this one, on one file, at the default poll
// interval: from the wall clock time just before the other process's
// release call to this client holding the lease. Each release comes at a
// random moment up to 50 ms after this client got in line.
func BenchmarkHandoverAcrossProcesses(b *testing.B) {
	path := filepath.Join(b.TempDir(), "tenure.db")
	follower := refusals{Store: sqliteserver.SQLiteStore(b, path, sqlitestore.Config{}), held: make(chan struct{}, 1)}
	client := runClient(b, follower, "parent")

	// Not bound to b.Context, which ends before the cleanup below closes
	// the child's input; the child gives up by itself after 40 s.
	cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.bench=^$")
	cmd.Env = append(os.Environ(), childRole+"=handover", childPath+"="+path)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	toChild, err := cmd.StdinPipe()
	require.NoError(b, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(b, err)
	require.NoError(b, cmd.Start())
	b.Cleanup(func() {
		_ = toChild.Close() // The child ends at the end of its input.
		require.NoError(b, cmd.Wait(), "the child failed:\n%s", stderr.String())
	})
	fromChild := bufio.NewScanner(stdout)
	ask := func(command string) string {
		b.Helper()
		_, err := fmt.Fprintln(toChild, command)
		require.NoError(b, err)
		require.True(b, fromChild.Scan(), "the child did not answer %q:\n%s", command, stderr.String())
		return fromChild.Text()
	}

	var samples []time.Duration
	for b.Loop() {
		require.Equal(b, "held", ask("take"))
		won := campaignInLine(b, client, follower.held)
		time.Sleep(rand.N(50 * time.Millisecond))
		released, err := strconv.ParseInt(ask("release"), 10, 64)
		require.NoError(b, err)
		lease := <-won
		samples = append(samples, time.Since(time.Unix(0, released)))
		require.NotNil(b, lease)
		require.NoError(b, lease.Release(b.Context()))
	}
	reportPercentiles(b, samples)
}
