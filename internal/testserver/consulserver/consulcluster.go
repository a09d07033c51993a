package consulserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"

	"github.com/tenure-dev/tenure/internal/testserver"

	"github.com/hashicorp/consul/api"

	"github.com/tenure-dev/tenure/internal/testutil"
)

// ConsulCluster is three Consul server agents this process started on
// loopback (-server -bootstrap-expect 3, each told the others' Serf
// addresses with -retry-join), each with free ports and its Raft log in a
// data directory of its own, so a restarted member keeps every index.
// Its members can be paused, killed and restarted one by one
// ([Process.Pause], [Process.Kill], [Process.Restart]).
type ConsulCluster struct {
	// Members are the cluster's server agents, in a fixed order.
	Members []*Consul
}

// StartConsulCluster starts three server agents and returns once each
// answers as itself, knows a leader and has registered its node.
// Stop it with [ConsulCluster.Stop].
func StartConsulCluster(ctx context.Context) (*ConsulCluster, error) {
	bin, err := ConsulBinary()
	if err != nil {
		return nil, err
	}
	return testserver.OnFreePorts(ctx, 4*testserver.ClusterSize, func(ports []int) (*ConsulCluster, error) {
		prefix := "tenure-test-" + testutil.RandomHex(6)
		// A member is ready once the servers have elected a leader, which
		// needs all three (bootstrap-expect): they start side by side.
		c := &ConsulCluster{Members: make([]*Consul, testserver.ClusterSize)}
		errs := make([]error, testserver.ClusterSize)
		var wg sync.WaitGroup
		for i := range testserver.ClusterSize {
			args := []string{"agent", "-server", "-bootstrap-expect", strconv.Itoa(testserver.ClusterSize),
				"-hcl", "performance { raft_multiplier = 1 }"}
			for j := range testserver.ClusterSize {
				if j != i {
					args = append(args, "-retry-join", net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[4*j+1])))
				}
			}
			wg.Go(func() {
				c.Members[i], errs[i] = startConsulAgent(ctx, bin, fmt.Sprintf("%s-%d", prefix, i+1), ports[4*i:4*i+4], args)
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return nil, errors.Join(err, c.Stop())
		}
		return c, nil
	})
}

// OwnConsulCluster starts a cluster for tb alone ([StartConsulCluster])
// and stops it when tb ends. When there is no binary, or it does not
// start, it stops tb through [testutil.NeedServer].
func OwnConsulCluster(tb testing.TB) *ConsulCluster {
	tb.Helper()
	c, err := StartConsulCluster(tb.Context())
	testutil.NeedServer(tb, "consul cluster", err)
	tb.Cleanup(func() {
		if err := c.Stop(); err != nil {
			tb.Errorf("testserver: stop the consul cluster: %v", err)
		}
	})
	return c
}

// HTTPAddrs are the members' HTTP API host:port, in member order.
func (c *ConsulCluster) HTTPAddrs() []string {
	out := make([]string, len(c.Members))
	for i, m := range c.Members {
		out[i] = m.HTTPAddr
	}
	return out
}

// Leader returns the index in Members of the server the running members
// agree leads the cluster, asking each for /v1/status/leader (answered
// from its own Raft state; a paused or killed member does not answer
// within [testserver.LeaderProbeTimeout] and is left out). It returns an error when no member answers, one that
// answers knows no leader, or they disagree: an election is under way.
func (c *ConsulCluster) Leader(ctx context.Context) (int, error) {
	addrs := make([]string, len(c.Members))
	errs := make([]error, len(c.Members))
	var wg sync.WaitGroup
	for i, m := range c.Members {
		wg.Go(func() {
			lctx, cancel := context.WithTimeout(ctx, testserver.LeaderProbeTimeout)
			defer cancel()
			addrs[i], errs[i] = m.client.Status().LeaderWithQueryOptions((&api.QueryOptions{}).WithContext(lctx))
		})
	}
	wg.Wait()
	leaders := map[string]bool{}
	for i := range c.Members {
		if errs[i] == nil {
			leaders[addrs[i]] = true
		}
	}
	if len(leaders) != 1 || leaders[""] {
		return -1, fmt.Errorf("testserver: no consul leader agreed on: %v (%w)", leaders, errors.Join(errs...))
	}
	for i, m := range c.Members {
		if leaders[m.ServerAddr] {
			return i, nil
		}
	}
	return -1, fmt.Errorf("testserver: the consul leader %v is none of the members", leaders)
}

// Healthy returns nil when the cluster can lose any one server and keep
// its quorum: all three are voters and healthy, as autopilot reports it
// (/v1/operator/autopilot/health through the leader). Autopilot removes
// a server that stops answering from the Raft configuration within
// seconds and takes it back as a non-voter, promoted only after it has
// been healthy for autopilot's stabilization time (10 s by default; a
// server paused for 15 s was still a non-voter 15 s after it resumed):
// until then the cluster has two voters, and losing either loses the
// quorum.
func (c *ConsulCluster) Healthy(ctx context.Context) error {
	i, err := c.Leader(ctx)
	if err != nil {
		return err
	}
	hctx, cancel := context.WithTimeout(ctx, testserver.LeaderProbeTimeout)
	defer cancel()
	h, err := c.Members[i].client.Operator().AutopilotServerHealth((&api.QueryOptions{}).WithContext(hctx))
	if err != nil {
		return fmt.Errorf("testserver: consul autopilot health: %w", err)
	}
	voters := 0
	for _, s := range h.Servers {
		if s.Voter && s.Healthy {
			voters++
		}
	}
	if !h.Healthy || voters != len(c.Members) {
		return fmt.Errorf("testserver: consul cluster not healthy: %d of %d servers healthy voters, failure tolerance %d", voters, len(c.Members), h.FailureTolerance)
	}
	return nil
}

// Stop kills every member and removes their data. Stopping twice is
// harmless.
func (c *ConsulCluster) Stop() error {
	var errs []error
	for _, m := range c.Members {
		if m != nil {
			errs = append(errs, m.Stop())
		}
	}
	return errors.Join(errs...)
}
