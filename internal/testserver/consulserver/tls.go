package consulserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/hashicorp/consul/api"

	"github.com/tenure-dev/tenure/internal/testserver"
	"github.com/tenure-dev/tenure/internal/testserver/testca"
	"github.com/tenure-dev/tenure/internal/testutil"
)

// ConsulTLS is a dev Consul agent whose HTTP API listens on loopback over
// HTTPS only, with the server certificate of a test's CA, and with ACLs on
// (default policy deny): only Token, the initial management token, may do
// anything.
type ConsulTLS struct {
	*testserver.Process
	HTTPSAddr string
	Token     string
}

// OwnConsulTLS starts a [ConsulTLS] for tb alone and stops it when tb
// ends. When there is no binary, or it does not start, it stops tb through
// [testutil.NeedServer].
func OwnConsulTLS(tb testing.TB, ca *testca.CA) *ConsulTLS {
	tb.Helper()
	c, err := startConsulTLS(tb, ca)
	testutil.NeedServer(tb, "consul agent with TLS ("+consulHowTo+")", err)
	tb.Cleanup(func() {
		if err := c.Stop(); err != nil {
			tb.Errorf("testserver: stop consul on %s: %v", c.HTTPSAddr, err)
		}
	})
	return c
}

func startConsulTLS(tb testing.TB, ca *testca.CA) (*ConsulTLS, error) {
	bin, err := ConsulBinary()
	if err != nil {
		return nil, err
	}
	srv := ca.Server(tb)
	token := fmt.Sprintf("%s-%s-%s-%s-%s", testutil.RandomHex(4), testutil.RandomHex(2), testutil.RandomHex(2), testutil.RandomHex(2), testutil.RandomHex(6))
	return testserver.OnFreePorts(tb.Context(), 4, func(ports []int) (*ConsulTLS, error) {
		dir, err := os.MkdirTemp("", "tenure-consultls-")
		if err != nil {
			return nil, err
		}
		node := "tenure-test-" + testutil.RandomHex(6)
		c := &ConsulTLS{HTTPSAddr: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0])), Token: token}
		hcl := fmt.Sprintf(`tls { defaults { ca_file = %q cert_file = %q key_file = %q verify_incoming = false } }
acl { enabled = true default_policy = "deny" tokens { initial_management = %q agent = %q } }`,
			ca.CertFile, srv.CertFile, srv.KeyFile, token, token)
		args := []string{"agent", "-dev",
			"-bind", "127.0.0.1", "-client", "127.0.0.1",
			"-http-port", "-1", "-https-port", strconv.Itoa(ports[0]),
			"-serf-lan-port", strconv.Itoa(ports[1]), "-serf-wan-port", strconv.Itoa(ports[2]),
			"-server-port", strconv.Itoa(ports[3]),
			"-dns-port", "-1", "-grpc-port", "-1", "-grpc-tls-port", "-1",
			"-data-dir", filepath.Join(dir, "data"), "-node", node, "-log-level", "warn",
			"-hcl", fmt.Sprintf("session_ttl_min = %q", ConsulSessionTTLMin.String()),
			"-hcl", "disable_update_check = true", "-hcl", hcl,
		}
		client, err := api.NewClient(&api.Config{Address: c.HTTPSAddr, Scheme: "https", Token: token,
			TLSConfig: api.TLSConfig{CAFile: ca.CertFile, Address: "127.0.0.1"}})
		if err != nil {
			return nil, errors.Join(err, os.RemoveAll(dir))
		}
		c.Process, err = testserver.Start(tb.Context(), testserver.Config{Name: "consul", Bin: bin, Args: args, Dir: dir,
			Ready: func(ctx context.Context) error {
				q := (&api.QueryOptions{}).WithContext(ctx)
				var self map[string]map[string]any
				if _, err := client.Raw().Query("/v1/agent/self", &self, q); err != nil {
					return err
				}
				if got := self["Config"]["NodeName"]; got != node {
					return fmt.Errorf("%w: the consul agent on %s is node %v, not %s", testserver.ErrForeign, c.HTTPSAddr, got, node)
				}
				n, _, err := client.Catalog().Node(node, q)
				if err != nil {
					return err
				}
				if n == nil {
					return errors.New("node not registered yet")
				}
				return nil
			}})
		if err != nil {
			return nil, err
		}
		return c, nil
	})
}
