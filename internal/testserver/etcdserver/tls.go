package etcdserver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/internal/testserver"
	"github.com/tenure-dev/tenure/internal/testserver/testca"
	"github.com/tenure-dev/tenure/internal/testutil"
)

// present a certificate of a test's CA (--client-cert-auth), with
// authentication enabled: the user root has Password, and a client
// certificate whose common name is root logs in as root without one.
type EtcdTLS struct {
	*testserver.Process
	Addr     string
	Password string
}

// OwnEtcdTLS starts an [EtcdTLS] for tb alone and stops it when tb ends.
// When there is no binary, or it does not start, it stops tb through
// [testutil.NeedServer].
func OwnEtcdTLS(tb testing.TB, ca *testca.CA) *EtcdTLS {
	tb.Helper()
	e, err := startEtcdTLS(tb, ca)
	testutil.NeedServer(tb, "etcd with TLS ("+etcdHowTo+")", err)
	tb.Cleanup(func() {
		if err := e.Stop(); err != nil {
			tb.Errorf("testserver: stop etcd on %s: %v", e.Addr, err)
		}
	})
	return e
}

// clientTLS returns a client TLS configuration trusting ca and presenting
// a certificate for user.
func clientTLS(tb testing.TB, ca *testca.CA, user string) (*tls.Config, error) {
	c := ca.Client(tb, user)
	pair, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
	if err != nil {
		return nil, err
	}
	pem, err := os.ReadFile(ca.CertFile)
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	return &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}, nil
}

func startEtcdTLS(tb testing.TB, ca *testca.CA) (*EtcdTLS, error) {
	bin, err := EtcdBinary()
	if err != nil {
		return nil, err
	}
	srv := ca.Server(tb)
	rootTLS, err := clientTLS(tb, ca, "root")
	if err != nil {
		return nil, err
	}
	pw := testutil.RandomHex(16)
	return testserver.OnFreePorts(tb.Context(), 2, func(ports []int) (*EtcdTLS, error) {
		dir, err := os.MkdirTemp("", "tenure-etcdtls-")
		if err != nil {
			return nil, err
		}
		name := "tenure-test-" + testutil.RandomHex(6)
		e := &EtcdTLS{Addr: fmt.Sprintf("127.0.0.1:%d", ports[0]), Password: pw}
		client := "https://" + e.Addr
		peer := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
		args := []string{
			"--name", name, "--data-dir", filepath.Join(dir, "data"),
			"--listen-client-urls", client, "--advertise-client-urls", client,
			"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
			"--initial-cluster", name + "=" + peer, "--initial-cluster-token", name,
			"--initial-cluster-state", "new", "--log-level", "warn", "--unsafe-no-fsync",
			"--cert-file", srv.CertFile, "--key-file", srv.KeyFile,
			"--client-cert-auth", "--trusted-ca-file", ca.CertFile,
		}
		e.Process, err = testserver.Start(tb.Context(), testserver.Config{Name: "etcd", Bin: bin, Args: args, Dir: dir,
			Ready: func(ctx context.Context) error {
				cli, err := clientv3.New(clientv3.Config{Endpoints: []string{e.Addr}, TLS: rootTLS, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
				if err != nil {
					return err
				}
				defer func() { _ = cli.Close() }()
				resp, err := cli.MemberList(ctx)
				if err != nil {
					return err
				}
				if len(resp.Members) != 1 || resp.Members[0].Name != name {
					return fmt.Errorf("%w: the etcd on %s is not %s", testserver.ErrForeign, e.Addr, name)
				}
				return nil
			}})
		if err != nil {
			return nil, err
		}
		if err := e.enableAuth(tb.Context(), rootTLS); err != nil {
			return nil, errors.Join(err, e.Stop())
		}
		return e, nil
	})
}

// enableAuth adds the root user with e.Password and turns authentication on.
func (e *EtcdTLS) enableAuth(ctx context.Context, rootTLS *tls.Config) error {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{e.Addr}, TLS: rootTLS, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer func() { _ = cli.Close() }()
	if _, err := cli.UserAdd(ctx, "root", e.Password); err != nil {
		return fmt.Errorf("testserver: etcd user add root: %w", err)
	}
	if _, err := cli.RoleAdd(ctx, "root"); err != nil && !strings.Contains(err.Error(), "already exists") {
		return fmt.Errorf("testserver: etcd role add root: %w", err)
	}
	if _, err := cli.UserGrantRole(ctx, "root", "root"); err != nil {
		return fmt.Errorf("testserver: etcd grant root: %w", err)
	}
	if _, err := cli.AuthEnable(ctx); err != nil {
		return fmt.Errorf("testserver: etcd auth enable: %w", err)
	}
	return nil
}
