package testserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tenure-dev/tenure/internal/testutil"
)

// PostgresNode is one server of a [PostgresPair].
type PostgresNode struct {
	*Process
	Port int
	// URL reaches the node as the superuser postgres, database postgres.
	URL string
}

// PostgresPair is a private PostgreSQL primary and a standby that
// streams its WAL asynchronously (the default): a commit on the primary
// returns before the standby has it, so a failover can lose the last
// commits. Both run as the postgres user, with trust authentication on
// loopback, data in one temporary directory.
type PostgresPair struct {
	Primary, Standby *PostgresNode
	dir              string
}

// OwnPostgresPair starts a primary and a standby for tb alone (initdb,
// then pg_basebackup -R) and stops both when tb ends. When the binaries
// are missing or a server does not start, it stops tb through
// [testutil.NeedServer].
func OwnPostgresPair(tb testing.TB) *PostgresPair {
	tb.Helper()
	p, err := startPostgresPair(tb.Context())
	testutil.NeedServer(tb, "a private PostgreSQL primary and standby (initdb, pg_basebackup and postgres in "+postgresBinDir()+"; set "+PostgresBinDirEnv+")", err)
	tb.Cleanup(func() {
		if err := p.stop(); err != nil {
			tb.Errorf("testserver: stop the postgres pair: %v", err)
		}
	})
	return p
}

func startPostgresPair(ctx context.Context) (*PostgresPair, error) {
	bin := postgresBinDir()
	cred, uid, gid, err := asPostgres()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "tenure-pgpair-")
	if err != nil {
		return nil, err
	}
	p := &PostgresPair{dir: dir}
	if uid >= 0 {
		err = os.Chown(dir, uid, gid)
	}
	// Each node has a directory of its own (its data, socket and log).
	primaryDir, standbyDir := filepath.Join(dir, "primary"), filepath.Join(dir, "standby")
	for _, d := range []string{primaryDir, standbyDir} {
		if err == nil {
			err = os.Mkdir(d, 0o700)
		}
		if err == nil && uid >= 0 {
			err = os.Chown(d, uid, gid)
		}
	}
	if err == nil {
		err = runPostgresTool(bin, dir, cred, "initdb", "-D", filepath.Join(primaryDir, "data"), "-U", "postgres",
			"--auth-local=trust", "--auth-host=trust", "--no-sync", "-E", "UTF8", "--locale=C")
	}
	if err != nil {
		return nil, errors.Join(err, os.RemoveAll(dir))
	}
	p.Primary, err = startPostgresNode(ctx, bin, primaryDir, cred)
	if err != nil {
		return nil, errors.Join(err, os.RemoveAll(dir))
	}
	err = runPostgresTool(bin, dir, cred, "pg_basebackup", "-h", "127.0.0.1", "-p", fmt.Sprint(p.Primary.Port),
		"-U", "postgres", "-D", filepath.Join(standbyDir, "data"), "-R", "-X", "stream", "--no-sync")
	if err == nil {
		p.Standby, err = startPostgresNode(ctx, bin, standbyDir, cred)
	}
	if err != nil {
		return nil, errors.Join(err, p.stop())
	}
	return p, nil
}

// startPostgresNode starts the server of dir/data on a free port, its
// socket and log in dir.
func startPostgresNode(ctx context.Context, bin, dir string, cred *syscall.Credential) (*PostgresNode, error) {
	return OnFreePorts(ctx, 1, func(ports []int) (*PostgresNode, error) {
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

// Promote makes the standby a primary (pg_promote) and returns once it
// accepts writes.
func (p *PostgresPair) Promote(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, p.Standby.URL)
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

// stop kills both servers and removes their data.
func (p *PostgresPair) stop() error {
	var errs []error
	for _, n := range []*PostgresNode{p.Primary, p.Standby} {
		if n != nil {
			errs = append(errs, n.Stop())
		}
	}
	return errors.Join(append(errs, os.RemoveAll(p.dir))...)
}
