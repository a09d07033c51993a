package main

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/tenure-dev/tenure"
	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/etcdstore"
	"github.com/tenure-dev/tenure/store/pgstore"
	"github.com/tenure-dev/tenure/store/redisstore"
	"github.com/tenure-dev/tenure/store/sqlitestore"
)

// tenure is measured as its README shows it: tenure.New(store,
// tenure.Config{Label, TTL}), go client.Run(ctx), Client.Campaign to wait
// for a name, Lease.Release. Each participant has a store of its own over
// connections of its own. Only a crashable participant's store is wrapped
// (crashStore), because a wrapper hides whatever optional interfaces a
// store has beyond store.Notifier, store.Subscriber, store.TTLFloor and
// store.TTLUnit.

// pgTablePrefix keeps the run's leases apart from everything else in the
// database.
const pgTablePrefix = "tenure_bench_"

// tenureBackend opens one kind of tenure store.
type tenureBackend struct {
	store string
	// open returns a store over connections of its own (a pool of conns
	// where the store has one, 2 when 0), and what closes them; c counts
	// the wire.
	open func(ctx context.Context, c *counter, conns int32) (store.Store, func(), error)
	// wire says whether open counts on the wire; otherwise store calls are
	// counted.
	wire     bool
	settings string
	cleanup  func(ctx context.Context)
	// tableStats, where the store has tables (PostgreSQL), reads the lease
	// table's cumulative statistics.
	tableStats func(ctx context.Context) (tableStats, error)
}

// tableStats are PostgreSQL's counters of a table (pg_stat_user_tables);
// the server updates them a few seconds late.
type tableStats struct {
	Updated, HOTUpdated, Dead int64
}

func pgPool(ctx context.Context, url string, c *counter, conns int32) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("-pg %q: %w", url, err)
	}
	cfg.ConnConfig.DialFunc = countingDialer(c, pgScanner)
	cfg.ConnConfig.RuntimeParams["application_name"] = "tenure-bench"
	cfg.MaxConns = max(conns, 2)
	return pgxpool.NewWithConfig(ctx, cfg)
}

func tenurePG(ctx context.Context, e *env) (*tenureBackend, error) {
	pool, err := pgPool(ctx, e.pgURL, nil, 0)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	st, err := pgstore.New(pool, pgstore.Config{TablePrefix: pgTablePrefix})
	if err != nil {
		return nil, err
	}
	defer st.Close()
	if err := st.Migrate(ctx); err != nil {
		return nil, fmt.Errorf("migrate the bench's tables (prefix %s): %w", pgTablePrefix, err)
	}
	objs := st.Objects()
	leases := pgx.Identifier{objs.Schema, objs.Leases}.Sanitize()
	return &tenureBackend{
		store: "postgres",
		wire:  true,
		open: func(ctx context.Context, c *counter, conns int32) (store.Store, func(), error) {
			pool, err := pgPool(ctx, e.pgURL, c, conns)
			if err != nil {
				return nil, nil, err
			}
			st, err := pgstore.New(pool, pgstore.Config{TablePrefix: pgTablePrefix})
			if err != nil {
				pool.Close()
				return nil, nil, err
			}
			return st, func() { st.Close(); pool.Close() }, nil
		},
		settings: "pgstore over pgxpool (MaxConns 2 per participant), TablePrefix " + pgTablePrefix,
		cleanup: func(ctx context.Context) {
			pool, err := pgPool(ctx, e.pgURL, nil, 0)
			if err != nil {
				return
			}
			defer pool.Close()
			_, _ = pool.Exec(ctx, `DELETE FROM `+leases+` WHERE name LIKE $1`, "b"+e.runID+"-%")
		},
		tableStats: func(ctx context.Context) (tableStats, error) {
			conn, err := pgx.Connect(ctx, e.pgURL)
			if err != nil {
				return tableStats{}, err
			}
			defer conn.Close(ctx)
			var s tableStats
			err = conn.QueryRow(ctx, `SELECT n_tup_upd, n_tup_hot_upd, n_dead_tup FROM pg_stat_user_tables WHERE schemaname = $1 AND relname = $2`,
				objs.Schema, objs.Leases).Scan(&s.Updated, &s.HOTUpdated, &s.Dead)
			return s, err
		},
	}, nil
}

func redisClient(addr string, c *counter) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, Dialer: countingDialer(c, respScanner)})
}

func tenureRedis(ctx context.Context, e *env) (*tenureBackend, error) {
	prefix := "b" + e.runID + "-tenure:"
	rdb := redisClient(e.redisAddr, nil)
	defer rdb.Close()
	if err := rdb.Ping(ctx).Err(); err != nil {
		return nil, fmt.Errorf("redis at %s: %w", e.redisAddr, err)
	}
	return &tenureBackend{
		store: "redis",
		wire:  true,
		open: func(ctx context.Context, c *counter, _ int32) (store.Store, func(), error) {
			rdb := redisClient(e.redisAddr, c)
			st, err := redisstore.New(rdb, redisstore.Config{KeyPrefix: prefix})
			if err != nil {
				rdb.Close()
				return nil, nil, err
			}
			return st, func() { st.Close(); rdb.Close() }, nil
		},
		settings: "redisstore over go-redis (ContextTimeoutEnabled), KeyPrefix b<run>-tenure:",
		cleanup: func(ctx context.Context) {
			rdb := redisClient(e.redisAddr, nil)
			defer rdb.Close()
			iter := rdb.Scan(ctx, 0, prefix+"*", 1000).Iterator()
			for iter.Next(ctx) {
				rdb.Unlink(ctx, iter.Val())
			}
		},
	}, nil
}

func etcdClient(endpoints []string, c *counter) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: 5 * time.Second,
		DialOptions: grpcCounting(c),
		Logger:      zap.NewNop(),
	})
}

func tenureEtcd(ctx context.Context, e *env) (*tenureBackend, error) {
	prefix := "/tenure-bench/" + e.runID + "/"
	return &tenureBackend{
		store: "etcd",
		wire:  true,
		open: func(ctx context.Context, c *counter, _ int32) (store.Store, func(), error) {
			cli, err := etcdClient(e.etcd, c)
			if err != nil {
				return nil, nil, err
			}
			st, err := etcdstore.New(cli, etcdstore.Config{KeyPrefix: prefix})
			if err != nil {
				cli.Close()
				return nil, nil, err
			}
			return st, func() { st.Close(); cli.Close() }, nil
		},
		settings: "etcdstore over clientv3, KeyPrefix /tenure-bench/<run>/",
		cleanup: func(ctx context.Context) {
			cli, err := etcdClient(e.etcd, nil)
			if err != nil {
				return
			}
			defer cli.Close()
			_, _ = cli.Delete(ctx, prefix, clientv3.WithPrefix())
		},
	}, nil
}

func tenureSQLite(e *env, prof string) *tenureBackend {
	path := filepath.Join(e.tmpDir, "tenure-"+prof+".db")
	return &tenureBackend{
		store: "sqlite",
		open: func(ctx context.Context, _ *counter, _ int32) (store.Store, func(), error) {
			st, err := sqlitestore.Open(ctx, path, sqlitestore.Config{})
			if err != nil {
				return nil, nil, err
			}
			return st, func() { st.Close() }, nil
		},
		settings: "sqlitestore.Open on one file per profile in a temporary directory, one Store per participant; requests are store calls",
		cleanup:  func(context.Context) {},
	}
}

// tenureImpl is tenure over one backend at one TTL.
type tenureImpl struct {
	be  *tenureBackend
	ttl time.Duration // tenure.Config.TTL; 0 is the library's default
}

func newTenureSubject(be *tenureBackend, p profile) *subject {
	ttl := p.ttl
	if ttl == 0 {
		ttl = tenure.DefaultTTL
	}
	return &subject{
		Name: "tenure", Store: be.store, Profile: p.name, TTL: ttl, RenewEvery: ttl / 3,
		Settings: fmt.Sprintf("tenure.Config{TTL: %s} (renewals every TTL/3); %s", ttl, be.settings),
		impl:     &tenureImpl{be: be, ttl: p.ttl},
	}
}

func (t *tenureImpl) close(ctx context.Context) { t.be.cleanup(ctx) }

func (t *tenureImpl) participant(ctx context.Context, id string, c *counter, crashable bool) (participant, error) {
	wc := c
	if !t.be.wire {
		wc = nil
	}
	inner, closeInner, err := t.be.open(ctx, wc, 0)
	if err != nil {
		return nil, err
	}
	p := &tenurePart{inner: inner, closeInner: closeInner, ran: make(chan error, 1)}
	st := inner
	if crashable || !t.be.wire {
		p.crashStore = newCrashStore(inner)
		if !t.be.wire {
			p.crashStore.calls = c
		}
		st = withBatches(p.crashStore)
	}
	cl, err := tenure.New(st, tenure.Config{Label: id, TTL: t.ttl})
	if err != nil {
		closeInner()
		return nil, err
	}
	p.c = cl
	rctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	go func() { p.ran <- cl.Run(rctx) }()
	return p, nil
}

type tenurePart struct {
	c          *tenure.Client
	inner      store.Store
	crashStore *crashStore // nil unless crashable or counting store calls
	closeInner func()
	cancel     context.CancelFunc
	ran        chan error
	closeOnce  sync.Once
	closeErr   error
}

func (p *tenurePart) acquire(ctx context.Context, name string) (lease, error) {
	l, err := p.c.Campaign(ctx, name)
	if err != nil {
		return nil, err
	}
	return &tenureLease{p: p, l: l, tok: l.Token()}, nil
}

func (p *tenurePart) crash() {
	if p.crashStore != nil {
		p.crashStore.crash()
	}
	p.cancel()
}

func (p *tenurePart) close() error {
	p.closeOnce.Do(func() {
		p.cancel()
		p.closeErr = <-p.ran
		p.closeInner()
	})
	return p.closeErr
}

// bareCycle takes name and gives it back with the store's own calls, no
// client in between: what the client's acquire and release add is the
// difference.
func (p *tenurePart) bareCycle(ctx context.Context, name string, hold time.Duration) (acquire, release time.Duration, err error) {
	h := store.Holder{Label: "bench-bare", Instance: name}
	time.Sleep(hold)
	t0 := time.Now()
	g, err := p.inner.Acquire(ctx, store.AcquireParams{Name: name, Holder: h, TTL: p.c.Config().TTL})
	acquire = time.Since(t0)
	if err != nil {
		return 0, 0, err
	}
	time.Sleep(hold)
	t1 := time.Now()
	err = p.inner.Release(ctx, store.ReleaseParams{Name: name, Holder: h, Token: g.Token})
	return acquire, time.Since(t1), err
}

type tenureLease struct {
	p   *tenurePart
	l   *tenure.Lease
	tok tenure.Token
}

// renew: tenure renews by itself and has no renew call. What one renewal
// costs is timed by sending the library's own renewal statement (a
// Store.Renew batch of one) as a chain write, the public way to advance a
// tenure's renewal chain from outside the client's loop.
func (l *tenureLease) renew(ctx context.Context) error {
	w, err := l.l.BeginChainWrite()
	if err != nil {
		return err
	}
	rs, err := l.p.inner.Renew(ctx, []store.RenewParams{{
		Name: l.l.Name(), Holder: l.l.Holder(), Token: l.tok, Seq: w.Seq(), TTL: l.p.c.Config().TTL,
	}})
	if err != nil {
		w.Abort()
		return err
	}
	if len(rs) != 1 || !rs[0].Renewed {
		w.Abort()
		return fmt.Errorf("renewal of %s not applied: %+v", l.l.Name(), rs)
	}
	w.Commit(rs[0].Grant.Seq)
	return nil
}

func (l *tenureLease) release(ctx context.Context) error { return l.l.Release(ctx) }

func (l *tenureLease) lastRenew() time.Time {
	if l.p.crashStore == nil {
		return time.Time{}
	}
	return l.p.crashStore.last(l.l.Name())
}

// errCrashed is what every store call of a crashed participant returns.
var errCrashed = fmt.Errorf("bench: the participant crashed: %w", tenure.ErrUnavailable)

// crashStore passes calls through to a store, notes when each lease was
// last granted or renewed, optionally counts calls, and after crash fails
// every call and ends the listener, as for a dead process.
type crashStore struct {
	inner   store.Store
	calls   *counter
	dead    atomic.Bool
	deadCtx context.Context
	kill    context.CancelFunc
	// onRenew, when set, sees every Renew call (the scale phase times them).
	onRenew func(start, end time.Time, n int)

	mu      sync.Mutex
	renewed map[string]time.Time
}

var (
	_ store.Subscriber = (*crashStore)(nil)
	_ store.TTLFloor   = (*crashStore)(nil)
	_ store.TTLUnit    = (*crashStore)(nil)
)

func newCrashStore(inner store.Store) *crashStore {
	s := &crashStore{inner: inner, renewed: map[string]time.Time{}}
	s.deadCtx, s.kill = context.WithCancel(context.Background())
	return s
}

func (s *crashStore) crash() {
	s.dead.Store(true)
	s.kill()
}

func (s *crashStore) mark(name string, at time.Time) {
	s.mu.Lock()
	s.renewed[name] = at
	s.mu.Unlock()
}

func (s *crashStore) last(name string) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.renewed[name]
}

func (s *crashStore) Acquire(ctx context.Context, p store.AcquireParams) (store.Grant, error) {
	if s.dead.Load() {
		return store.Grant{}, errCrashed
	}
	s.calls.add(1)
	g, err := s.inner.Acquire(ctx, p)
	if err == nil && !s.dead.Load() {
		s.mark(p.Name, time.Now())
	}
	return g, err
}

func (s *crashStore) Renew(ctx context.Context, ps []store.RenewParams) ([]store.RenewResult, error) {
	if s.dead.Load() {
		return nil, errCrashed
	}
	s.calls.add(1)
	t0 := time.Now()
	rs, err := s.inner.Renew(ctx, ps)
	t1 := time.Now()
	if s.onRenew != nil {
		s.onRenew(t0, t1, len(ps))
	}
	if err == nil && !s.dead.Load() {
		for i, r := range rs {
			if r.Renewed && i < len(ps) {
				s.mark(ps[i].Name, t1)
			}
		}
	}
	return rs, err
}

func (s *crashStore) Release(ctx context.Context, p store.ReleaseParams) error {
	if s.dead.Load() {
		return errCrashed
	}
	s.calls.add(1)
	return s.inner.Release(ctx, p)
}

func (s *crashStore) Get(ctx context.Context, name string) (store.Record, error) {
	if s.dead.Load() {
		return store.Record{}, errCrashed
	}
	s.calls.add(1)
	return s.inner.Get(ctx, name)
}

// batchingCrashStore is a crashStore over a store that acquires and
// releases in batches, and passes both on, so that a client over it
// batches as it would over the store itself.
type batchingCrashStore struct {
	*crashStore
	acquirer store.BatchAcquirer
	releaser store.BatchReleaser
}

// withBatches returns cs, passing on its inner store's batch acquisitions
// and releases when the store has both.
func withBatches(cs *crashStore) store.Store {
	ba, ok := cs.inner.(store.BatchAcquirer)
	br, ok2 := cs.inner.(store.BatchReleaser)
	if !ok || !ok2 {
		return cs
	}
	return &batchingCrashStore{crashStore: cs, acquirer: ba, releaser: br}
}

func (s *batchingCrashStore) AcquireBatch(ctx context.Context, ps []store.AcquireParams) ([]store.AcquireResult, error) {
	if s.dead.Load() {
		return nil, errCrashed
	}
	s.calls.add(1)
	res, err := s.acquirer.AcquireBatch(ctx, ps)
	if err == nil && !s.dead.Load() {
		now := time.Now()
		for i, r := range res {
			if r.Err == nil && i < len(ps) {
				s.mark(ps[i].Name, now)
			}
		}
	}
	return res, err
}

func (s *batchingCrashStore) ReleaseBatch(ctx context.Context, ps []store.ReleaseParams) ([]error, error) {
	if s.dead.Load() {
		return nil, errCrashed
	}
	s.calls.add(1)
	return s.releaser.ReleaseBatch(ctx, ps)
}

// Close does nothing: the participant closes the inner store.
func (s *crashStore) Close() error { return nil }

func (s *crashStore) MinTTL() time.Duration { return store.MinTTLOf(s.inner) }

func (s *crashStore) TTLUnit() time.Duration { return store.TTLUnitOf(s.inner) }

func (s *crashStore) Listen(ctx context.Context, notify func(store.Notice)) error {
	n, ok := s.inner.(store.Notifier)
	if !ok {
		<-ctx.Done()
		return nil
	}
	return s.untilCrash(ctx, notify, n.Listen)
}

// Subscribe passes on the inner store's subscriptions, whose Listen ends
// at a crash as Listen does (a filter over Listen when it has none).
func (s *crashStore) Subscribe() store.Subscription {
	sub, ok := s.inner.(store.Subscriber)
	if !ok {
		return store.Subscribe(listenFunc(s.Listen))
	}
	return crashSubscription{Subscription: sub.Subscribe(), s: s}
}

// untilCrash runs listen until ctx is done or the participant crashes.
func (s *crashStore) untilCrash(ctx context.Context, notify func(store.Notice), listen func(context.Context, func(store.Notice)) error) error {
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(s.deadCtx, cancel)()
	return listen(lctx, notify)
}

type crashSubscription struct {
	store.Subscription
	s *crashStore
}

func (c crashSubscription) Listen(ctx context.Context, notify func(store.Notice)) error {
	return c.s.untilCrash(ctx, notify, c.Subscription.Listen)
}

// listenFunc is a store.Notifier made of its Listen.
type listenFunc func(ctx context.Context, notify func(store.Notice)) error

func (f listenFunc) Listen(ctx context.Context, notify func(store.Notice)) error {
	return f(ctx, notify)
}
