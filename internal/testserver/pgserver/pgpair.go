package pgserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/internal/testserver"

	"github.com/jackc/pgx/v5"

	"github.com/tenure-dev/tenure/internal/testutil"
)

// PostgresNode is one server of a [PostgresPair].
type PostgresNode struct {
	*testserver.Process
	Port int
	// URL reaches the node as the superuser postgres, database postgres.
	URL string
}

// Addr is the node's host:port.
func (n *PostgresNode) Addr() string { return fmt.Sprintf("127.0.0.1:%d", n.Port) }

// PostgresPair is a private PostgreSQL primary and a standby that
// streams its WAL asynchronously (the default): a commit on the primary
// returns before the standby has it, so a failover can lose the last
// commits. Both run as the postgres user, with trust authentication on
// loopback, data in one temporary directory, a directory per node.
type PostgresPair struct {
	Primary, Standby *PostgresNode
	dir              string
	bin              string
	cred             *syscall.Credential
	uid, gid         int
	nodes            int // nodes started so far, which names the next one's directory
}

// OwnPostgresPair starts a primary and a standby for tb alone and stops
// both when tb ends. When the binaries are missing or a server does not
// start, it stops tb through [testutil.NeedServer].
func OwnPostgresPair(tb testing.TB) *PostgresPair {
	tb.Helper()
	p, err := StartPostgresPair(tb.Context())
	testutil.NeedServer(tb, "a private PostgreSQL primary and standby (initdb, pg_basebackup and postgres in "+postgresBinDir()+"; set "+PostgresBinDirEnv+")", err)
	tb.Cleanup(func() {
		if err := p.Stop(); err != nil {
			tb.Errorf("testserver: stop the postgres pair: %v", err)
		}
	})
	return p
}

// PostgresPairTools returns nil when the programs a [PostgresPair] runs
// are installed, and otherwise an error that names the missing one.
func PostgresPairTools() error {
	for _, name := range []string{"initdb", "pg_basebackup", "postgres"} {
		if _, err := os.Stat(filepath.Join(postgresBinDir(), name)); err != nil {
			return fmt.Errorf("testserver: %s (set %s to the directory of PostgreSQL's programs): %w", name, PostgresBinDirEnv, err)
		}
	}
	return nil
}

// StartPostgresPair starts a primary (initdb) and a standby of it
// (pg_basebackup -R). [PostgresPair.Stop] stops both.
func StartPostgresPair(ctx context.Context) (*PostgresPair, error) {
	if err := PostgresPairTools(); err != nil {
		return nil, err
	}
	cred, uid, gid, err := asPostgres()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "tenure-pgpair-")
	if err != nil {
		return nil, err
	}
	p := &PostgresPair{dir: dir, bin: postgresBinDir(), cred: cred, uid: uid, gid: gid}
	if uid >= 0 {
		if err := os.Chown(dir, uid, gid); err != nil {
			return nil, errors.Join(err, os.RemoveAll(dir))
		}
	}
	nodeDir, err := p.nodeDir()
	if err == nil {
		err = runPostgresTool(p.bin, dir, cred, "initdb", "-D", filepath.Join(nodeDir, "data"), "-U", "postgres",
			"--auth-local=trust", "--auth-host=trust", "--no-sync", "-E", "UTF8", "--locale=C")
	}
	if err == nil {
		p.Primary, err = startPostgresNode(ctx, p.bin, nodeDir, cred)
	}
	if err == nil {
		p.Standby, err = p.startStandby(ctx)
	}
	if err != nil {
		return nil, errors.Join(err, p.Stop())
	}
	return p, nil
}

// nodeDir makes the directory of the next node (its data, socket and
// log), owned by the user the servers run as.
func (p *PostgresPair) nodeDir() (string, error) {
	p.nodes++
	d := filepath.Join(p.dir, fmt.Sprintf("node%d", p.nodes))
	if err := os.Mkdir(d, 0o700); err != nil {
		return "", err
	}
	if p.uid >= 0 {
		if err := os.Chown(d, p.uid, p.gid); err != nil {
			return "", err
		}
	}
	return d, nil
}

// startStandby copies the primary (pg_basebackup -R, which also writes
// how to stream from it) into a new node and starts it. The copy starts
// with a fast checkpoint: a spread one takes up to minutes.
func (p *PostgresPair) startStandby(ctx context.Context) (*PostgresNode, error) {
	d, err := p.nodeDir()
	if err != nil {
		return nil, err
	}
	if err := runPostgresTool(p.bin, p.dir, p.cred, "pg_basebackup", "-h", "127.0.0.1", "-p", fmt.Sprint(p.Primary.Port),
		"-U", "postgres", "-D", filepath.Join(d, "data"), "-R", "-X", "stream", "--checkpoint=fast", "--no-sync"); err != nil {
		return nil, err
	}
	return startPostgresNode(ctx, p.bin, d, p.cred)
}

// startPostgresNode starts the server of dir/data on a free port, its
// socket and log in dir.
func startPostgresNode(ctx context.Context, bin, dir string, cred *syscall.Credential) (*PostgresNode, error) {
	return testserver.OnFreePorts(ctx, 1, func(ports []int) (*PostgresNode, error) {
		pr, err := startPostgresProcess(ctx, bin, dir, filepath.Join(dir, "data"), ports[0], cred)
		if err != nil {
			return nil, err
		}
		return &PostgresNode{Process: pr, Port: ports[0],
			URL: fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", ports[0])}, nil
	})
}

// WaitReplayed waits until the standby has replayed everything the
// primary has written so far.
func (p *PostgresPair) WaitReplayed(ctx context.Context) error {
	primary, err := pgx.Connect(ctx, p.Primary.URL)
	if err != nil {
		return err
	}
	defer func() { _ = primary.Close(context.WithoutCancel(ctx)) }()
	var lsn string
	if err := primary.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&lsn); err != nil {
		return err
	}
	standby, err := pgx.Connect(ctx, p.Standby.URL)
	if err != nil {
		return err
	}
	defer func() { _ = standby.Close(context.WithoutCancel(ctx)) }()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		var done bool
		if err := standby.QueryRow(ctx, "SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn", lsn).Scan(&done); err != nil {
			return err
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("testserver: the standby did not replay up to %s: %w", lsn, ctx.Err())
		case <-tick.C:
		}
	}
}

// Failover is what an operator's failover does when the primary is lost:
// it kills the primary (its data is dropped), starts the standby again
// with the WAL it has (whether it was up or down), promotes it
// (pg_promote) and makes it the primary. Whatever the old primary
// committed that the standby had not received is gone: stop the standby
// for a while first ([Process.Kill]) to make it lag. The pair has no
// standby until [PostgresPair.StartStandby].
func (p *PostgresPair) Failover(ctx context.Context) error {
	if p.Standby == nil {
		return errors.New("testserver: no standby to fail over to")
	}
	if err := p.Primary.Stop(); err != nil {
		return fmt.Errorf("testserver: remove the old primary: %w", err)
	}
	if err := p.Standby.Restart(ctx); err != nil {
		return fmt.Errorf("testserver: start the standby: %w", err)
	}
	if err := promote(ctx, p.Standby.URL); err != nil {
		return err
	}
	p.Primary, p.Standby = p.Standby, nil
	return nil
}

// StartStandby copies a new standby from the primary after a
// [PostgresPair.Failover].
func (p *PostgresPair) StartStandby(ctx context.Context) error {
	if p.Standby != nil {
		return errors.New("testserver: the pair has a standby already")
	}
	standby, err := p.startStandby(ctx)
	if err != nil {
		return fmt.Errorf("testserver: a new standby of the promoted primary: %w", err)
	}
	p.Standby = standby
	return nil
}

// promote makes the standby at url a primary and returns once it accepts
// writes.
func promote(ctx context.Context, url string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	var ok bool
	if err := conn.QueryRow(ctx, "SELECT pg_promote(true, 60)").Scan(&ok); err != nil {
		return fmt.Errorf("testserver: promote the standby: %w", err)
	}
	if !ok {
		return errors.New("testserver: the standby was not promoted within 60 s")
	}
	return nil
}

// Stop kills both servers and removes their data.
func (p *PostgresPair) Stop() error {
	var errs []error
	for _, n := range []*PostgresNode{p.Primary, p.Standby} {
		if n != nil {
			errs = append(errs, n.Stop())
		}
	}
	return errors.Join(append(errs, os.RemoveAll(p.dir))...)
}
