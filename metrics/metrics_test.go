package metrics_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-dev/tenure"
	"github.com/tenure-dev/tenure/internal/testserver"
	"github.com/tenure-dev/tenure/internal/testserver/consulserver"
	"github.com/tenure-dev/tenure/internal/testserver/etcdserver"
	"github.com/tenure-dev/tenure/internal/testserver/mysqlserver"
	"github.com/tenure-dev/tenure/internal/testserver/natsserver"
	"github.com/tenure-dev/tenure/internal/testserver/pgserver"
	"github.com/tenure-dev/tenure/internal/testserver/redisserver"
	tu "github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/metrics"
	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/etcdstore"
	"github.com/tenure-dev/tenure/store/memstore"
	"github.com/tenure-dev/tenure/store/sqlitestore"
)

func TestMain(m *testing.M) {
	testserver.Main(m, etcdserver.Shared, consulserver.Shared, natsserver.Shared)
}

// waitTimeout bounds every wait for an event of a client on a real store.
const waitTimeout = 15 * time.Second

// tee hands every event to the metrics Observer and lets the test wait
// for an event of a kind, so the test reads the registry only once the
// metric must have moved.
type tee struct {
	m    *metrics.Observer
	mu   sync.Mutex
	seen map[tenure.EventKind]int
	wake chan struct{}
}

func newTee(m *metrics.Observer) *tee {
	return &tee{m: m, seen: make(map[tenure.EventKind]int), wake: make(chan struct{}, 1)}
}

func (t *tee) Handle(e tenure.Event) {
	t.m.Handle(e)
	t.mu.Lock()
	t.seen[e.Kind]++
	t.mu.Unlock()
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

func (t *tee) count(k tenure.EventKind) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.seen[k]
}

// wait waits until n events of kind k were handled.
func (t *tee) wait(tb testing.TB, k tenure.EventKind, n int) {
	tb.Helper()
	timer := time.NewTimer(waitTimeout)
	defer timer.Stop()
	for t.count(k) < n {
		select {
		case <-t.wake:
		case <-timer.C:
			tb.Fatalf("no %d %q events within %s (saw %d)", n, k, waitTimeout, t.count(k))
		}
	}
}

// instrumented is one client reporting to a registry of its own.
type instrumented struct {
	reg    *prometheus.Registry
	tee    *tee
	client *tenure.Client
	stop   func()
}

func start(t *testing.T, st store.Store, label string, ttl time.Duration) *instrumented {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := metrics.New(metrics.Config{Registerer: reg})
	require.NoError(t, err)
	tee := newTee(m)
	c, err := tenure.New(st, tenure.Config{Label: label, TTL: ttl, Observer: tee})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- c.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			require.NoError(t, tu.Receive(t, ran, "return of Run", waitTimeout))
		})
	}
	t.Cleanup(stop)
	return &instrumented{reg: reg, tee: tee, client: c, stop: stop}
}

// value returns the value of the metric name whose labels include want
// (label, value pairs): a gauge's or counter's value, a histogram's
// sample count; 0 when no such series exists.
func value(t *testing.T, reg prometheus.Gatherer, name string, want ...string) float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if !hasLabels(m, want) {
				continue
			}
			switch {
			case m.Gauge != nil:
				return m.GetGauge().GetValue()
			case m.Counter != nil:
				return m.GetCounter().GetValue()
			case m.Histogram != nil:
				return float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return 0
}

func hasLabels(m *dto.Metric, want []string) bool {
	have := map[string]string{}
	for _, l := range m.GetLabel() {
		have[l.GetName()] = l.GetValue()
	}
	for i := 0; i+1 < len(want); i += 2 {
		if have[want[i]] != want[i+1] {
			return false
		}
	}
	return true
}

// backend is a store the metrics are tested on.
type backend struct {
	name   string // the store label
	notify bool   // it implements store.Notifier
	open   func(t *testing.T) store.Store
}

func backends() []backend {
	return []backend{
		{name: "memstore", notify: true, open: func(t *testing.T) store.Store {
			s := memstore.New(memstore.Config{})
			t.Cleanup(func() { _ = s.Close() })
			return s
		}},
		{name: "sqlitestore", notify: true, open: func(t *testing.T) store.Store {
			s, err := sqlitestore.Open(t.Context(), filepath.Join(t.TempDir(), "leases.db"), sqlitestore.Config{})
			require.NoError(t, err)
			t.Cleanup(func() { _ = s.Close() })
			return s
		}},
		{name: "pgstore", notify: true, open: func(t *testing.T) store.Store {
			return pgserver.PostgresHarness{Owner: pgserver.PostgresPool(t, pgx.QueryExecModeCacheStatement, "")}.NewStore(t)
		}},
		{name: "redisstore", notify: true, open: func(t *testing.T) store.Store {
			return redisserver.RedisHarness{Client: redisserver.RedisClient(t)}.NewStore(t)
		}},
		{name: "etcdstore", notify: true, open: func(t *testing.T) store.Store {
			cli := etcdserver.SharedEtcd(t).Client(t)
			prefix := "tenure-test/" + tu.UniqueName(t) + "/"
			s, err := etcdstore.New(cli, etcdstore.Config{KeyPrefix: prefix})
			require.NoError(t, err)
			t.Cleanup(func() {
				require.NoError(t, s.Close())
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_, err := cli.Delete(ctx, prefix, clientv3.WithPrefix())
				require.NoError(t, err, "delete the keys under %q", prefix)
			})
			return s
		}},
		{name: "consulstore", notify: true, open: func(t *testing.T) store.Store {
			return consulserver.ConsulHarness{Agent: consulserver.SharedConsul(t)}.NewStore(t)
		}},
		{name: "mysqlstore", notify: false, open: func(t *testing.T) store.Store {
			return mysqlserver.MySQLHarness{Owner: mysqlserver.MySQLDB(t, "")}.NewStore(t)
		}},
		{name: "natsstore", notify: true, open: func(t *testing.T) store.Store {
			return natsserver.NatsHarness{Server: natsserver.SharedNats(t)}.NewStore(t)
		}},
	}
}

// TestMetricsMoveOnEveryStore drives real clients through a handover on
// each store and reads what the registries say: the same names and labels
// everywhere.
func TestMetricsMoveOnEveryStore(t *testing.T) {
	t.Parallel()
	const ttl = 3 * time.Second
	for _, be := range backends() {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			st := be.open(t)
			lease := "billing"
			leader := start(t, st, "leader", ttl)
			follower := start(t, st, "follower", ttl)
			if be.notify {
				follower.tee.wait(t, tenure.EventSubscribed, 1)
			}
			at := []string{"store", be.name, "lease", lease}

			l, err := leader.client.Acquire(t.Context(), lease)
			require.NoError(t, err)
			require.Equal(t, 1.0, value(t, leader.reg, "tenure_lease_held", at...))
			require.Equal(t, float64(l.Token()), value(t, leader.reg, "tenure_lease_token", at...))
			require.Equal(t, 1.0, value(t, leader.reg, "tenure_acquisitions_total", at...))

			leader.tee.wait(t, tenure.EventRenewed, 1)
			require.GreaterOrEqual(t, value(t, leader.reg, "tenure_renew_duration_seconds", "store", be.name), 1.0)
			require.Zero(t, value(t, leader.reg, "tenure_renew_errors_total", "store", be.name))

			campaign := make(chan *tenure.Lease, 1)
			go func() {
				fl, err := follower.client.Campaign(t.Context(), lease)
				if err != nil {
					t.Errorf("campaign: %v", err)
				}
				campaign <- fl
			}()
			tok := l.Token()
			require.NoError(t, l.Release(t.Context()))
			require.Zero(t, value(t, leader.reg, "tenure_lease_held", at...))
			require.Zero(t, value(t, leader.reg, "tenure_lease_token", at...))
			require.Equal(t, 1.0, value(t, leader.reg, "tenure_losses_total", append(at, "reason", "released")...))

			fl := tu.Receive(t, campaign, "the follower's grant", waitTimeout)
			require.NotNil(t, fl)
			require.Equal(t, 1.0, value(t, follower.reg, "tenure_lease_held", at...))
			require.Equal(t, float64(fl.Token()), value(t, follower.reg, "tenure_lease_token", at...))
			require.Greater(t, fl.Token(), tok)
			require.Equal(t, 1.0, value(t, follower.reg, "tenure_campaign_wait_seconds", at...))
			if be.notify {
				follower.tee.wait(t, tenure.EventNotified, 1)
				require.GreaterOrEqual(t, value(t, follower.reg, "tenure_notifications_total", "store", be.name), 1.0)
				require.GreaterOrEqual(t, value(t, follower.reg, "tenure_notification_subscriptions_total", "store", be.name), 1.0)
			}

			follower.stop()
			require.Zero(t, value(t, follower.reg, "tenure_lease_held", at...))
			require.Equal(t, 1.0, value(t, follower.reg, "tenure_losses_total", append(at, "reason", "closed")...))

			problems, err := testutil.GatherAndLint(leader.reg)
			require.NoError(t, err)
			require.Empty(t, problems, "metric names and help follow Prometheus conventions")
		})
	}
}
