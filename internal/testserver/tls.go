package testserver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

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
	pw := randomHex(16)
	data := filepath.Join(dir, "data")
	err = errors.Join(own(dir),
		copyFile(srv.CertFile, filepath.Join(dir, "server.crt")),
		copyFile(srv.KeyFile, filepath.Join(dir, "server.key")),
		copyFile(ca.CertFile, filepath.Join(dir, "ca.crt")),
		os.WriteFile(filepath.Join(dir, "pwfile"), []byte(pw+"\n"), 0o600), own(filepath.Join(dir, "pwfile")))
	if err == nil {
		cmd := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "--auth-local=trust",
			"--auth-host=reject", "--no-sync", "-E", "UTF8", "--locale=C")
		cmd.Dir = dir
		if cred != nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		}
		if out, ierr := cmd.CombinedOutput(); ierr != nil {
			err = fmt.Errorf("testserver: initdb: %w: %s", ierr, out)
		}
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
		p.Process, err = startPostgresProcess(tb.Context(), bin, dir, data, p.Port, cred)
		if err != nil {
			return nil, err
		}
		if err := p.setup(tb.Context()); err != nil {
			return nil, errors.Join(err, p.Stop())
		}
		return p, nil
	})
}

func startPostgresProcess(ctx context.Context, bin, dir, data string, port int, cred *syscall.Credential) (*Process, error) {
	args := []string{"-D", data, "-p", strconv.Itoa(port), "-k", dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "ssl=on",
		"-c", "ssl_cert_file=" + filepath.Join(dir, "server.crt"),
		"-c", "ssl_key_file=" + filepath.Join(dir, "server.key"),
		"-c", "ssl_ca_file=" + filepath.Join(dir, "ca.crt"),
		"-c", "password_encryption=scram-sha-256"}
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
	pw := randomHex(16)
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
