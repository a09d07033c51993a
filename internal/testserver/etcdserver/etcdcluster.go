package etcdserver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/tenure-dev/tenure/internal/testserver"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/internal/testutil"
)

// EtcdCluster is a three-member etcd cluster this process started on
// loopback, bootstrapped statically (each member is told every member's
// peer URL), each member with free ports and a data directory of its own.
// Its members can be paused, killed and restarted one by one
// ([Process.Pause], [Process.Kill], [Process.Restart]).
type EtcdCluster struct {
	// Members are the cluster's members, in a fixed order.
	Members []*Etcd
}

// StartEtcdCluster starts a three-member cluster and returns once every
// member answers as itself, which needs a leader. Stop it with
// [EtcdCluster.Stop].
func StartEtcdCluster(ctx context.Context, cfg EtcdConfig) (*EtcdCluster, error) {
	bin, err := EtcdBinary()
	if err != nil {
		return nil, err
	}
	return testserver.OnFreePorts(ctx, 2*testserver.ClusterSize, func(ports []int) (*EtcdCluster, error) {
		token := "tenure-test-" + testutil.RandomHex(6)
		names := make([]string, testserver.ClusterSize)
		initial := make([]string, testserver.ClusterSize)
		for i := range names {
			names[i] = fmt.Sprintf("%s-%d", token, i+1)
			initial[i] = fmt.Sprintf("%s=http://127.0.0.1:%d", names[i], ports[2*i+1])
		}
		// A member is ready once the cluster has a leader, which needs a
		// quorum of members running: they start side by side.
		c := &EtcdCluster{Members: make([]*Etcd, testserver.ClusterSize)}
		errs := make([]error, testserver.ClusterSize)
		var wg sync.WaitGroup
		for i := range names {
			wg.Go(func() {
				client := fmt.Sprintf("http://127.0.0.1:%d", ports[2*i])
				peer := fmt.Sprintf("http://127.0.0.1:%d", ports[2*i+1])
				c.Members[i], errs[i] = startEtcdMember(ctx, bin, cfg, names[i], client, peer, strings.Join(initial, ","), token)
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return nil, errors.Join(err, c.Stop())
		}
		return c, nil
	})
}

// OwnEtcdCluster starts a cluster for tb alone ([StartEtcdCluster]) and
// stops it when tb ends. When there is no binary, or it does not start, it
// stops tb through [testutil.NeedServer].
func OwnEtcdCluster(tb testing.TB) *EtcdCluster {
	tb.Helper()
	c, err := StartEtcdCluster(tb.Context(), EtcdConfig{})
	testutil.NeedServer(tb, "etcd cluster", err)
	tb.Cleanup(func() {
		if err := c.Stop(); err != nil {
			tb.Errorf("testserver: stop the etcd cluster: %v", err)
		}
	})
	return c
}

// Endpoints are the members' client URLs, in member order.
func (c *EtcdCluster) Endpoints() []string {
	out := make([]string, len(c.Members))
	for i, m := range c.Members {
		out[i] = m.Endpoint
	}
	return out
}

// Addrs are the members' client host:port, in member order.
func (c *EtcdCluster) Addrs() []string {
	out := make([]string, len(c.Members))
	for i, m := range c.Members {
		out[i] = m.Addr()
	}
	return out
}

// Leader returns the index in Members of the member the cluster's
// members agree leads it, asking each running member for its status
// (the maintenance API's Status, which a member answers from its own
// state; a paused or killed member does not answer within [testserver.LeaderProbeTimeout]
// and is left out). It returns an error when no member answers, one that
// answers follows no leader, or they disagree: an election is under way.
func (c *EtcdCluster) Leader(ctx context.Context) (int, error) {
	ids := make([]uint64, len(c.Members))
	followed := make([]uint64, len(c.Members))
	errs := make([]error, len(c.Members))
	var wg sync.WaitGroup
	for i, m := range c.Members {
		wg.Go(func() { ids[i], followed[i], errs[i] = m.status(ctx) })
	}
	wg.Wait()
	leaders := map[uint64]bool{}
	for i := range c.Members {
		if errs[i] == nil {
			leaders[followed[i]] = true
		}
	}
	if len(leaders) != 1 || leaders[0] {
		return -1, fmt.Errorf("testserver: no etcd leader agreed on: %v (%w)", leaders, errors.Join(errs...))
	}
	for i, id := range ids {
		if errs[i] == nil && leaders[id] {
			return i, nil
		}
	}
	return -1, fmt.Errorf("testserver: the etcd leader %v is none of the members that answered (%w)", leaders, errors.Join(errs...))
}

// Healthy returns nil when the cluster can lose any one member and keep
// its quorum: every member answers and follows the same leader.
func (c *EtcdCluster) Healthy(ctx context.Context) error {
	errs := make([]error, len(c.Members))
	followed := make([]uint64, len(c.Members))
	var wg sync.WaitGroup
	for i, m := range c.Members {
		wg.Go(func() { _, followed[i], errs[i] = m.status(ctx) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for _, l := range followed {
		if l == 0 || l != followed[0] {
			return fmt.Errorf("testserver: etcd members follow different leaders: %v", followed)
		}
	}
	return nil
}

// status asks the member for its own id and the leader it follows (0:
// none), within [testserver.LeaderProbeTimeout]: a paused member never answers.
func (e *Etcd) status(ctx context.Context) (id, leader uint64, err error) {
	ctx, cancel := context.WithTimeout(ctx, testserver.LeaderProbeTimeout)
	defer cancel()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{e.Endpoint}, DialTimeout: testserver.LeaderProbeTimeout, Logger: zap.NewNop(), Context: ctx})
	if err != nil {
		return 0, 0, fmt.Errorf("testserver: etcd client for %s: %w", e.Endpoint, err)
	}
	defer func() { _ = cli.Close() }()
	resp, err := cli.Status(ctx, e.Endpoint)
	if err != nil {
		return 0, 0, fmt.Errorf("testserver: status of %s: %w", e.Name, err)
	}
	return resp.Header.MemberId, resp.Leader, nil
}

// Stop kills every member and removes their data. Stopping twice is
// harmless.
func (c *EtcdCluster) Stop() error {
	var errs []error
	for _, m := range c.Members {
		if m != nil {
			errs = append(errs, m.Stop())
		}
	}
	return errors.Join(errs...)
}
