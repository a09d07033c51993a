package testserver

import (
	"context"
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/tenure-dev/tenure/internal/testutil"
)

// Servers names the servers [Main] starts for a package's tests to share.
type Servers struct {
	// Etcd starts one etcd server, for [SharedEtcd].
	Etcd bool
	// Consul starts one Consul dev agent, for [SharedConsul].
	Consul bool
	// Nats starts one nats-server with JetStream, for [SharedNats].
	Nats bool
	// KubeAPIServer starts one kube-apiserver (and its etcd), for
	// [SharedKubeAPIServer].
	KubeAPIServer bool
	// MinIO starts one MinIO server, for [SharedMinIO].
	MinIO bool
}

// shared holds what [Main] started, or why it could not.
var shared struct {
	main      bool // Main runs
	servers   Servers
	etcd      *Etcd
	etcdErr   error
	consul    *Consul
	consulErr error
	nats      *Nats
	natsErr   error
	kube      *KubeAPIServer
	kubeErr   error
	minio     *MinIO
	minioErr  error
}

// Main runs a test package's tests: it starts the servers named, runs the
// tests, stops the servers, fails the run if goroutines leaked (goleak, as
// [testutil.VerifyTestMain] does, but after the servers are stopped) and
// exits. Call it from TestMain:
//
//	func TestMain(m *testing.M) { testserver.Main(m, testserver.Servers{Etcd: true}) }
//
// A server that cannot start is not an error here: [SharedEtcd] and
// [SharedConsul] report it to each test that asks.
func Main(m *testing.M, servers Servers) {
	goleak.VerifyTestMain(mainRun{m: m, servers: servers})
}

// mainRun runs the tests between the start and the stop of the shared
// servers, so they are gone before goleak looks for leaks.
type mainRun struct {
	m       *testing.M
	servers Servers
}

func (r mainRun) Run() int {
	shared.main, shared.servers = true, r.servers
	ctx := context.Background()
	if r.servers.Etcd {
		shared.etcd, shared.etcdErr = StartEtcd(ctx, EtcdConfig{})
		if shared.etcd != nil {
			defer stopShared("etcd", shared.etcd.Process)
		}
	}
	if r.servers.Consul {
		shared.consul, shared.consulErr = StartConsul(ctx, ConsulConfig{})
		if shared.consul != nil {
			defer stopShared("consul", shared.consul.Process)
		}
	}
	if r.servers.Nats {
		shared.nats, shared.natsErr = StartNats(ctx)
		if shared.nats != nil {
			defer stopShared("nats-server", shared.nats.Process)
		}
	}
	if r.servers.KubeAPIServer {
		shared.kube, shared.kubeErr = StartKubeAPIServer(ctx)
		if shared.kube != nil {
			defer func() {
				if err := shared.kube.Stop(); err != nil {
					fmt.Fprintf(os.Stderr, "testserver: stop the shared kube-apiserver: %v\n", err)
				}
			}()
		}
	}
	if r.servers.MinIO {
		shared.minio, shared.minioErr = StartMinIO(ctx)
		if shared.minio != nil {
			defer stopShared("minio", shared.minio.Process)
		}
	}
	return r.m.Run()
}

func stopShared(name string, p *Process) {
	if err := p.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "testserver: stop the shared %s: %v\n", name, err)
	}
}

// needShared stops tb unless Main runs and was asked for the server.
func needShared(tb testing.TB, asked bool, field string) {
	tb.Helper()
	if !shared.main || !asked {
		tb.Fatalf("testserver: no shared server: the package's TestMain must call testserver.Main(m, testserver.Servers{%s: true})", field)
	}
}

// SharedEtcd returns the etcd server [Main] started. When it could not
// start it stops tb through [testutil.NeedServer]: a skip, or a failure
// when CI is set.
func SharedEtcd(tb testing.TB) *Etcd {
	tb.Helper()
	needShared(tb, shared.servers.Etcd, "Etcd")
	testutil.NeedServer(tb, "etcd", shared.etcdErr)
	return shared.etcd
}

// SharedConsul returns the Consul agent [Main] started. When it could not
// start it stops tb through [testutil.NeedServer].
func SharedConsul(tb testing.TB) *Consul {
	tb.Helper()
	needShared(tb, shared.servers.Consul, "Consul")
	testutil.NeedServer(tb, "consul agent", shared.consulErr)
	return shared.consul
}

// SharedNats returns the nats-server [Main] started. When it could not
// start it stops tb through [testutil.NeedServer].
func SharedNats(tb testing.TB) *Nats {
	tb.Helper()
	needShared(tb, shared.servers.Nats, "Nats")
	testutil.NeedServer(tb, "nats-server", shared.natsErr)
	return shared.nats
}

// SharedKubeAPIServer returns the kube-apiserver [Main] started. When it
// could not start it stops tb through [testutil.NeedServer].
func SharedKubeAPIServer(tb testing.TB) *KubeAPIServer {
	tb.Helper()
	needShared(tb, shared.servers.KubeAPIServer, "KubeAPIServer")
	testutil.NeedServer(tb, "kube-apiserver", shared.kubeErr)
	return shared.kube
}

// SharedMinIO returns the MinIO server [Main] started. When it could not
// start it stops tb through [testutil.NeedServer].
func SharedMinIO(tb testing.TB) *MinIO {
	tb.Helper()
	needShared(tb, shared.servers.MinIO, "MinIO")
	testutil.NeedServer(tb, "minio", shared.minioErr)
	return shared.minio
}
