package chaos

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/rest"

	"github.com/tenure-dev/tenure/internal/testserver"
	"github.com/tenure-dev/tenure/internal/testserver/kubeserver"
	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/k8sstore"
)

// The k8s cell keeps its leases in Lease objects of a kube-apiserver the
// harness starts, over an etcd of its own which the nemesis leaves alone
// (a restart restarts the API server), and its chains in a
// [tokenResource]: Kubernetes has no transaction that could write a chain
// and check the Lease object at once.

// kubeNamespace is where the cell's Lease objects live.
const kubeNamespace = "default"

// startKube starts an etcd and a kube-apiserver over it. The nemesis
// kills and restarts members[0], the API server; stop stops both.
func startKube(ctx context.Context) (*server, *kubeserver.Server, error) {
	k, err := kubeserver.Start(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("chaos: %w", err)
	}
	host := k.Host[len("https://"):]
	return &server{members: []*testserver.Process{k.Process, k.Etcd.Process}, addrs: []string{host}}, k, nil
}

// kubeStore returns a store over the cell's Lease objects reached at addr
// (a proxy, or the server itself) with the credentials of admin.
func kubeStore(admin *rest.Config, addr, prefix string) (*k8sstore.Store, error) {
	cfg := rest.CopyConfig(admin)
	cfg.Host = "https://" + addr
	cfg.Timeout = 2 * time.Second
	leases, err := k8sstore.NewLeases(cfg, kubeNamespace)
	if err != nil {
		return nil, fmt.Errorf("chaos: kubernetes client: %w", err)
	}
	return k8sstore.New(leases, k8sstore.Config{Prefix: prefix})
}

// openKubeWorker is openWorker for the k8s cell.
func openKubeWorker(_ context.Context, sp spec) (store.Store, resource, func(), error) {
	admin := &rest.Config{BearerToken: sp.KubeToken, TLSClientConfig: rest.TLSClientConfig{CAFile: sp.KubeCA}, QPS: 1000, Burst: 1000}
	st, err := kubeStore(admin, sp.StoreAddr, sp.Prefix)
	if err != nil {
		return nil, nil, nil, err
	}
	return withTokenResource(sp, st, func() { _ = st.Close() })
}

// setupKube starts the cell's API server and makes the harness's own
// store and reader. It returns the address the proxies forward to.
func (c *cell) setupKube(ctx context.Context, id string, cleanups *[]func()) (string, error) {
	c.spec.Prefix = "chaos-" + id
	s, k, err := startKube(ctx)
	if err != nil {
		return "", err
	}
	c.server = s
	*cleanups = append(*cleanups, func() { _ = s.stop() })
	admin := k.Admin()
	c.spec.KubeToken, c.spec.KubeCA = admin.BearerToken, admin.CAFile
	st, err := kubeStore(admin, s.addrs[0], c.spec.Prefix)
	if err != nil {
		return "", err
	}
	res, err := c.setupTokenResource(ctx, id, cleanups)
	if err != nil {
		return "", err
	}
	c.store, c.reader = st, res
	return s.addrs[0], nil
}
