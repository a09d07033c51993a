package consulstoretest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/store"

	"github.com/hashicorp/consul/api"
	"go.uber.org/goleak"

	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store/consulstore"
	"github.com/tenure-dev/tenure/store/storetest"
)

// ExpiryLag is how much longer than the remaining time a store reports a
// lease of the conformance suite may take to expire on an agent started
// here: Consul invalidates a session up to twice its TTL after its last
// renewal, and the suite's expiring leases last at most one second; one
// more second covers the invalidation's Raft write on a loaded machine.
const ExpiryLag = 2 * time.Second

// shared is the package's agent, set by Main before the tests run.
var shared struct {
	started bool
	agent   *Agent
	err     error
}

// Main runs a test package whose tests use [Shared]: it starts the agent,
// runs the tests, stops the agent, fails the run if goroutines leaked
// (goleak, as testutil.VerifyTestMain does) and exits. Call it from
// TestMain. When the agent cannot start, the tests still run and [Shared]
// skips or fails them.
func Main(m *testing.M) {
	goleak.VerifyTestMain(agentMain{m})
}

type agentMain struct{ m *testing.M }

// Run starts the shared agent around the tests, so it is stopped before
// goleak looks for leaks.
func (a agentMain) Run() int {
	shared.agent, shared.err = StartAgent()
	shared.started = true
	if shared.agent != nil {
		defer func() { _ = shared.agent.Stop() }()
	}
	return a.m.Run()
}

// Shared returns the agent [Main] started. When it could not start it
// skips tb, or fails it when the environment variable CI is set.
func Shared(tb testing.TB) *Agent {
	tb.Helper()
	if !shared.started {
		tb.Fatal("consulstoretest: Shared needs the package's TestMain to call consulstoretest.Main(m)")
	}
	testutil.NeedServer(tb, "consul agent (set "+BinEnv+" to the path tools/consul/ensure.sh prints)", shared.err)
	return shared.agent
}

// Harness gives the conformance suite stores on one agent, each under a
// key prefix of its own.
type Harness struct {
	// Agent is the agent the stores talk to.
	Agent *Agent
	// Config is the stores' configuration; KeyPrefix is replaced by a
	// unique one per store, and a zero MinSessionTTL becomes
	// [SessionTTLMin], the agent's session_ttl_min.
	Config consulstore.Config
}

// NewStore implements [storetest.Harness]: a store under
// "tenuretest/<unique name>/" with an API client of its own. Its cleanup
// closes it and deletes every key under its prefix; the sessions it
// created expire by themselves.
func (h Harness) NewStore(tb testing.TB) store.Store {
	tb.Helper()
	s, _ := h.New(tb)
	return s
}

// New is [Harness.NewStore] returning the concrete store and its client,
// for backend-specific tests.
func (h Harness) New(tb testing.TB) (*consulstore.Store, *api.Client) {
	tb.Helper()
	client := h.Agent.Client(tb)
	cfg := h.Config
	cfg.KeyPrefix = "tenuretest/" + testutil.UniqueName(tb) + "/"
	if cfg.MinSessionTTL == 0 {
		cfg.MinSessionTTL = SessionTTLMin
	}
	s, err := consulstore.New(client, cfg)
	if err != nil {
		tb.Fatalf("consulstoretest: %v", err)
	}
	tb.Cleanup(func() {
		_ = s.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := client.KV().DeleteTree(cfg.KeyPrefix, (&api.WriteOptions{}).WithContext(ctx)); err != nil {
			tb.Errorf("consulstoretest: deleting the keys under %q: %v", cfg.KeyPrefix, err)
		}
	})
	return s, client
}

// Capabilities implements [storetest.Harness].
func (h Harness) Capabilities() storetest.Capabilities {
	return storetest.Capabilities{Notify: true, ExpiryLag: ExpiryLag, RoundTrip: h.roundTrip}
}

// roundTrip is the store's cheapest call: a consistent read-only
// transaction, as every read the store makes.
func (h Harness) roundTrip(ctx context.Context) error {
	ops := api.TxnOps{{KV: &api.KVTxnOp{Verb: api.KVGetTree, Key: "tenuretest/roundtrip/"}}}
	ok, _, _, err := h.Agent.client.Txn().Txn(ops, (&api.QueryOptions{RequireConsistent: true}).WithContext(ctx))
	if err == nil && !ok {
		err = errors.New("consulstoretest: the read-only transaction failed")
	}
	return err
}
