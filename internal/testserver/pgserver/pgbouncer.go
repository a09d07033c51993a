package pgserver

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tenure-dev/tenure/internal/testserver"

	"github.com/jackc/pgx/v5"

	"github.com/tenure-dev/tenure/internal/testutil"
)

// PgBouncerBinEnv names the environment variable that names the pgbouncer
// binary [StartPgBouncer] runs.
const PgBouncerBinEnv = "TENURE_PGBOUNCER_BIN"

// PgBouncer is a pgbouncer in transaction mode in front of the test
// server ([testutil.PostgresURL]), on a loopback port of its own.
type PgBouncer struct {
	*testserver.Process
	// Port is the port it listens on.
	Port int
	// direct is the test server's URL, which URL rewrites.
	direct *url.URL
}

// OwnPgBouncer starts a pgbouncer for tb alone ([StartPgBouncer]) and
// stops it when tb ends. When there is no binary, or it does not start, it
// stops tb through [testutil.NeedServer].
func OwnPgBouncer(tb testing.TB) *PgBouncer {
	tb.Helper()
	b, err := StartPgBouncer(tb.Context())
	testutil.NeedServer(tb, "pgbouncer (install Debian's pgbouncer, or set "+PgBouncerBinEnv+")", err)
	tb.Cleanup(func() {
		if err := b.Stop(); err != nil {
			tb.Errorf("testserver: stop pgbouncer on port %d: %v", b.Port, err)
		}
	})
	return b
}

// StartPgBouncer starts pgbouncer in transaction mode (pool_mode =
// transaction, auth_type = trust) on a free loopback port, with one
// database: the test server's ([testutil.PostgresURL]), under the same
// name. Run as root, it runs as the postgres user, as pgbouncer refuses
// root.
func StartPgBouncer(ctx context.Context) (*PgBouncer, error) {
	bin, err := testserver.Binary(PgBouncerBinEnv, "pgbouncer", "apt-get install pgbouncer")
	if err != nil {
		return nil, err
	}
	direct, err := url.Parse(testutil.PostgresURL())
	if err != nil {
		return nil, fmt.Errorf("testserver: parse %q: %w", testutil.PostgresURL(), err)
	}
	cfg, err := pgx.ParseConfig(testutil.PostgresURL())
	if err != nil {
		return nil, fmt.Errorf("testserver: parse %q: %w", testutil.PostgresURL(), err)
	}
	cred, uid, gid, err := asPostgres()
	if err != nil {
		return nil, err
	}
	return testserver.OnFreePorts(ctx, 1, func(ports []int) (*PgBouncer, error) {
		dir, err := os.MkdirTemp("", "tenure-pgbouncer-")
		if err != nil {
			return nil, err
		}
		if uid >= 0 {
			if err := os.Chown(dir, uid, gid); err != nil {
				return nil, errors.Join(err, os.RemoveAll(dir))
			}
		}
		ini := filepath.Join(dir, "pgbouncer.ini")
		users := filepath.Join(dir, "userlist.txt")
		if err := errors.Join(
			os.WriteFile(ini, []byte(pgBouncerINI(cfg, ports[0], users)), 0o644),
			os.WriteFile(users, []byte(strconv.Quote(cfg.User)+` ""`+"\n"), 0o644),
		); err != nil {
			return nil, errors.Join(err, os.RemoveAll(dir))
		}
		b := &PgBouncer{Port: ports[0], direct: direct}
		b.Process, err = testserver.Start(ctx, testserver.Config{
			Name: "pgbouncer", Bin: bin, Args: []string{ini}, Dir: dir,
			Ready: func(ctx context.Context) error { return b.ready(ctx, cfg.User, users) },
			Prepare: func(cmd *exec.Cmd) {
				if cred != nil {
					cmd.SysProcAttr.Credential = cred
				}
			},
		})
		if err != nil {
			return nil, err
		}
		return b, nil
	})
}

// pgBouncerINI is the configuration of a pgbouncer on port in front of the
// server cfg names.
func pgBouncerINI(cfg *pgx.ConnConfig, port int, users string) string {
	return fmt.Sprintf(`[databases]
%s = host=%s port=%d dbname=%s

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
admin_users = %s
pool_mode = transaction
max_client_conn = 500
default_pool_size = 20
`, cfg.Database, cfg.Host, cfg.Port, cfg.Database, port, users, cfg.User)
}

// URL is the test server's URL with pgbouncer's address in place of the
// server's, and query added to its parameters ("default_query_exec_mode=exec").
func (b *PgBouncer) URL(query string) string {
	u := *b.direct
	u.Host = "127.0.0.1:" + strconv.Itoa(b.Port)
	if query != "" {
		if u.RawQuery != "" {
			u.RawQuery += "&"
		}
		u.RawQuery += query
	}
	return u.String()
}

// ready asks pgbouncer's admin console which auth_file it read: another
// pgbouncer on the port read another.
func (b *PgBouncer) ready(ctx context.Context, user, users string) error {
	conn, err := pgx.Connect(ctx, fmt.Sprintf("host=127.0.0.1 port=%d user=%s dbname=pgbouncer sslmode=disable default_query_exec_mode=simple_protocol", b.Port, user))
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	rows, err := conn.Query(ctx, "SHOW CONFIG")
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			return err
		}
		if len(vals) < 2 || fmt.Sprint(vals[0]) != "auth_file" {
			continue
		}
		if got := fmt.Sprint(vals[1]); got != users {
			return fmt.Errorf("%w: the pgbouncer on port %d reads %s, not %s", testserver.ErrForeign, b.Port, got, users)
		}
		return nil
	}
	if err := rows.Err(); err != nil {
		return err
	}
	return fmt.Errorf("testserver: pgbouncer's SHOW CONFIG has no auth_file: %s", strings.TrimSpace(b.LogTail()))
}
