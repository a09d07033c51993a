package redisserver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-dev/tenure/internal/testserver"
	"github.com/tenure-dev/tenure/internal/testserver/testca"
	"github.com/tenure-dev/tenure/internal/testutil"
)

// RedisTLS is a redis-server that listens on loopback over TLS only, with
// the server certificate of a test's CA, and knows one ACL user
// ([RedisTLSUser], with Password) besides a disabled default user.
type RedisTLS struct {
	*testserver.Process
	Port     int
	Password string
}

// RedisTLSUser is the ACL user of a [RedisTLS] server.
const RedisTLSUser = "tenure"

// OwnRedisTLS starts a redis-server for tb alone and stops it when tb
// ends. With clientCerts it asks every client for a certificate the CA
// issued. When there is no binary, or it does not start, it stops tb
// through [testutil.NeedServer].
func OwnRedisTLS(tb testing.TB, ca *testca.CA, clientCerts bool) *RedisTLS {
	tb.Helper()
	r, err := startRedisTLS(tb, ca, clientCerts)
	testutil.NeedServer(tb, "redis-server with TLS (install Debian's redis-server, or set "+RedisBinEnv+")", err)
	tb.Cleanup(func() {
		if err := r.Stop(); err != nil {
			tb.Errorf("testserver: stop redis-server on port %d: %v", r.Port, err)
		}
	})
	return r
}

func startRedisTLS(tb testing.TB, ca *testca.CA, clientCerts bool) (*RedisTLS, error) {
	bin, err := RedisBinary()
	if err != nil {
		return nil, err
	}
	srv := ca.Server(tb)
	// The probe presents a client certificate, in case the server asks.
	probe := ca.Client(tb, "probe")
	pair, err := tls.LoadX509KeyPair(probe.CertFile, probe.KeyFile)
	if err != nil {
		return nil, err
	}
	pem, err := os.ReadFile(ca.CertFile)
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	pw := testutil.RandomHex(16)
	auth := "no"
	if clientCerts {
		auth = "yes"
	}
	return testserver.OnFreePorts(tb.Context(), 1, func(ports []int) (*RedisTLS, error) {
		dir, err := os.MkdirTemp("", "tenure-redistls-")
		if err == nil {
			dir, err = filepath.EvalSymlinks(dir)
		}
		if err != nil {
			return nil, err
		}
		r := &RedisTLS{Port: ports[0], Password: pw}
		args := []string{
			"--port", "0", "--tls-port", strconv.Itoa(r.Port), "--bind", "127.0.0.1", "--dir", dir,
			"--daemonize", "no", "--logfile", "", "--save", "", "--appendonly", "no",
			"--tls-cert-file", srv.CertFile, "--tls-key-file", srv.KeyFile, "--tls-ca-cert-file", ca.CertFile,
			"--tls-auth-clients", auth,
			"--user", "default", "off",
			"--user", RedisTLSUser, "on", ">" + pw, "~*", "&*", "+@all",
		}
		r.Process, err = testserver.Start(tb.Context(), testserver.Config{
			Name: "redis-server", Bin: bin, Args: args, Dir: dir,
			Ready: func(ctx context.Context) error {
				c := redis.NewClient(&redis.Options{
					Addr: fmt.Sprintf("127.0.0.1:%d", r.Port), Username: RedisTLSUser, Password: pw,
					MaxRetries: -1, DialTimeout: time.Second,
					TLSConfig: &tls.Config{RootCAs: roots, ServerName: "127.0.0.1", Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12},
				})
				defer func() { _ = c.Close() }()
				got, err := c.ConfigGet(ctx, "dir").Result()
				if err != nil {
					return err
				}
				if got["dir"] != dir {
					return fmt.Errorf("%w: the redis-server on port %d keeps its data in %q, not %q", testserver.ErrForeign, r.Port, got["dir"], dir)
				}
				return nil
			},
		})
		if err != nil {
			return nil, err
		}
		return r, nil
	})
}

// EtcdTLS is a single-member etcd server whose clients speak TLS and must
