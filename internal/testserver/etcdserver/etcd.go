package etcdserver

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/internal/testserver"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/internal/testutil"
)

// EtcdBinEnv names the environment variable that names the etcd binary.
const EtcdBinEnv = "TENURE_ETCD_BIN"

// etcdHowTo says how to get an etcd binary.
const etcdHowTo = "export " + EtcdBinEnv + "=$(tools/servers/ensure.sh etcd) builds etcd v3.7.3 and names it"

// EtcdConfig configures an etcd server [StartEtcd] starts.
type EtcdConfig struct {
	// Fsync makes the server sync its log to disk before it answers, so
	// that its data would survive a crash of the machine. Off by default:
	// tests hold throwaway data, and a killed process loses nothing the
	// kernel already has.
	Fsync bool
}

// Etcd is a single-member etcd server this process started, on free
// loopback ports with a data directory of its own.
type Etcd struct {
	*testserver.Process
	// Name is the server's member name, unique to it.
	Name string
	// Endpoint is the client URL, http://127.0.0.1:port.
	Endpoint string
}

// EtcdBinary returns the etcd binary: $TENURE_ETCD_BIN, or etcd on PATH.
func EtcdBinary() (string, error) { return testserver.Binary(EtcdBinEnv, "etcd", etcdHowTo) }

// StartEtcd starts an etcd server and returns once it answers as itself
// (it lists a member of its unique name). Stop it with [Process.Stop].
func StartEtcd(ctx context.Context, cfg EtcdConfig) (*Etcd, error) {
	bin, err := EtcdBinary()
	if err != nil {
		return nil, err
	}
	return testserver.OnFreePorts(ctx, 2, func(ports []int) (*Etcd, error) {
		name := "tenure-test-" + testutil.RandomHex(6)
		client := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
		peer := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
		return startEtcdMember(ctx, bin, cfg, name, client, peer, name+"="+peer, name)
	})
}

// startEtcdMember starts one member of the cluster initial describes
// (name=peer-url pairs) under a data directory of its own, and returns
// once it answers as itself.
func startEtcdMember(ctx context.Context, bin string, cfg EtcdConfig, name, client, peer, initial, token string) (*Etcd, error) {
	dir, err := os.MkdirTemp("", "tenure-etcd-")
	if err != nil {
		return nil, fmt.Errorf("testserver: etcd data directory: %w", err)
	}
	args := []string{
		"--name", name,
		"--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", client,
		"--advertise-client-urls", client,
		"--listen-peer-urls", peer,
		"--initial-advertise-peer-urls", peer,
		"--initial-cluster", initial,
		"--initial-cluster-token", token,
		"--initial-cluster-state", "new",
		"--log-level", "warn",
	}
	if !cfg.Fsync {
		args = append(args, "--unsafe-no-fsync")
	}
	e := &Etcd{Name: name, Endpoint: client}
	e.Process, err = testserver.Start(ctx, testserver.Config{Name: "etcd", Bin: bin, Args: args, Dir: dir, Ready: e.ready})
	if err != nil {
		return nil, err
	}
	return e, nil
}

// OwnEtcd starts a server for tb alone ([StartEtcd]) and stops it when tb
// ends. When there is no binary, or it does not start, it stops tb through
// [testutil.NeedServer].
func OwnEtcd(tb testing.TB) *Etcd {
	tb.Helper()
	e, err := StartEtcd(tb.Context(), EtcdConfig{})
	testutil.NeedServer(tb, "etcd", err)
	tb.Cleanup(func() {
		if err := e.Stop(); err != nil {
			tb.Errorf("testserver: stop etcd %s: %v", e.Name, err)
		}
	})
	return e
}

// Addr is the server's client host:port.
func (e *Etcd) Addr() string { return strings.TrimPrefix(e.Endpoint, "http://") }

// Client returns a new client of the server, closed when tb ends.
func (e *Etcd) Client(tb testing.TB) *clientv3.Client {
	tb.Helper()
	cli, err := e.newClient()
	if err != nil {
		tb.Fatalf("testserver: %v", err)
	}
	tb.Cleanup(func() { _ = cli.Close() })
	return cli
}

func (e *Etcd) newClient() (*clientv3.Client, error) {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{e.Endpoint},
		DialTimeout: 30 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("testserver: etcd client for %s: %w", e.Endpoint, err)
	}
	return cli, nil
}

// ready checks that the server lists a member of e's name and serves
// reads.
func (e *Etcd) ready(ctx context.Context) error {
	cli, err := e.newClient()
	if err != nil {
		return err
	}
	defer func() { _ = cli.Close() }()
	resp, err := cli.MemberList(ctx)
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(resp.Members, func(m *etcdserverpb.Member) bool {
		return m.Name == e.Name && slices.Contains(m.ClientURLs, e.Endpoint)
	}) {
		return fmt.Errorf("%w: the etcd on %s is not %s: members %v", testserver.ErrForeign, e.Endpoint, e.Name, resp.Members)
	}
	_, err = cli.Get(ctx, "tenure-test-probe")
	return err
}

// Shared is the etcd server [testserver.Main] starts for a package's tests
// to share when its TestMain passes it:
//
//	func TestMain(m *testing.M) { testserver.Main(m, etcdserver.Shared) }
var Shared = testserver.NewShared("etcd", func(ctx context.Context) (*Etcd, error) {
	return StartEtcd(ctx, EtcdConfig{})
}, (*Etcd).Stop)

// SharedEtcd returns the etcd server [testserver.Main] started
// ([testserver.Shared.Get]).
func SharedEtcd(tb testing.TB) *Etcd {
	tb.Helper()
	return Shared.Get(tb)
}
