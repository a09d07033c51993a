package testserver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/internal/testserver/testca"
	"github.com/tenure-dev/tenure/internal/testutil"
)

// PostgresBinDirEnv names the environment variable that names the
// directory of initdb and postgres for [OwnPostgresTLS]; the default is
// [DefaultPostgresBinDir].
const PostgresBinDirEnv = "TENURE_PG_BIN_DIR"

// DefaultPostgresBinDir is where Debian's postgresql-15 keeps its binaries.
const DefaultPostgresBinDir = "/usr/lib/postgresql/15/bin"

// Roles of the cluster [OwnPostgresTLS] starts.
const (
	// PostgresTLSPasswordUser logs in with a password, over TLS only.
	PostgresTLSPasswordUser = "tenure_pw"
	// PostgresTLSCertUser logs in with a client certificate whose common
	// name is the role's name (pg_hba "cert").
	PostgresTLSCertUser = "tenure_cert"
)

// PostgresTLS is a private PostgreSQL cluster that accepts TCP connections
// on loopback over TLS only (no "host" line in pg_hba.conf, only
// "hostssl"), with the server certificate of a test's CA.
type PostgresTLS struct {
	*Process
	Port int
	// Password is PostgresTLSPasswordUser's password.
	Password string
	socket   string
}

// OwnPostgresTLS initialises and starts a cluster for tb alone and stops
// it, removing its data, when tb ends. [PostgresTLSPasswordUser] and
// [PostgresTLSCertUser] are superusers of it. When the binaries are
// missing or the server does not start, it stops tb through
// [testutil.NeedServer].
func OwnPostgresTLS(tb testing.TB, ca *testca.CA) *PostgresTLS {
	tb.Helper()
	p, err := startPostgresTLS(tb, ca)
	testutil.NeedServer(tb, "a private PostgreSQL cluster (initdb and postgres in "+postgresBinDir()+"; set "+PostgresBinDirEnv+")", err)
	tb.Cleanup(func() {
		if err := p.Stop(); err != nil {
			tb.Errorf("testserver: stop postgres on port %d: %v", p.Port, err)
		}
	})
	return p
}

func postgresBinDir() string {
	if d := os.Getenv(PostgresBinDirEnv); d != "" {
		return d
	}
	return DefaultPostgresBinDir
}

// asPostgres returns how to run a PostgreSQL binary: as the postgres
// user when this process is root (PostgreSQL refuses to run as root),
// and the uid and gid that must own its files (-1 when unchanged).
func asPostgres() (*syscall.Credential, int, int, error) {
	if os.Geteuid() != 0 {
		return nil, -1, -1, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, 0, 0, fmt.Errorf("testserver: running as root, and there is no postgres user to run PostgreSQL as: %w", err)
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err := errors.Join(err1, err2); err != nil {
		return nil, 0, 0, fmt.Errorf("testserver: postgres user ids: %w", err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, uid, gid, nil
}

func startPostgresTLS(tb testing.TB, ca *testca.CA) (*PostgresTLS, error) {
	bin := postgresBinDir()
	for _, b := range []string{"initdb", "postgres"} {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			return nil, err
		}
	}
	cred, uid, gid, err := asPostgres()
	if err != nil {
		return nil, err
	}
	srv := ca.Server(tb)
	dir, err := os.MkdirTemp("", "tenure-pgtls-")
	if err != nil {
		return nil, err
	}
	// Everything in dir belongs to the server's user.
	own := func(path string) error {
		if uid < 0 {
			return nil
		}
		return os.Chown(path, uid, gid)
	}
	copyFile := func(from, to string) error {
		b, err := os.ReadFile(from)
		if err == nil {
			err = os.WriteFile(to, b, 0o600)
		}
		if err == nil {
			err = own(to)
		}
		return err
	}
	pw := testutil.RandomHex(16)
	data := filepath.Join(dir, "data")
	err = errors.Join(own(dir),
		copyFile(srv.CertFile, filepath.Join(dir, "server.crt")),
		copyFile(srv.KeyFile, filepath.Join(dir, "server.key")),
		copyFile(ca.CertFile, filepath.Join(dir, "ca.crt")),
		os.WriteFile(filepath.Join(dir, "pwfile"), []byte(pw+"\n"), 0o600), own(filepath.Join(dir, "pwfile")))
	if err == nil {
		err = runPostgresTool(bin, dir, cred, "initdb", "-D", data, "-U", "postgres", "--auth-local=trust",
			"--auth-host=reject", "--no-sync", "-E", "UTF8", "--locale=C")
	}
	if err == nil {
		hba := "local all all trust\n" +
			"hostssl all " + PostgresTLSCertUser + " 127.0.0.1/32 cert\n" +
			"hostssl all all 127.0.0.1/32 scram-sha-256\n"
		err = os.WriteFile(filepath.Join(data, "pg_hba.conf"), []byte(hba), 0o600)
	}
	if err != nil {
		return nil, errors.Join(err, os.RemoveAll(dir))
	}
	return OnFreePorts(tb.Context(), 1, func(ports []int) (*PostgresTLS, error) {
		p := &PostgresTLS{Port: ports[0], Password: pw, socket: dir}
		var err error
		p.Process, err = startPostgresProcess(tb.Context(), bin, dir, data, p.Port, cred,
			"-c", "ssl=on",
			"-c", "ssl_cert_file="+filepath.Join(dir, "server.crt"),
			"-c", "ssl_key_file="+filepath.Join(dir, "server.key"),
			"-c", "ssl_ca_file="+filepath.Join(dir, "ca.crt"),
			"-c", "password_encryption=scram-sha-256")
		if err != nil {
			return nil, err
		}
		if err := p.setup(tb.Context()); err != nil {
			return nil, errors.Join(err, p.Stop())
		}
		return p, nil
	})
}

// runPostgresTool runs one of PostgreSQL's programs (initdb,
// pg_basebackup) in dir as cred's user.
func runPostgresTool(bin, dir string, cred *syscall.Credential, name string, args ...string) error {
	cmd := exec.Command(filepath.Join(bin, name), args...)
	cmd.Dir = dir
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("testserver: %s: %w: %s", name, err, out)
	}
	return nil
}

// startPostgresProcess starts the postgres of data on port, its socket in
// dir, as cred's user, with settings beyond the test defaults in extra
// ("-c", "name=value", ...).
func startPostgresProcess(ctx context.Context, bin, dir, data string, port int, cred *syscall.Credential, extra ...string) (*Process, error) {
	args := append([]string{"-D", data, "-p", strconv.Itoa(port), "-k", dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off"}, extra...)
	var pr *Process
	ready := func(ctx context.Context) error {
		conn, err := pgx.Connect(ctx, fmt.Sprintf("host=%s port=%d user=postgres dbname=postgres sslmode=disable", dir, port))
		if err != nil {
			return err
		}
		defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
		var got string
		if err := conn.QueryRow(ctx, "SELECT current_setting('data_directory')").Scan(&got); err != nil {
			return err
		}
		if got != data {
			return fmt.Errorf("%w: the postgres on port %d serves %s, not %s", ErrForeign, port, got, data)
		}
		return nil
	}
	pr, err := Start(ctx, Config{
		Name: "postgres", Bin: filepath.Join(bin, "postgres"), Args: args, Dir: dir, Ready: ready,
		Prepare: func(cmd *exec.Cmd) {
			if cred != nil {
				cmd.SysProcAttr.Credential = cred
			}
		},
	})
	return pr, err
}

// setup creates the two roles.
func (p *PostgresTLS) setup(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, fmt.Sprintf("host=%s port=%d user=postgres dbname=postgres sslmode=disable", p.socket, p.Port))
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	for _, sql := range []string{
		"CREATE ROLE " + PostgresTLSPasswordUser + " LOGIN SUPERUSER PASSWORD '" + p.Password + "'",
		"CREATE ROLE " + PostgresTLSCertUser + " LOGIN SUPERUSER",
	} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			return fmt.Errorf("testserver: %s: %w", strings.Fields(sql)[2], err)
		}
	}
	return nil
}

// RedisTLS is a redis-server that listens on loopback over TLS only, with
// the server certificate of a test's CA, and knows one ACL user
// ([RedisTLSUser], with Password) besides a disabled default user.
type RedisTLS struct {
	*Process
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
	return OnFreePorts(tb.Context(), 1, func(ports []int) (*RedisTLS, error) {
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
		r.Process, err = Start(tb.Context(), Config{
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
					return fmt.Errorf("%w: the redis-server on port %d keeps its data in %q, not %q", ErrForeign, r.Port, got["dir"], dir)
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
// present a certificate of a test's CA (--client-cert-auth), with
// authentication enabled: the user root has Password, and a client
// certificate whose common name is root logs in as root without one.
type EtcdTLS struct {
	*Process
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
	return OnFreePorts(tb.Context(), 2, func(ports []int) (*EtcdTLS, error) {
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
		e.Process, err = Start(tb.Context(), Config{Name: "etcd", Bin: bin, Args: args, Dir: dir,
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
					return fmt.Errorf("%w: the etcd on %s is not %s", ErrForeign, e.Addr, name)
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

// ConsulTLS is a dev Consul agent whose HTTP API listens on loopback over
// HTTPS only, with the server certificate of a test's CA, and with ACLs on
// (default policy deny): only Token, the initial management token, may do
// anything.
type ConsulTLS struct {
	*Process
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
	return OnFreePorts(tb.Context(), 4, func(ports []int) (*ConsulTLS, error) {
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
		c.Process, err = Start(tb.Context(), Config{Name: "consul", Bin: bin, Args: args, Dir: dir,
			Ready: func(ctx context.Context) error {
				q := (&api.QueryOptions{}).WithContext(ctx)
				var self map[string]map[string]any
				if _, err := client.Raw().Query("/v1/agent/self", &self, q); err != nil {
					return err
				}
				if got := self["Config"]["NodeName"]; got != node {
					return fmt.Errorf("%w: the consul agent on %s is node %v, not %s", ErrForeign, c.HTTPSAddr, got, node)
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
