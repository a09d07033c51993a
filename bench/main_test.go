package main

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/testserver/consulserver"
	"github.com/tenure-dev/tenure/internal/testserver/etcdserver"
	"github.com/tenure-dev/tenure/internal/testserver/redisserver"
	"github.com/tenure-dev/tenure/internal/testutil"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

// TestQuickRunWritesWellFormedOutputs runs the program end to end in quick
// mode against the real servers and checks what it writes: a table row per
// subject, JSON that parses into a report with every phase measured, and
// an SVG that parses as XML with a dot per trial.
func TestQuickRunWritesWellFormedOutputs(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	pgURL := testutil.PostgresURL()
	conn, err := pgx.Connect(ctx, pgURL)
	if err == nil {
		err = conn.Ping(ctx)
		conn.Close(ctx)
	}
	testutil.NeedServer(t, "PostgreSQL at "+pgURL, err)
	ru, err := url.Parse(redisserver.RedisURL())
	require.NoError(t, err)
	rdb := redis.NewClient(&redis.Options{Addr: ru.Host})
	err = rdb.Ping(ctx).Err()
	rdb.Close()
	testutil.NeedServer(t, "Redis at "+ru.Host, err)
	_, err = etcdserver.EtcdBinary()
	testutil.NeedServer(t, "etcd (build it with tools/servers/ensure.sh etcd and set TENURE_ETCD_BIN)", err)
	_, err = consulserver.ConsulBinary()
	testutil.NeedServer(t, "Consul (build it with tools/consul/ensure.sh and set TENURE_CONSUL_BIN)", err)

	dir := t.TempDir()
	var log bytes.Buffer
	err = run(ctx, []string{"-quick", "-out", dir, "-pg", pgURL, "-redis", ru.Host, "-churn-clients", "2", "-many", "5"}, &log)
	require.NoError(t, err, log.String())

	md, err := os.ReadFile(filepath.Join(dir, mdName))
	require.NoError(t, err)
	for _, s := range []string{"## Floors", "## Latency", "## Slots", "## Idle load and churn", "## Scale", "## Token", "](" + svgName + ")"} {
		require.Contains(t, string(md), s)
	}
	rows := []string{"| tenure | postgres |", "| pglock | postgres |", "| tenure | redis |", "| redsync | redis |", "| redislock | redis |",
		"| tenure | etcd |", "| etcd-mutex | etcd |", "| etcd-election | etcd |", "| tenure | consul |", "| consul-lock | consul |",
		"| tenure | sqlite |"}
	for _, row := range rows {
		// Once in the latency table, once in the load and churn table,
		// and tenure's once more in the slots table.
		want := 2
		if strings.HasPrefix(row, "| tenure |") {
			want = 3
		}
		require.Equal(t, want, strings.Count(string(md), row), "rows %q in\n%s", row, md)
	}
	for _, st := range []string{"postgres", "redis", "etcd", "consul", "sqlite"} {
		require.Contains(t, string(md), "| "+st+" | ", "floor row of %s", st)
	}

	js, err := os.ReadFile(filepath.Join(dir, jsonName))
	require.NoError(t, err)
	var rep report
	require.NoError(t, json.Unmarshal(js, &rep))
	require.True(t, rep.Quick)
	require.Len(t, rep.Subjects, len(rows))
	dots := 0
	for _, s := range rep.Subjects {
		r := s.Result
		require.NotNil(t, r.Acquire, s.id())
		if s.Name == "tenure" {
			require.NotNil(t, r.StoreAcquire, "%s: %v", s.id(), r.Errors)
			require.NotNil(t, r.SlotAcquire, "%s: %v", s.id(), r.Errors)
		}
		require.NotNil(t, r.Renew, s.id())
		require.NotNil(t, r.Handover, "%s: %v", s.id(), r.Errors)
		require.NotNil(t, r.Failover, "%s: %v", s.id(), r.Errors)
		require.Len(t, r.Load, 2, "%s: %v", s.id(), r.Errors)
		require.Len(t, r.Churn, 1, s.id())
		require.Positive(t, r.Churn[0].Acquisitions, s.id())
		dots += r.Handover.N + r.Failover.N
	}
	for _, st := range []string{"postgres", "redis", "etcd", "consul", "sqlite"} {
		require.Positive(t, rep.floor(st, "write paced"), st)
	}
	require.Len(t, rep.Scale, 2)
	for i, clients := range []int{1, 4} {
		sc := rep.Scale[i]
		require.Equal(t, clients, sc.Clients)
		require.Equal(t, sc.Leases, sc.Acquired, "%v", sc.Errors)
		require.NotNil(t, sc.RenewRound, "%v", sc.Errors)
		require.Empty(t, sc.Errors)
		require.Positive(t, sc.ClientCores)
	}
	require.NotNil(t, rep.Token, "%v", rep.Notes)
	require.Positive(t, rep.Token.TokenNs)
	require.Positive(t, rep.Token.NowNs)

	f, err := os.Open(filepath.Join(dir, svgName))
	require.NoError(t, err)
	defer f.Close()
	circles, root := 0, ""
	for dec := xml.NewDecoder(f); ; {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		if se, ok := tok.(xml.StartElement); ok {
			if root == "" {
				root = se.Name.Local
			}
			if se.Name.Local == "circle" {
				circles++
			}
		}
	}
	require.Equal(t, "svg", root)
	require.Equal(t, dots, circles)
}

func TestParseFlagsRefusesBadInput(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"UnknownStore", []string{"-stores", "postgres,mysql"}, "unknown store"},
		{"UnknownPhase", []string{"-phases", "floor,warp"}, "unknown phase"},
		{"FractionalTTL", []string{"-ttls", "2500ms"}, "whole number of seconds"},
		{"NoProfile", []string{"-ttls", ","}, "at least one profile"},
		{"ZeroIterations", []string{"-acquire-n", "0"}, "-acquire-n must be at least 1"},
		{"BadChurnClients", []string{"-churn-clients", "2,x"}, "not a positive number"},
		{"MoreClientsThanLeases", []string{"-scale-n", "10", "-scale-clients", "11"}, "every client must hold a lease"},
		{"NegativeRecords", []string{"-consul-records", "-1"}, "-consul-records may not be negative"},
		{"NoScaleClients", []string{"-scale-clients", "1,0"}, "-scale-clients: \"0\" is not a positive number"},
		{"TLSPostgres", []string{"-pg", "postgres://postgres@127.0.0.1/test"}, "sslmode=disable"},
		{"StrayArgument", []string{"postgres"}, "unexpected arguments"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := parseFlags(tc.args, io.Discard)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestParseFlagsQuickKeepsExplicitFlags(t *testing.T) {
	t.Parallel()
	o, err := parseFlags([]string{"-quick", "-acquire-n", "7"}, io.Discard)
	require.NoError(t, err)
	require.Equal(t, 7, o.acquireN)
	require.Equal(t, 20, o.renewN)
	require.Equal(t, []profile{{name: "3s", ttl: 3 * time.Second}}, o.profiles)
}

func TestRenewRoundsGroupsCallsByInterval(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1000, 0)
	at := func(start, end time.Duration) renewCall { return renewCall{t0.Add(start), t0.Add(end)} }
	calls := []renewCall{
		at(0, 10*time.Millisecond), at(5*time.Millisecond, 30*time.Millisecond), // one round of two batches
		at(time.Second, time.Second+20*time.Millisecond),
		at(time.Second+400*time.Millisecond, time.Second+410*time.Millisecond), // the rest, due later: a round of its own
	}
	require.Equal(t, []time.Duration{30 * time.Millisecond, 20 * time.Millisecond, 10 * time.Millisecond}, renewRounds(calls, time.Second))
	require.Empty(t, renewRounds(nil, time.Second))
}
