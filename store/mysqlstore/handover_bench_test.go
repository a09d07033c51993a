package mysqlstore_test

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure"
	"github.com/tenure-dev/tenure/internal/testserver/mysqlserver"
	"github.com/tenure-dev/tenure/store/mysqlstore"
)

// BenchmarkHandover measures a clean handover through two clients in two
// "processes" (pools and stores of their own), from the holder's Release
// to the waiting follower's Campaign returning, with the lease's bells and
// without them (TTL 2 s, so that without them a handover takes what was
// left of the TTL). Before each handover it times the store's write floor
// (a one-row upsert in autocommit on a connection of its own) three times,
// so that the floor is measured under the same load: it reports the p50
// handover (p50-ns) and that p50 as a multiple of the floor's (x-floor).
// Run it with -benchtime=20x -count=6 and compare with benchstat.
func BenchmarkHandover(b *testing.B) {
	for _, bells := range []bool{false, true} {
		b.Run(fmt.Sprintf("bells=%t", bells), func(b *testing.B) { benchHandover(b, bells) })
	}
}

// floorWriter times one-row upserts on a connection of its own.
type floorWriter struct {
	conn *sql.Conn
	v    int
}

func newFloorWriter(b *testing.B) *floorWriter {
	ctx := b.Context()
	conn, err := mysqlserver.MySQLDB(b, "").Conn(ctx)
	require.NoError(b, err)
	b.Cleanup(func() { require.NoError(b, conn.Close()) })
	_, err = conn.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS tenure_bench_floor (k VARBINARY(64) PRIMARY KEY, v BIGINT NOT NULL)")
	require.NoError(b, err)
	return &floorWriter{conn: conn}
}

func (f *floorWriter) write(b *testing.B) time.Duration {
	f.v++
	t0 := time.Now()
	_, err := f.conn.ExecContext(b.Context(), "INSERT INTO tenure_bench_floor (k, v) VALUES ('mysqlstore', ?) ON DUPLICATE KEY UPDATE v = VALUES(v)", f.v)
	require.NoError(b, err)
	return time.Since(t0)
}

func median(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	return ds[len(ds)/2]
}

func benchHandover(b *testing.B, bells bool) {
	cfg := mysqlserver.MySQLConfig(b)
	mysqlserver.MySQLSchema(b, mysqlserver.MySQLDB(b, ""), cfg)
	open := func() *mysqlstore.Store {
		s := newStore(b, mysqlserver.MySQLDB(b, ""), cfg)
		if !bells {
			mysqlstore.WithoutBells(s)
		}
		return s
	}
	floor := newFloorWriter(b)
	leader := runClientTTL(b, open(), "leader", 2*time.Second)
	follower := refusals{Store: open(), held: make(chan struct{}, 1), subscribed: make(chan struct{}, 1)}
	client := runClientTTL(b, follower, "follower", 2*time.Second)
	<-follower.subscribed
	var handovers, floors []time.Duration
	i := 0
	for b.Loop() {
		b.StopTimer()
		i++
		for range 3 {
			floors = append(floors, floor.write(b))
		}
		name := fmt.Sprintf("handover-%d", i)
		l, err := leader.Acquire(b.Context(), name)
		require.NoError(b, err)
		select {
		case <-follower.held:
		default:
		}
		got := make(chan *tenure.Lease, 1)
		ctx, cancel := context.WithTimeout(b.Context(), 10*time.Second)
		go func() {
			next, err := client.Campaign(ctx, name)
			if err != nil {
				b.Errorf("campaign: %v", err)
			}
			got <- next
		}()
		<-follower.held
		b.StartTimer()
		t0 := time.Now()
		require.NoError(b, l.Release(b.Context()))
		next := <-got
		handovers = append(handovers, time.Since(t0))
		b.StopTimer()
		cancel()
		require.NotNil(b, next)
		require.NoError(b, next.Release(b.Context()))
		b.StartTimer()
	}
	p50 := median(handovers)
	b.ReportMetric(float64(p50.Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(p50)/float64(median(floors)), "x-floor")
}
