package main

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/jackc/pgx/v5"

	"github.com/tenure-dev/tenure/store/sqlitestore"
)

// floorOp is a store's cheapest read or write, on a connection of its own:
// what no lock on that store can beat.
type floorOp struct {
	store string
	kind  string // "read" or "write"
	desc  string
	call  func(ctx context.Context) error
}

// floorOps opens the floor operations of the given stores; the returned
// function closes their connections.
func floorOps(ctx context.Context, e *env, stores []string) ([]floorOp, func(), error) {
	var ops []floorOp
	var closers []func()
	closeAll := func() {
		for _, c := range closers {
			c()
		}
	}
	key := "b" + e.runID + "-floor"
	for _, st := range stores {
		switch st {
		case "postgres":
			conn, err := pgx.Connect(ctx, e.pgURL)
			if err != nil {
				closeAll()
				return nil, nil, fmt.Errorf("postgres floor: %w", err)
			}
			closers = append(closers, func() {
				cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_, _ = conn.Exec(cctx, `DELETE FROM tenure_bench_floor WHERE k = $1`, key)
				conn.Close(cctx)
			})
			if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS tenure_bench_floor (k text PRIMARY KEY, v bigint NOT NULL)`); err != nil {
				closeAll()
				return nil, nil, fmt.Errorf("postgres floor table: %w", err)
			}
			var v int64
			ops = append(ops,
				floorOp{st, "read", "SELECT 1 (pgx)", func(ctx context.Context) error {
					_, err := conn.Exec(ctx, `SELECT 1`)
					return err
				}},
				floorOp{st, "write", "one-row upsert, autocommit (pgx)", func(ctx context.Context) error {
					v++
					_, err := conn.Exec(ctx, `INSERT INTO tenure_bench_floor (k, v) VALUES ($1, $2) ON CONFLICT (k) DO UPDATE SET v = excluded.v`, key, v)
					return err
				}})
		case "redis":
			rdb := redisClient(e.redisAddr, nil)
			closers = append(closers, func() {
				rdb.Del(context.Background(), key)
				rdb.Close()
			})
			ops = append(ops,
				floorOp{st, "read", "PING", func(ctx context.Context) error { return rdb.Ping(ctx).Err() }},
				floorOp{st, "write", "SET", func(ctx context.Context) error { return rdb.Set(ctx, key, "v", time.Minute).Err() }})
		case "etcd":
			cli, err := etcdClient(e.etcd, nil)
			if err != nil {
				closeAll()
				return nil, nil, fmt.Errorf("etcd floor: %w", err)
			}
			k := "/tenure-bench-floor/" + e.runID
			closers = append(closers, func() {
				cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_, _ = cli.Delete(cctx, k)
				cli.Close()
			})
			ops = append(ops,
				floorOp{st, "read", "linearizable Get", func(ctx context.Context) error {
					_, err := cli.Get(ctx, k)
					return err
				}},
				floorOp{st, "write", "Put", func(ctx context.Context) error {
					_, err := cli.Put(ctx, k, "v")
					return err
				}})
		case "consul":
			h := newHTTPCounter(nil)
			cli, err := consulClient(e.consul, h)
			if err != nil {
				closeAll()
				return nil, nil, fmt.Errorf("consul floor: %w", err)
			}
			k := "tenure-bench-floor/" + e.runID
			closers = append(closers, func() {
				_, _ = cli.KV().Delete(k, nil)
				h.next.CloseIdleConnections()
			})
			ops = append(ops,
				floorOp{st, "read", "consistent KV GET", func(ctx context.Context) error {
					_, _, err := cli.KV().Get(k, (&api.QueryOptions{RequireConsistent: true}).WithContext(ctx))
					return err
				}},
				floorOp{st, "write", "KV PUT", func(ctx context.Context) error {
					_, err := cli.KV().Put(&api.KVPair{Key: k, Value: []byte("v")}, (&api.WriteOptions{}).WithContext(ctx))
					return err
				}})
		case "sqlite":
			s, err := sqlitestore.Open(ctx, filepath.Join(e.tmpDir, "floor.db"), sqlitestore.Config{})
			if err != nil {
				closeAll()
				return nil, nil, fmt.Errorf("sqlite floor: %w", err)
			}
			closers = append(closers, func() { s.Close() })
			db := s.DB()
			if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS bench_floor (k TEXT PRIMARY KEY, v INTEGER NOT NULL)`); err != nil {
				closeAll()
				return nil, nil, fmt.Errorf("sqlite floor table: %w", err)
			}
			var v int64
			ops = append(ops,
				floorOp{st, "read", "SELECT 1 on the store's own handle", func(ctx context.Context) error { return sqlExec(ctx, db, `SELECT 1`) }},
				floorOp{st, "write", "one-row upsert, autocommit, on the store's own handle (same pragmas)", func(ctx context.Context) error {
					v++
					return sqlExec(ctx, db, `INSERT INTO bench_floor (k, v) VALUES ('k', ?) ON CONFLICT (k) DO UPDATE SET v = excluded.v`, v)
				}})
		}
	}
	return ops, closeAll, nil
}

func sqlExec(ctx context.Context, db *sql.DB, q string, args ...any) error {
	_, err := db.ExecContext(ctx, q, args...)
	return err
}
