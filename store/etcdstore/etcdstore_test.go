package etcdstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/store"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/internal/testserver"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store/etcdstore"
	"github.com/tenure-dev/tenure/store/storetest"
)

func TestMain(m *testing.M) { testserver.Main(m, testserver.Servers{Etcd: true}) }

// expiryLag is how much later than the remaining time it reported etcd may
// expire a lease: its lessor looks for expired leases every 500 ms, then
// deletes their keys through raft.
const expiryLag = time.Second

// harness gives the conformance suite stores under fresh key prefixes of
// the shared server, each with a client of its own.
type harness struct {
	srv  *testserver.Etcd
	base *clientv3.Client // for the round trip benchmarks compare with
}

func newHarness(tb testing.TB) harness {
	srv := testserver.SharedEtcd(tb)
	return harness{srv: srv, base: srv.Client(tb)}
}

func (h harness) NewStore(tb testing.TB) store.Store {
	return newStore(tb, h.srv.Client(tb), etcdstore.Config{})
}

func (h harness) Capabilities() storetest.Capabilities {
	return storetest.Capabilities{
		Notify:    true,
		Line:      true,
		NoHandoff: true,
		ExpiryLag: expiryLag,
		Faults:    storetest.Faults{NewStore: newFaultyStore},
		RoundTrip: func(ctx context.Context) error {
			_, err := h.base.Get(ctx, "tenure-test/round-trip")
			return err
		},
	}
}

// newFaultyStore returns a store on a server of its own, through a proxy.
func newFaultyStore(tb testing.TB) (store.Store, storetest.Fault) {
	srv := testserver.OwnEtcd(tb)
	p := testserver.Proxy(tb, srv.Addr())
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{p.Addr()}, DialTimeout: 30 * time.Second, Logger: zap.NewNop()})
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = cli.Close() })
	s := newStore(tb, cli, etcdstore.Config{})
	return s, testserver.CutFault(p, srv, s)
}

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, newHarness(t))
}

func BenchmarkStore(b *testing.B) { storetest.Benchmark(b, newHarness(b)) }

// newStore returns a store under a key prefix of its own (unless cfg sets
// one), closes it and deletes its keys when tb ends.
func newStore(tb testing.TB, cli *clientv3.Client, cfg etcdstore.Config) *etcdstore.Store {
	tb.Helper()
	if cfg.KeyPrefix == "" {
		cfg.KeyPrefix = "tenure-test/" + testutil.UniqueName(tb) + "/"
	}
	s, err := etcdstore.New(cli, cfg)
	require.NoError(tb, err)
	tb.Cleanup(func() {
		require.NoError(tb, s.Close())
		ctx, cancel := context.WithTimeout(context.WithoutCancel(tb.Context()), 5*time.Second)
		defer cancel()
		_, err := cli.Delete(ctx, cfg.KeyPrefix, clientv3.WithPrefix())
		require.NoError(tb, err, "delete the keys under %q", cfg.KeyPrefix)
	})
	return s
}
