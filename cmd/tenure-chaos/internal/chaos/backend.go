package chaos

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/tenure-dev/tenure/store"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/tenure-dev/tenure"
	"github.com/tenure-dev/tenure/fence/pgfence"
	"github.com/tenure-dev/tenure/fence/redisfence"
	"github.com/tenure-dev/tenure/store/consulstore"
	"github.com/tenure-dev/tenure/store/etcdstore"
	"github.com/tenure-dev/tenure/store/pgstore"
	"github.com/tenure-dev/tenure/store/redisstore"
)

// cellBackend is one backend the harness runs cells on: the faults its
// cells get, how a cell prepares its store and how a worker reaches it.
// Every backend is one value of [cellBackends].
type cellBackend struct {
	name string
	// run reports that the cell's workers are tenure run processes: the
	// faults hit tenure run, the slot's main process, and faults is the
	// whole list.
	run bool
	// faults are the faults the cell gets besides the common ones
	// ([commonFaults]), each repeated by weight, in the order the seeded
	// schedule draws from.
	faults []string
	// setup prepares the cell: namespaces, migrations, tables, servers,
	// the harness's own store and reader. It returns the addresses the
	// proxies forward to (one per member of a clustered store); cleanups
	// gathers what undoes it.
	setup func(c *cell, ctx context.Context, id string, cleanups *[]func()) ([]string, error)
	// open connects a worker to its store (through its proxy) and its
	// resource; nil when the cell's workers are not tenure-chaos workers.
	open func(ctx context.Context, sp spec) (store.Store, resource, func(), error)
}

// Faults that recur in [cellBackends].
var (
	// clones: a strict fence tells clones apart; a token fence cannot
	// (tokenres.go), so cells fenced by the token alone get none.
	clones = []string{faultClone, faultClone}
	// clusterFaults hit a member of a cluster at a time, never the whole
	// cluster, in place of a restart of the store. The holders of a
	// cluster write seldom (every write crosses the cluster, and each
	// fault of its leader stalls them for seconds), so a pause seldom
	// lands between a lease check and a write; a clone writes whatever the
	// timing: two more keep the twin exercised.
	clusterFaults = []string{faultLeaderPause, faultLeaderPause, faultLeaderPause, faultLeaderKill, faultLeaderKill, faultFollowerPause, faultFollowerKill,
		faultClone, faultClone, faultClone, faultClone}
)

// cellBackends is the one table of the backends the harness runs cells
// on, in the order of a full run. faultTerminate goes to the cells whose
// workers hold PostgreSQL sessions; faultRestart to those whose server the
// harness starts, so it can restart it (not the test environment's
// PostgreSQL and MySQL); the postgres-failover cell's primary dies and its
// standby takes over instead.
var cellBackends = []*cellBackend{
	{name: "postgres", faults: append([]string{faultTerminate}, clones...), setup: (*cell).setupPostgres, open: openPostgresWorker},
	{name: "redis", faults: append([]string{faultRestart}, clones...), setup: (*cell).setupRedis, open: openRedisWorker},
	{name: "etcd", faults: append([]string{faultRestart}, clones...), setup: withServer((*cell).setupEtcd, startEtcd), open: openEtcdWorker},
	{name: "consul", faults: append([]string{faultRestart}, clones...), setup: withServer((*cell).setupConsul, startConsul), open: openConsulWorker},
	{name: "mysql", faults: clones, setup: oneTarget((*cell).setupMySQL), open: openMySQLWorker},
	{name: "k8s", faults: []string{faultRestart}, setup: oneTarget((*cell).setupKube), open: openKubeWorker},
	{name: "nats", faults: []string{faultRestart}, setup: oneTarget((*cell).setupNats), open: openNatsWorker},
	{name: "postgres-failover", faults: []string{faultTerminate, faultFailover, faultFailover, faultFailover},
		setup: oneTarget((*cell).setupPostgresFailover), open: openPostgresFailoverWorker},
	{name: "etcd-cluster", faults: clusterFaults, setup: withServer((*cell).setupEtcd, startEtcdCluster), open: openEtcdWorker},
	{name: "consul-cluster", faults: clusterFaults, setup: withServer((*cell).setupConsul, startConsulCluster), open: openConsulWorker},
	{name: runBackend, run: true, faults: runFaults, setup: (*cell).setupPostgres},
	slotsCell,
}

// Backends the harness runs cells on: the names of [cellBackends].
var Backends = func() []string {
	names := make([]string, len(cellBackends))
	for i, b := range cellBackends {
		names[i] = b.name
	}
	return names
}()

// backendNamed returns the backend of the name, or an error matching
// [store.ErrInvalid] that lists them.
func backendNamed(name string) (*cellBackend, error) {
	for _, b := range cellBackends {
		if b.name == name {
			return b, nil
		}
	}
	return nil, fmt.Errorf("chaos: %w: unknown backend %q (want one of %v)", store.ErrInvalid, name, Backends)
}

// oneTarget adapts a setup that returns one address.
func oneTarget(setup func(*cell, context.Context, string, *[]func()) (string, error)) func(*cell, context.Context, string, *[]func()) ([]string, error) {
	return func(c *cell, ctx context.Context, id string, cleanups *[]func()) ([]string, error) {
		target, err := setup(c, ctx, id, cleanups)
		if err != nil {
			return nil, err
		}
		return []string{target}, nil
	}
}

// withServer adapts a setup that starts its servers with start.
func withServer(setup func(*cell, context.Context, string, *[]func(), func(context.Context) (*server, error)) ([]string, error),
	start func(context.Context) (*server, error)) func(*cell, context.Context, string, *[]func()) ([]string, error) {
	return func(c *cell, ctx context.Context, id string, cleanups *[]func()) ([]string, error) {
		return setup(c, ctx, id, cleanups, start)
	}
}

// spec is what a worker process needs to reach its cell: passed as JSON
// on its command line, so a forked child inherits it with the rest.
type spec struct {
	Backend   string `json:"backend"`
	StoreAddr string `json:"store"` // the slot's faultnet proxy (of the first member, on a cluster)
	// StoreAddrs are the slot's proxies, one per member of the store, in
	// member order: StoreAddr alone for a single server.
	StoreAddrs []string `json:"stores"`
	PGURL      string   `json:"pg,omitempty"`
	RedisAddr  string   `json:"redis,omitempty"`
	MySQLURL   string   `json:"mysql,omitempty"`
	Schema     string   `json:"schema,omitempty"`
	Prefix     string   `json:"prefix,omitempty"`
	Lease      string   `json:"lease"`
	// LeaseSlots, when positive, makes Lease a semaphore of that many
	// slots, which the workers campaign for (the postgres-slots cell).
	LeaseSlots int           `json:"leaseSlots,omitempty"`
	TTL        time.Duration `json:"ttl"`
	Gap        time.Duration `json:"gap"`
	Work       time.Duration `json:"work"`
	History    string        `json:"history"`
	Slot       int           `json:"slot"`
	App        string        `json:"app"`

	// DataPrefix is where the etcd, consul, k8s and nats cells keep their chains.
	DataPrefix string `json:"data,omitempty"`
	// KubeToken and KubeCA are the k8s cell's credentials: a bearer token
	// and the file of the certificate its API server presents.
	KubeToken string `json:"kubeToken,omitempty"`
	KubeCA    string `json:"kubeCA,omitempty"`
}

// resource is the data the workers protect: a fenced copy and an unfenced
// twin, each a read-modify-write chain of writes numbered 1, 2, 3, ...
type resource interface {
	// begin is called once per tenure, before its first write.
	begin(ctx context.Context, l *tenure.Lease, tok store.Token) error
	// fenced appends wid to the fenced chain, presenting tok.
	fenced(ctx context.Context, l *tenure.Lease, tok store.Token, wid string) error
	// twin does the same work on the twin with no check at all.
	twin(ctx context.Context, tok store.Token, wid string) error
	// rows reads a chain back (resFenced or resTwin).
	rows(ctx context.Context, res string) ([]Row, error)
	close()
}

// pgURL returns u pointed at addr (host:port) with an application name.
func pgURL(u, addr, app string) (string, error) {
	p, err := url.Parse(u)
	if err != nil {
		return "", fmt.Errorf("chaos: postgres url: %w", err)
	}
	if addr != "" {
		p.Host = addr
	}
	q := p.Query()
	q.Set("application_name", app)
	q.Set("connect_timeout", "2")
	p.RawQuery = q.Encode()
	return p.String(), nil
}

func pgHost(u string) (string, error) {
	p, err := url.Parse(u)
	if err != nil {
		return "", fmt.Errorf("chaos: postgres url: %w", err)
	}
	host := p.Host
	if !strings.Contains(host, ":") {
		host += ":5432"
	}
	return host, nil
}

// openWorker connects a worker to its store (through its proxy) and its
// resource. The postgres cell keeps the leases and the resource in one
// database, reached through the proxy, and writes with the strict check
// ([pgfence.StrictTx]); the redis cell writes a hash on its store's server
// with the strict check too ([redisfence.StrictHSet]); the etcd and consul
// cells write keys on their store's server, through the same proxy, with
// the strict check too ([etcdstore.Store.StrictTxn],
// [consulstore.Store.StrictTxn]).
func openWorker(ctx context.Context, sp spec) (store.Store, resource, func(), error) {
	b, err := backendNamed(sp.Backend)
	if err != nil {
		return nil, nil, nil, err
	}
	if b.open == nil {
		return nil, nil, nil, fmt.Errorf("chaos: %w: the %s cell has no tenure-chaos workers", store.ErrInvalid, b.name)
	}
	return b.open(ctx, sp)
}

// openPostgresWorker is openWorker for the postgres cell.
func openPostgresWorker(ctx context.Context, sp spec) (store.Store, resource, func(), error) {
	pool, st, err := pgPoolStore(ctx, sp.PGURL, sp.StoreAddr, sp.App, sp.Schema)
	if err != nil {
		return nil, nil, nil, err
	}
	res, err := newPGResource(pool, sp.Schema)
	if err != nil {
		pool.Close()
		return nil, nil, nil, err
	}
	return st, res, func() { _ = st.Close(); pool.Close() }, nil
}

// openRedisWorker is openWorker for the redis cell.
func openRedisWorker(_ context.Context, sp spec) (store.Store, resource, func(), error) {
	rdb := redis.NewClient(&redis.Options{Addr: sp.StoreAddr, DialTimeout: time.Second, ContextTimeoutEnabled: true, MaxRetries: -1})
	st, err := redisstore.New(rdb, redisstore.Config{KeyPrefix: sp.Prefix + "lease:"})
	if err != nil {
		_ = rdb.Close()
		return nil, nil, nil, err
	}
	res, err := newRedisResource(sp.RedisAddr, sp.Prefix, sp.Prefix+"lease:")
	if err != nil {
		_ = rdb.Close()
		return nil, nil, nil, err
	}
	return st, res, func() { _ = st.Close(); _ = rdb.Close(); res.close() }, nil
}

// openEtcdWorker is openWorker for the etcd and etcd-cluster cells.
func openEtcdWorker(_ context.Context, sp spec) (store.Store, resource, func(), error) {
	cli, err := etcdClient(sp.StoreAddrs)
	if err != nil {
		return nil, nil, nil, err
	}
	st, err := etcdstore.New(cli, etcdstore.Config{KeyPrefix: sp.Prefix})
	if err != nil {
		_ = cli.Close()
		return nil, nil, nil, err
	}
	res := &etcdResource{cli: cli, st: st, prefix: sp.DataPrefix}
	return st, res, func() { _ = st.Close(); _ = cli.Close() }, nil
}

// openConsulWorker is openWorker for the consul and consul-cluster cells.
func openConsulWorker(_ context.Context, sp spec) (store.Store, resource, func(), error) {
	cli, tr, err := consulClient(sp.StoreAddrs...)
	if err != nil {
		return nil, nil, nil, err
	}
	st, err := consulstore.New(cli, consulstore.Config{KeyPrefix: sp.Prefix, MinSessionTTL: 500 * time.Millisecond})
	if err != nil {
		tr.CloseIdleConnections()
		return nil, nil, nil, err
	}
	res := &consulResource{cli: cli, st: st, prefix: sp.DataPrefix}
	return st, res, func() { _ = st.Close(); tr.CloseIdleConnections() }, nil
}

// etcdClient returns a client of the etcd members at addrs (host:port).
// The client sends its calls to the members in turn (gRPC's round robin).
// With more than one member it pings each connection that has been idle
// for 10 s, the least gRPC allows, and drops a connection whose ping goes
// unanswered for a second, so that a paused member's connection is
// dropped about 11 s into the pause; until then the calls sent to it wait
// for their deadlines.
func etcdClient(addrs []string) (*clientv3.Client, error) {
	cfg := clientv3.Config{DialTimeout: time.Second, Logger: zap.NewNop()}
	for _, a := range addrs {
		cfg.Endpoints = append(cfg.Endpoints, "http://"+a)
	}
	if len(addrs) > 1 {
		cfg.DialKeepAliveTime, cfg.DialKeepAliveTimeout = 10*time.Second, time.Second
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("chaos: etcd client: %w", err)
	}
	return cli, nil
}

// pgResource keeps both chains in PostgreSQL tables (n primary key). A
// write reads the chain's head and inserts the next link; a second write
// computed from the same head overwrites the first (a lost update), which
// the checker sees as an acknowledged write gone missing.
type pgResource struct {
	pool   *pgxpool.Pool
	fencer *pgfence.Fencer
	tables map[string]string
}

func newPGResource(pool *pgxpool.Pool, schema string) (*pgResource, error) {
	f, err := pgfence.New(pgstore.Config{Schema: schema})
	if err != nil {
		return nil, err
	}
	q := pgx.Identifier{schema}.Sanitize()
	return &pgResource{pool: pool, fencer: f, tables: map[string]string{
		resFenced: q + ".chaos_fenced", resTwin: q + ".chaos_twin",
	}}, nil
}

// pgTablesSQL creates the two chains.
func pgTablesSQL(schema string) string {
	q := pgx.Identifier{schema}.Sanitize()
	return fmt.Sprintf(`CREATE TABLE %[1]s.chaos_fenced (n bigint PRIMARY KEY, token bigint NOT NULL, wid text NOT NULL);
CREATE TABLE %[1]s.chaos_twin (n bigint PRIMARY KEY, token bigint NOT NULL, wid text NOT NULL);`, q)
}

func (r *pgResource) begin(context.Context, *tenure.Lease, store.Token) error { return nil }

// link reads the head of a chain and writes the next link.
func (r *pgResource) link(ctx context.Context, tx pgx.Tx, res string, tok store.Token, wid string) error {
	var head int64
	if err := tx.QueryRow(ctx, "SELECT coalesce(max(n), 0) FROM "+r.tables[res]).Scan(&head); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, "INSERT INTO "+r.tables[res]+" (n, token, wid) VALUES ($1, $2, $3) ON CONFLICT (n) DO UPDATE SET token = excluded.token, wid = excluded.wid",
		head+1, int64(tok), wid)
	return err
}

func (r *pgResource) fenced(ctx context.Context, l *tenure.Lease, tok store.Token, wid string) error {
	return r.fencer.StrictTx(ctx, r.pool, l, func(ctx context.Context, tx pgx.Tx) error {
		return r.link(ctx, tx, resFenced, tok, wid)
	})
}

func (r *pgResource) twin(ctx context.Context, tok store.Token, wid string) error {
	return pgx.BeginFunc(ctx, r.pool, func(tx pgx.Tx) error { return r.link(ctx, tx, resTwin, tok, wid) })
}

func (r *pgResource) rows(ctx context.Context, res string) ([]Row, error) {
	rows, err := r.pool.Query(ctx, "SELECT n, token, wid FROM "+r.tables[res]+" ORDER BY n")
	if err != nil {
		return nil, fmt.Errorf("chaos: read %s: %w", res, err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Row, error) {
		var r Row
		err := row.Scan(&r.N, &r.Token, &r.WID)
		r.Writer, _ = splitWID(r.WID)
		return r, err
	})
}

func (r *pgResource) close() { r.pool.Close() }

// hashChains keeps each chain in a Redis hash: field "n" is the head,
// field "w:<n>" the link "token|wid". The twin is written with no check.
type hashChains struct {
	rdb  *redis.Client
	keys map[string]string
}

// newHashChains connects to the Redis at addr and keeps the chains under
// prefix.
func newHashChains(addr, prefix string) hashChains {
	rdb := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: time.Second, ContextTimeoutEnabled: true, MaxRetries: -1})
	return hashChains{rdb: rdb, keys: map[string]string{resFenced: prefix + "fenced", resTwin: prefix + "twin"}}
}

func (h hashChains) head(ctx context.Context, res string) (int64, error) {
	s, err := h.rdb.HGet(ctx, h.keys[res], "n").Result()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(s, 10, 64)
}

// next returns the fields that append wid under tok to a chain whose
// head is n.
func next(n int64, tok store.Token, wid string) map[string]string {
	return map[string]string{"n": strconv.FormatInt(n+1, 10), "w:" + strconv.FormatInt(n+1, 10): tok.String() + "|" + wid}
}

func (h hashChains) twin(ctx context.Context, tok store.Token, wid string) error {
	n, err := h.head(ctx, resTwin)
	if err != nil {
		return err
	}
	return h.rdb.HSet(ctx, h.keys[resTwin], next(n, tok, wid)).Err()
}

func (h hashChains) rows(ctx context.Context, res string) ([]Row, error) {
	m, err := h.rdb.HGetAll(ctx, h.keys[res]).Result()
	if err != nil {
		return nil, fmt.Errorf("chaos: read %s: %w", res, err)
	}
	var out []Row
	for k, v := range m {
		if !strings.HasPrefix(k, "w:") {
			continue
		}
		n, err := strconv.ParseInt(k[2:], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("chaos: %s: bad field %q", res, k)
		}
		tokStr, wid, ok := strings.Cut(v, "|")
		tok, err := strconv.ParseInt(tokStr, 10, 64)
		if !ok || err != nil {
			return nil, fmt.Errorf("chaos: %s: bad link %q", res, v)
		}
		w, _ := splitWID(wid)
		out = append(out, Row{N: n, Token: tok, Writer: w, WID: wid})
	}
	return out, nil
}

func (h hashChains) close() { _ = h.rdb.Close() }

// redisResource keeps the chains in hashes on the cell's own Redis, beside
// its leases. The fenced chain is written with redisfence.StrictHSet, the
// strict check on the lease's own keys, which advances the renewal chain,
// so clones are in play.
type redisResource struct {
	hashChains
	leases redisstore.Keys
}

// newRedisResource connects to the Redis at addr, where the cell's leases
// are kept under leasePrefix and its chains under prefix.
func newRedisResource(addr, prefix, leasePrefix string) (*redisResource, error) {
	leases, err := redisstore.Config{KeyPrefix: leasePrefix}.Keys()
	if err != nil {
		return nil, err
	}
	return &redisResource{hashChains: newHashChains(addr, prefix), leases: leases}, nil
}

func (r *redisResource) begin(context.Context, *tenure.Lease, store.Token) error { return nil }

func (r *redisResource) fenced(ctx context.Context, l *tenure.Lease, tok store.Token, wid string) error {
	n, err := r.head(ctx, resFenced)
	if err != nil {
		return err
	}
	return redisfence.StrictHSet(ctx, r.rdb, r.leases, l, r.keys[resFenced], next(n, tok, wid))
}

// setupPostgres migrates the cell's schema in the PostgreSQL server of
// the test environment, creates its chains and makes the harness's own
// store and reader. It returns the server's address.
func (c *cell) setupPostgres(ctx context.Context, id string, cleanups *[]func()) ([]string, error) {
	c.spec.Schema = "chaos_" + id
	u, err := pgURL(c.cfg.PGURL, "", "chaos_harness_"+id)
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.New(ctx, u)
	if err != nil {
		return nil, fmt.Errorf("chaos: postgres: %w", err)
	}
	c.pgPool = pool
	*cleanups = append(*cleanups, func() {
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = pool.Exec(dctx, "DROP SCHEMA IF EXISTS "+c.spec.Schema+" CASCADE")
		pool.Close()
	})
	ps, err := pgstore.New(pool, pgstore.Config{Schema: c.spec.Schema})
	if err != nil {
		return nil, err
	}
	if err := ps.Migrate(ctx); err != nil {
		return nil, fmt.Errorf("chaos: migrate: %w", err)
	}
	if _, err := pool.Exec(ctx, pgTablesSQL(c.spec.Schema)); err != nil {
		return nil, fmt.Errorf("chaos: create tables: %w", err)
	}
	res, err := newPGResource(pool, c.spec.Schema)
	if err != nil {
		return nil, err
	}
	c.reader, c.store = res, ps
	host, err := pgHost(c.cfg.PGURL)
	if err != nil {
		return nil, err
	}
	return []string{host}, nil
}

// setupRedis starts the cell's redis-server and makes the harness's own
// store and reader. It returns the server's address.
func (c *cell) setupRedis(ctx context.Context, id string, cleanups *[]func()) ([]string, error) {
	c.spec.Prefix = "tenure-chaos:" + id + ":"
	s, err := startRedis(ctx)
	if err != nil {
		return nil, err
	}
	c.server = s
	c.spec.RedisAddr = s.addrs[0]
	*cleanups = append(*cleanups, func() { _ = s.stop() })
	rdb := redis.NewClient(&redis.Options{Addr: s.addrs[0], ContextTimeoutEnabled: true})
	*cleanups = append(*cleanups, func() { _ = rdb.Close() })
	st, err := redisstore.New(rdb, redisstore.Config{KeyPrefix: c.spec.Prefix + "lease:"})
	if err != nil {
		return nil, err
	}
	res, err := newRedisResource(s.addrs[0], c.spec.Prefix, c.spec.Prefix+"lease:")
	if err != nil {
		return nil, err
	}
	*cleanups = append(*cleanups, res.close)
	c.store, c.reader = st, res
	return s.addrs, nil
}

// setupEtcd starts the cell's etcd (one member or a cluster) and makes
// the harness's own store and reader. It returns the members' addresses.
func (c *cell) setupEtcd(ctx context.Context, id string, cleanups *[]func(), start func(context.Context) (*server, error)) ([]string, error) {
	c.spec.Prefix, c.spec.DataPrefix = "chaos/"+id+"/", dataPrefix(id)
	s, err := start(ctx)
	if err != nil {
		return nil, err
	}
	c.server = s
	*cleanups = append(*cleanups, func() { _ = s.stop() })
	cli, err := etcdClient(s.addrs)
	if err != nil {
		return nil, err
	}
	*cleanups = append(*cleanups, func() { _ = cli.Close() })
	st, err := etcdstore.New(cli, etcdstore.Config{KeyPrefix: c.spec.Prefix})
	if err != nil {
		return nil, err
	}
	c.store, c.reader = st, &etcdResource{cli: cli, prefix: c.spec.DataPrefix}
	return s.addrs, nil
}

// setupConsul starts the cell's Consul (one server or a cluster) and
// makes the harness's own store and reader. It returns the servers'
// addresses.
func (c *cell) setupConsul(ctx context.Context, id string, cleanups *[]func(), start func(context.Context) (*server, error)) ([]string, error) {
	c.spec.Prefix, c.spec.DataPrefix = "chaos/"+id+"/", dataPrefix(id)
	s, err := start(ctx)
	if err != nil {
		return nil, err
	}
	c.server = s
	*cleanups = append(*cleanups, func() { _ = s.stop() })
	cli, tr, err := consulClient(s.addrs...)
	if err != nil {
		return nil, err
	}
	*cleanups = append(*cleanups, tr.CloseIdleConnections)
	st, err := consulstore.New(cli, consulstore.Config{KeyPrefix: c.spec.Prefix, MinSessionTTL: 500 * time.Millisecond})
	if err != nil {
		return nil, err
	}
	c.store, c.reader = st, &consulResource{cli: cli, prefix: c.spec.DataPrefix}
	return s.addrs, nil
}
