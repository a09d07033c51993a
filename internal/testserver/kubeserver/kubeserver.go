package kubeserver

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	rbacv1 "k8s.io/client-go/kubernetes/typed/rbac/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/tenure-dev/tenure/internal/testserver"
	"github.com/tenure-dev/tenure/internal/testserver/etcdserver"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/k8sstore"
	"github.com/tenure-dev/tenure/store/storetest"
)

// BinEnv names the environment variable that names the kube-apiserver
// binary.
const BinEnv = "TENURE_KUBE_APISERVER_BIN"

// howTo says how to get a kube-apiserver binary.
const howTo = "export " + BinEnv + "=$(tools/servers/ensure.sh kube-apiserver) builds kube-apiserver v1.37.2 and names it"

// Binary returns the kube-apiserver binary: $TENURE_KUBE_APISERVER_BIN, or
// kube-apiserver on PATH.
func Binary() (string, error) {
	return testserver.Binary(BinEnv, "kube-apiserver", howTo)
}

// Bearer tokens of the users the API server knows (its token file).
const (
	// adminToken is a member of system:masters: it may do anything.
	adminToken = "tenure-test-admin"
	// workerToken is user tenure-worker, in no group: it may do what
	// RBAC grants it and nothing else.
	workerToken = "tenure-test-worker"
	// WorkerUser is the user name of [Server.Worker].
	WorkerUser = "tenure-worker"
)

// Server is a kube-apiserver this process started on a free loopback
// port, over an etcd of its own, with RBAC on and two users: an
// administrator and a worker that may do nothing until a Role says so.
type Server struct {
	*testserver.Process
	// Etcd is the server's storage, stopped with it.
	Etcd *etcdserver.Etcd
	// Host is the server's URL, https://127.0.0.1:port.
	Host string
	// caFile verifies the server's self-signed certificate.
	caFile string
}

// Start starts an etcd and a kube-apiserver over it, and returns once the
// server is ready (/readyz) and presents the certificate it wrote. Stop it
// with [Server.Stop].
func Start(ctx context.Context) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	etcd, err := etcdserver.StartEtcd(ctx, etcdserver.EtcdConfig{})
	if err != nil {
		return nil, err
	}
	k, err := testserver.OnFreePorts(ctx, 1, func(ports []int) (*Server, error) {
		return start(ctx, bin, etcd, ports[0])
	})
	if err != nil {
		return nil, errors.Join(err, etcd.Stop())
	}
	return k, nil
}

func start(ctx context.Context, bin string, etcd *etcdserver.Etcd, port int) (*Server, error) {
	dir, err := os.MkdirTemp("", "tenure-kube-")
	if err != nil {
		return nil, fmt.Errorf("kubeserver: kube-apiserver directory: %w", err)
	}
	tokens := fmt.Sprintf("%s,admin,admin,system:masters\n%s,%s,%s\n", adminToken, workerToken, WorkerUser, WorkerUser)
	if err := os.WriteFile(filepath.Join(dir, "tokens.csv"), []byte(tokens), 0o600); err != nil {
		return nil, errors.Join(fmt.Errorf("kubeserver: kube-apiserver tokens: %w", err), os.RemoveAll(dir))
	}
	if err := writeServiceAccountKey(filepath.Join(dir, "sa.key")); err != nil {
		return nil, errors.Join(err, os.RemoveAll(dir))
	}
	certs := filepath.Join(dir, "certs")
	k := &Server{Etcd: etcd, Host: fmt.Sprintf("https://127.0.0.1:%d", port), caFile: filepath.Join(certs, "apiserver.crt")}
	args := []string{
		"--etcd-servers", etcd.Endpoint,
		"--bind-address", "127.0.0.1",
		"--advertise-address", "127.0.0.1",
		// The kubernetes Service's endpoint would be the loopback address,
		// which the reconciler refuses; nothing here needs the Service.
		"--endpoint-reconciler-type", "none",
		"--secure-port", fmt.Sprint(port),
		"--cert-dir", certs,
		"--token-auth-file", filepath.Join(dir, "tokens.csv"),
		"--authorization-mode", "RBAC",
		"--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file", filepath.Join(dir, "sa.key"),
		"--service-account-signing-key-file", filepath.Join(dir, "sa.key"),
		"--service-cluster-ip-range", "10.0.0.0/24",
	}
	k.Process, err = testserver.Start(ctx, testserver.Config{Name: "kube-apiserver", Bin: bin, Args: args, Dir: dir, Ready: k.ready, ReadyTimeout: 2 * time.Minute})
	if err != nil {
		return nil, err
	}
	return k, nil
}

// writeServiceAccountKey writes an RSA key for the server to sign and
// check service account tokens with: it refuses to start without one.
func writeServiceAccountKey(path string) error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return fmt.Errorf("kubeserver: service account key: %w", err)
	}
	block := &pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}
	if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
		return fmt.Errorf("kubeserver: service account key: %w", err)
	}
	return nil
}

// Own starts a server for tb alone ([Start]) and stops it when tb ends.
// When there is no binary, or it does not start, it stops tb through
// [testutil.NeedServer].
func Own(tb testing.TB) *Server {
	tb.Helper()
	k, err := Start(tb.Context())
	testutil.NeedServer(tb, "kube-apiserver", err)
	tb.Cleanup(func() {
		if err := k.Stop(); err != nil {
			tb.Errorf("kubeserver: stop kube-apiserver %s: %v", k.Host, err)
		}
	})
	return k
}

// Shared is the server [testserver.Main] starts for a package's tests to
// share when its TestMain passes it:
//
//	func TestMain(m *testing.M) {
//		testserver.Main(m, kubeserver.Shared)
//	}
//
// Tests take it with Shared.Get.
var Shared = testserver.NewShared("kube-apiserver", Start, (*Server).Stop)

// Stop stops the server and then its etcd.
func (k *Server) Stop() error {
	return errors.Join(k.Process.Stop(), k.Etcd.Stop())
}

// Admin returns a client configuration of the administrator.
func (k *Server) Admin() *rest.Config { return k.config(adminToken) }

// Worker returns a client configuration of user [WorkerUser], which
// may do only what a RoleBinding grants it.
func (k *Server) Worker() *rest.Config { return k.config(workerToken) }

func (k *Server) config(token string) *rest.Config {
	return &rest.Config{
		Host:            k.Host,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAFile: k.caFile},
		// client-go's defaults (5 requests a second, bursts of 10) would
		// make the tests measure its rate limiter.
		QPS:   1000,
		Burst: 1000,
	}
}

// Kubeconfig writes a kubeconfig file that reaches the server as the
// user of cfg ([Server.Admin] or [Server.Worker]) in
// context "tenure-test", namespace default, and returns its path.
func (k *Server) Kubeconfig(tb testing.TB, cfg *rest.Config) string {
	tb.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["test"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthority: cfg.CAFile}
	kc.AuthInfos["test"] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken}
	kc.Contexts["tenure-test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "test", Namespace: "default"}
	kc.CurrentContext = "tenure-test"
	path := filepath.Join(tb.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		tb.Fatalf("kubeserver: write kubeconfig: %v", err)
	}
	return path
}

// ready checks that the server presents the certificate it wrote into its
// directory and answers /readyz.
func (k *Server) ready(ctx context.Context) error {
	pemCerts, err := os.ReadFile(k.caFile)
	if err != nil {
		return err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pemCerts) {
		return fmt.Errorf("no certificate in %s yet", k.caFile)
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	defer client.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.Host+"/readyz", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := client.Do(req)
	var unknown x509.UnknownAuthorityError
	if errors.As(err, &unknown) {
		return fmt.Errorf("%w: the server on %s presents a certificate it did not write to %s", testserver.ErrForeign, k.Host, k.caFile)
	}
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s/readyz answered %s", k.Host, resp.Status)
	}
	return nil
}

// Harness gives the conformance suite k8sstore stores on one server, each
// with a prefix of its own in namespace default.
type Harness struct {
	Server *Server
}

// NewStore implements [storetest.Harness].
func (h Harness) NewStore(tb testing.TB) store.Store {
	tb.Helper()
	s, _, _ := h.New(tb)
	return s
}

// New is [Harness.NewStore] returning the concrete store, its Leases
// client (the administrator's) and its configuration, for
// backend-specific tests. Its cleanup closes the store and deletes the
// objects of its prefix.
func (h Harness) New(tb testing.TB) (*k8sstore.Store, coordinationv1.LeaseInterface, k8sstore.Config) {
	tb.Helper()
	leases := h.Leases(tb, h.Server.Admin())
	cfg := k8sstore.Config{Prefix: "t" + testutil.RandomHex(8)}
	s, err := k8sstore.New(leases, cfg)
	if err != nil {
		tb.Fatalf("kubeserver: %v", err)
	}
	tb.Cleanup(func() {
		_ = s.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err := leases.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: k8sstore.LabelPrefix + "=" + cfg.Prefix})
		if err != nil {
			tb.Errorf("kubeserver: delete the Lease objects of prefix %s: %v", cfg.Prefix, err)
		}
	})
	return s, leases, cfg
}

// Leases returns the Lease objects of namespace default as the user of
// cfg sees them.
func (h Harness) Leases(tb testing.TB, cfg *rest.Config) coordinationv1.LeaseInterface {
	tb.Helper()
	c, err := coordinationv1.NewForConfig(cfg)
	if err != nil {
		tb.Fatalf("kubeserver: coordination client: %v", err)
	}
	return c.Leases("default")
}

// RBAC returns the administrator's RBAC client, to grant the worker roles.
func (h Harness) RBAC(tb testing.TB) rbacv1.RbacV1Interface {
	tb.Helper()
	c, err := rbacv1.NewForConfig(h.Server.Admin())
	if err != nil {
		tb.Fatalf("kubeserver: RBAC client: %v", err)
	}
	return c
}

// Capabilities implements [storetest.Harness].
func (h Harness) Capabilities() storetest.Capabilities {
	return storetest.Capabilities{Notify: true, Faults: h.Faults()}
}
