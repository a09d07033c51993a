package pgserver

import (
	"context"
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

	"github.com/jackc/pgx/v5"

	"github.com/tenure-dev/tenure/internal/testserver"
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
	*testserver.Process
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
	return testserver.OnFreePorts(tb.Context(), 1, func(ports []int) (*PostgresTLS, error) {
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
func startPostgresProcess(ctx context.Context, bin, dir, data string, port int, cred *syscall.Credential, extra ...string) (*testserver.Process, error) {
	args := append([]string{"-D", data, "-p", strconv.Itoa(port), "-k", dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off"}, extra...)
	var pr *testserver.Process
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
			return fmt.Errorf("%w: the postgres on port %d serves %s, not %s", testserver.ErrForeign, port, got, data)
		}
		return nil
	}
	pr, err := testserver.Start(ctx, testserver.Config{
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
