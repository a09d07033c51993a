package etcdserver

import (
	"context"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/internal/testserver"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/etcdstore"
	"github.com/tenure-dev/tenure/store/storetest"
)

// EtcdExpiryLag is how much later than the remaining time it reported etcd
// may expire a lease: its lessor looks for expired leases every 500 ms,
// then deletes their keys through raft.
const EtcdExpiryLag = time.Second

// EtcdHarness gives the conformance suite etcdstore stores on one server,
// each under a key prefix of its own with a client of its own.
type EtcdHarness struct {
	// Server is the server the stores talk to.
	Server *Etcd
	// Probe is a client of Server for the benchmark's round trip
	// ([Etcd.Client]); nil leaves the round trip unmeasured.
	Probe *clientv3.Client
}

// NewStore implements [storetest.Harness].
func (h EtcdHarness) NewStore(tb testing.TB) store.Store {
	tb.Helper()
	return EtcdStore(tb, h.Server.Client(tb), etcdstore.Config{})
}

// Capabilities implements [storetest.Harness]: etcd notifies and keeps a
// line of followers without holding a released lease for the first.
func (h EtcdHarness) Capabilities() storetest.Capabilities {
	caps := storetest.Capabilities{
		Notify:    true,
		Line:      true,
		NoHandoff: true,
		// etcd has no clock a transaction can read: no window derived from a period.
		NoDerivedWindow: true,
		ExpiryLag:       EtcdExpiryLag,
		Faults:          storetest.Faults{NewStore: etcdFaultyStore},
	}
	if h.Probe != nil {
		caps.RoundTrip = func(ctx context.Context) error {
			_, err := h.Probe.Get(ctx, "tenure-test/round-trip")
			return err
		}
	}
	return caps
}

// etcdFaultyStore returns a store on a server of its own, through a proxy.
func etcdFaultyStore(tb testing.TB) (store.Store, storetest.Fault) {
	tb.Helper()
	srv := OwnEtcd(tb)
	p := testserver.Proxy(tb, srv.Addr())
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{p.Addr()}, DialTimeout: 30 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		tb.Fatalf("testserver: etcd client for %s: %v", p.Addr(), err)
	}
	tb.Cleanup(func() { _ = cli.Close() })
	s := EtcdStore(tb, cli, etcdstore.Config{})
	return s, testserver.CutFault(p, srv, s)
}

// EtcdStore returns a store on cli under a key prefix of its own (unless
// cfg sets one), and closes it and deletes its keys when tb ends.
func EtcdStore(tb testing.TB, cli *clientv3.Client, cfg etcdstore.Config) *etcdstore.Store {
	tb.Helper()
	if cfg.KeyPrefix == "" {
		cfg.KeyPrefix = "tenure-test/" + testutil.UniqueName(tb) + "/"
	}
	s, err := etcdstore.New(cli, cfg)
	if err != nil {
		tb.Fatalf("testserver: %v", err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("testserver: close: %v", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), testserver.CleanupTimeout)
		defer cancel()
		if _, err := cli.Delete(ctx, cfg.KeyPrefix, clientv3.WithPrefix()); err != nil {
			tb.Errorf("testserver: delete the keys under %q: %v", cfg.KeyPrefix, err)
		}
	})
	return s
}
