package chaos

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/tenure-dev/tenure/store"

	"github.com/go-sql-driver/mysql"

	"github.com/tenure-dev/tenure"
	"github.com/tenure-dev/tenure/fence/mysqlfence"
	"github.com/tenure-dev/tenure/internal/testserver/mysqlserver"
	"github.com/tenure-dev/tenure/store/mysqlstore"
)

// The mysql cell keeps its leases and both chains in the MySQL/MariaDB
// database of TENURE_TEST_MYSQL_URL (default
// mysql://root@127.0.0.1:3306/test), under a table prefix of its own,
// reached through each worker's proxy; the fenced chain is written in
// mysqlfence.StrictTx, the strict check on the lease row, so clones are in
// play. The server is the machine's, shared: the nemesis does not restart
// it, and does not kill sessions (cut and lost replies stand in for that).

// mysqlConfig returns the driver configuration of the cell's server
// reached at addr (a proxy; empty: the server itself).
func mysqlConfig(raw, addr string) (*mysql.Config, error) {
	cfg, err := mysqlserver.ParseMySQLURL(raw)
	if err != nil {
		return nil, fmt.Errorf("chaos: %w", err)
	}
	if addr != "" {
		cfg.Addr = addr
	}
	cfg.Timeout = 2 * time.Second
	cfg.Logger = &mysql.NopLogger{}
	return cfg, nil
}

func openMySQL(ctx context.Context, raw, addr string) (*sql.DB, error) {
	cfg, err := mysqlConfig(raw, addr)
	if err != nil {
		return nil, err
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("chaos: mysql: %w", err)
	}
	db := sql.OpenDB(conn)
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("chaos: mysql: %w", err)
	}
	return db, nil
}

// openMySQLWorker is openWorker for the mysql cell.
func openMySQLWorker(ctx context.Context, sp spec) (store.Store, resource, func(), error) {
	db, err := openMySQL(ctx, sp.MySQLURL, sp.StoreAddr)
	if err != nil {
		return nil, nil, nil, err
	}
	st, err := mysqlstore.New(db, mysqlstore.Config{TablePrefix: sp.Prefix})
	if err != nil {
		_ = db.Close()
		return nil, nil, nil, err
	}
	res, err := newMySQLResource(db, sp.Prefix)
	if err != nil {
		_ = db.Close()
		return nil, nil, nil, err
	}
	return st, res, func() { _ = st.Close(); _ = db.Close() }, nil
}

// setupMySQL migrates the cell's prefix, creates its chains and makes the
// harness's own store and reader. It returns the address the proxies
// forward to.
func (c *cell) setupMySQL(ctx context.Context, id string, cleanups *[]func()) (string, error) {
	c.spec.MySQLURL = mysqlserver.MySQLURL()
	c.spec.Prefix = "chaos_" + id + "_"
	cfg := mysqlstore.Config{TablePrefix: c.spec.Prefix}
	db, err := openMySQL(ctx, c.spec.MySQLURL, "")
	if err != nil {
		return "", err
	}
	*cleanups = append(*cleanups, func() {
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = mysqlserver.MySQLDropObjects(dctx, db, cfg)
		for _, t := range []string{resFenced, resTwin} {
			_, _ = db.ExecContext(dctx, "DROP TABLE IF EXISTS "+mysqlstore.Quote("", c.spec.Prefix+t))
		}
		_ = db.Close()
	})
	st, err := mysqlstore.New(db, cfg)
	if err != nil {
		return "", err
	}
	if err := st.Migrate(ctx); err != nil {
		return "", fmt.Errorf("chaos: migrate: %w", err)
	}
	for _, t := range []string{resFenced, resTwin} {
		if _, err := db.ExecContext(ctx, "CREATE TABLE "+mysqlstore.Quote("", c.spec.Prefix+t)+
			" (n BIGINT PRIMARY KEY, token BIGINT NOT NULL, wid VARCHAR(255) NOT NULL) ENGINE = InnoDB"); err != nil {
			return "", fmt.Errorf("chaos: create tables: %w", err)
		}
	}
	res, err := newMySQLResource(db, c.spec.Prefix)
	if err != nil {
		return "", err
	}
	c.store, c.reader = st, res
	mc, err := mysqlConfig(c.spec.MySQLURL, "")
	if err != nil {
		return "", err
	}
	return mc.Addr, nil
}

// mysqlResource keeps both chains in InnoDB tables (n primary key). A
// write reads the chain's head and inserts the next link; a second write
// computed from the same head overwrites the first (a lost update), which
// the checker sees as an acknowledged write gone missing.
type mysqlResource struct {
	db     *sql.DB
	fencer *mysqlfence.Fencer
	tables map[string]string
}

func newMySQLResource(db *sql.DB, prefix string) (*mysqlResource, error) {
	f, err := mysqlfence.New(mysqlstore.Config{TablePrefix: prefix})
	if err != nil {
		return nil, err
	}
	return &mysqlResource{db: db, fencer: f, tables: map[string]string{
		resFenced: mysqlstore.Quote("", prefix+resFenced), resTwin: mysqlstore.Quote("", prefix+resTwin),
	}}, nil
}

func (r *mysqlResource) begin(context.Context, *tenure.Lease, store.Token) error { return nil }

// link reads the head of a chain and writes the next link.
func (r *mysqlResource) link(ctx context.Context, tx *sql.Tx, res string, tok store.Token, wid string) error {
	var head int64
	if err := tx.QueryRowContext(ctx, "SELECT COALESCE(MAX(n), 0) FROM "+r.tables[res]).Scan(&head); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, "INSERT INTO "+r.tables[res]+" (n, token, wid) VALUES (?, ?, ?) ON DUPLICATE KEY UPDATE token = VALUES(token), wid = VALUES(wid)",
		head+1, int64(tok), wid)
	return err
}

func (r *mysqlResource) fenced(ctx context.Context, l *tenure.Lease, tok store.Token, wid string) error {
	return r.fencer.StrictTx(ctx, r.db, l, func(ctx context.Context, tx *sql.Tx) error {
		return r.link(ctx, tx, resFenced, tok, wid)
	})
}

func (r *mysqlResource) twin(ctx context.Context, tok store.Token, wid string) error {
	tx, err := r.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := r.link(ctx, tx, resTwin, tok, wid); err != nil {
		return errors.Join(err, tx.Rollback())
	}
	return tx.Commit()
}

func (r *mysqlResource) rows(ctx context.Context, res string) ([]Row, error) {
	rows, err := r.db.QueryContext(ctx, "SELECT n, token, wid FROM "+r.tables[res]+" ORDER BY n")
	if err != nil {
		return nil, fmt.Errorf("chaos: read %s: %w", res, err)
	}
	defer func() { _ = rows.Close() }()
	var out []Row
	for rows.Next() {
		var row Row
		if err := rows.Scan(&row.N, &row.Token, &row.WID); err != nil {
			return nil, fmt.Errorf("chaos: read %s: %w", res, err)
		}
		row.Writer, _ = splitWID(row.WID)
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("chaos: read %s: %w", res, err)
	}
	return out, nil
}

func (r *mysqlResource) close() { _ = r.db.Close() }
