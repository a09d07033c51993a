package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"cirello.io/pglock"
	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	rsgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/lib/pq"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// The anchors: what users would pick instead of tenure on each store, at
// their own defaults (profile "default") or at the profile's TTL, with the
// library's own ratios of renewal to TTL kept.

// ---- cirello.io/pglock --------------------------------------------------------

const pglockTable = "tenure_bench_pglock"

type pglockImpl struct {
	e         *env
	lease, hb time.Duration
}

func newPglockSubject(ctx context.Context, e *env, p profile) (*subject, error) {
	a := &pglockImpl{e: e, lease: pglock.DefaultLeaseDuration, hb: pglock.DefaultHeartbeatFrequency}
	if p.ttl > 0 {
		a.lease, a.hb = p.ttl, p.ttl/4 // the library's default ratio
	}
	db, err := a.open(nil)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	c, err := pglock.New(db, pglock.WithCustomTable(pglockTable))
	if err != nil {
		return nil, err
	}
	if err := c.TryCreateTable(); err != nil {
		return nil, fmt.Errorf("pglock: create table %s: %w", pglockTable, err)
	}
	return &subject{
		Name: "pglock", Store: "postgres", Profile: p.name, TTL: a.lease, RenewEvery: a.hb, PollEvery: a.lease,
		Settings: fmt.Sprintf("cirello.io/pglock v1.16.2 over lib/pq (2 connections per participant), lease %s, heartbeat %s; waiters retry every lease duration", a.lease, a.hb),
		impl:     a,
	}, nil
}

func (a *pglockImpl) open(c *counter) (*sql.DB, error) {
	conn, err := pq.NewConnector(a.e.pgURL)
	if err != nil {
		return nil, fmt.Errorf("-pg %q: %w", a.e.pgURL, err)
	}
	conn.Dialer(pqDialer{countingDialer(c, pgScanner)})
	db := sql.OpenDB(conn)
	db.SetMaxOpenConns(2)
	return db, nil
}

func (a *pglockImpl) close(ctx context.Context) {
	db, err := a.open(nil)
	if err != nil {
		return
	}
	defer db.Close()
	_, _ = db.ExecContext(ctx, `DELETE FROM `+pglockTable+` WHERE name LIKE $1`, "b"+a.e.runID+"-%")
}

// pqDialer adapts a dial function to lib/pq's Dialer.
type pqDialer struct {
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

func (d pqDialer) Dial(network, addr string) (net.Conn, error) {
	return d.dial(context.Background(), network, addr)
}

func (d pqDialer) DialTimeout(network, addr string, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return d.dial(ctx, network, addr)
}

func (d pqDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return d.dial(ctx, network, addr)
}

func (a *pglockImpl) participant(ctx context.Context, id string, c *counter, crashable bool) (participant, error) {
	db, err := a.open(c)
	if err != nil {
		return nil, err
	}
	hb := a.hb
	if crashable {
		hb = 0 // the bench sends the heartbeats, at the same frequency, to see them
	}
	cl, err := pglock.New(db, pglock.WithCustomTable(pglockTable), pglock.WithLeaseDuration(a.lease),
		pglock.WithHeartbeatFrequency(hb), pglock.WithOwner(id))
	if err != nil {
		db.Close()
		return nil, err
	}
	return &pglockPart{a: a, db: db, c: cl, crashable: crashable}, nil
}

type pglockPart struct {
	a         *pglockImpl
	db        *sql.DB
	c         *pglock.Client
	crashable bool
	held      []*pglockLease
}

func (p *pglockPart) acquire(ctx context.Context, name string) (lease, error) {
	hbCtx, hbCancel := context.WithCancel(context.Background())
	l, err := p.c.AcquireContext(ctx, name, pglock.WithCustomHeartbeatContext(hbCtx))
	if err != nil {
		hbCancel()
		return nil, err
	}
	le := &pglockLease{p: p, l: l, hbCancel: hbCancel}
	if p.crashable {
		le.loop = startRenewLoop(p.a.hb, le.renew)
		p.held = append(p.held, le)
	}
	return le, nil
}

func (p *pglockPart) crash() {
	for _, l := range p.held {
		l.hbCancel()
		l.loop.stop()
	}
}

func (p *pglockPart) close() error { return p.db.Close() }

type pglockLease struct {
	p        *pglockPart
	l        *pglock.Lock
	hbCancel context.CancelFunc
	loop     *renewLoop
}

func (l *pglockLease) renew(ctx context.Context) error { return l.p.c.SendHeartbeat(ctx, l.l) }

func (l *pglockLease) release(ctx context.Context) error {
	if l.loop != nil {
		l.loop.stop()
	}
	defer l.hbCancel()
	return l.p.c.ReleaseContext(ctx, l.l)
}

func (l *pglockLease) lastRenew() time.Time {
	if l.loop == nil {
		return time.Time{}
	}
	return l.loop.lastRenew()
}

// ---- Redis: redsync and redislock ---------------------------------------------

// Neither library renews by itself: the bench renews every TTL/3, as their
// documentation suggests a user would.

const redisDefaultTTL = 8 * time.Second // redsync's default expiry; redislock has none

type redisImpl struct {
	e     *env
	name  string // "redsync" or "redislock"
	ttl   time.Duration
	retry time.Duration // redislock's waiting: LinearBackoff
}

func newRedisSubject(ctx context.Context, e *env, p profile, name string) (*subject, error) {
	a := &redisImpl{e: e, name: name, ttl: redisDefaultTTL, retry: 100 * time.Millisecond}
	if p.ttl > 0 {
		a.ttl = p.ttl
	}
	s := &subject{Name: name, Store: "redis", Profile: p.name, TTL: a.ttl, RenewEvery: a.ttl / 3, impl: a}
	if name == "redsync" {
		s.PollEvery = 250 * time.Millisecond
		s.Settings = fmt.Sprintf("github.com/go-redsync/redsync/v4 v4.18.1, one go-redis pool, expiry %s, Extend every TTL/3 by the bench; waiting: its own retries (32 tries, 50–250 ms apart) in a loop", a.ttl)
	} else {
		s.PollEvery = a.retry
		s.Settings = fmt.Sprintf("github.com/bsm/redislock v0.9.4, ttl %s, Refresh every TTL/3 by the bench; waiting: RetryStrategy LinearBackoff(%s)", a.ttl, a.retry)
	}
	return s, nil
}

func (a *redisImpl) close(context.Context) {} // their keys expire by TTL

func (a *redisImpl) participant(ctx context.Context, id string, c *counter, crashable bool) (participant, error) {
	rdb := redisClient(a.e.redisAddr, c)
	p := &redisPart{a: a, rdb: rdb, crashable: crashable}
	if a.name == "redsync" {
		p.rs = redsync.New(rsgoredis.NewPool(rdb))
	} else {
		p.rl = redislock.New(rdb)
	}
	return p, nil
}

type redisPart struct {
	a   *redisImpl
	rdb interface{ Close() error }
	rs  *redsync.Redsync
	rl  *redislock.Client
	// held are the renewal loops crash stops (crashable participants only).
	crashable bool
	held      []*renewLoop
}

func (p *redisPart) acquire(ctx context.Context, name string) (lease, error) {
	for {
		l, err := p.try(ctx, name)
		if err == nil {
			if p.crashable {
				p.held = append(p.held, l.loop)
			}
			return l, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if !errors.Is(err, errHeld) {
			return nil, err
		}
	}
}

// try makes one call of the library's waiting acquisition.
func (p *redisPart) try(ctx context.Context, name string) (*redisLease, error) {
	l := &redisLease{p: p}
	if p.rs != nil {
		m := p.rs.NewMutex(name, redsync.WithExpiry(p.a.ttl))
		if err := m.LockContext(ctx); err != nil {
			var taken *redsync.ErrTaken
			if errors.As(err, &taken) || errors.Is(err, redsync.ErrFailed) {
				return nil, errHeld
			}
			return nil, err
		}
		l.m = m
	} else {
		rl, err := p.rl.Obtain(ctx, name, p.a.ttl, &redislock.Options{RetryStrategy: redislock.LinearBackoff(p.a.retry)})
		if errors.Is(err, redislock.ErrNotObtained) {
			return nil, errHeld
		}
		if err != nil {
			return nil, err
		}
		l.rl = rl
	}
	l.loop = startRenewLoop(p.a.ttl/3, l.renew)
	return l, nil
}

func (p *redisPart) crash() {
	for _, r := range p.held {
		r.stop()
	}
}

func (p *redisPart) close() error { return p.rdb.Close() }

type redisLease struct {
	p    *redisPart
	m    *redsync.Mutex
	rl   *redislock.Lock
	loop *renewLoop
}

func (l *redisLease) renew(ctx context.Context) error {
	if l.m != nil {
		ok, err := l.m.ExtendContext(ctx)
		if err == nil && !ok {
			err = errors.New("redsync: extend refused")
		}
		return err
	}
	return l.rl.Refresh(ctx, l.p.a.ttl, nil)
}

func (l *redisLease) release(ctx context.Context) error {
	l.loop.stop()
	if l.m != nil {
		ok, err := l.m.UnlockContext(ctx)
		if err == nil && !ok {
			err = errors.New("redsync: unlock refused")
		}
		return err
	}
	return l.rl.Release(ctx)
}

func (l *redisLease) lastRenew() time.Time { return l.loop.lastRenew() }

// ---- etcd: concurrency.Mutex and concurrency.Election -------------------------

const etcdDefaultSessionTTL = 60 * time.Second // concurrency's default

type etcdImpl struct {
	e        *env
	election bool
	ttl      time.Duration
}

func newEtcdSubject(ctx context.Context, e *env, p profile, election bool) (*subject, error) {
	a := &etcdImpl{e: e, election: election, ttl: etcdDefaultSessionTTL}
	if p.ttl > 0 {
		a.ttl = p.ttl
	}
	name, what := "etcd-mutex", "concurrency.NewMutex Lock/Unlock"
	if election {
		name, what = "etcd-election", "concurrency.NewElection Campaign/Resign"
	}
	return &subject{
		Name: name, Store: "etcd", Profile: p.name, TTL: a.ttl, RenewEvery: a.ttl / 3,
		Settings: fmt.Sprintf("go.etcd.io/etcd/client/v3 v3.7.3 %s, one Session per participant with TTL %s (keep-alive every TTL/3); waiting: watch", what, a.ttl),
		impl:     a,
	}, nil
}

func (a *etcdImpl) close(ctx context.Context) {
	cli, err := etcdClient(a.e.etcd, nil)
	if err != nil {
		return
	}
	defer cli.Close()
	_, _ = cli.Delete(ctx, a.prefix(), clientv3.WithPrefix())
}

func (a *etcdImpl) prefix() string { return "/tenure-bench-anchors/" + a.e.runID + "/" }

func (a *etcdImpl) participant(ctx context.Context, id string, c *counter, crashable bool) (participant, error) {
	cli, err := etcdClient(a.e.etcd, c)
	if err != nil {
		return nil, err
	}
	sess, err := concurrency.NewSession(cli, concurrency.WithTTL(int(a.ttl/time.Second)), concurrency.WithContext(context.Background()))
	if err != nil {
		cli.Close()
		return nil, err
	}
	p := &etcdPart{a: a, cli: cli, sess: sess}
	p.last.Store(time.Now().UnixNano())
	if crashable {
		// A second keep-alive channel on the session's lease sees every
		// keep-alive answer; the lessor still sends one per interval.
		kctx, cancel := context.WithCancel(context.Background())
		ch, err := cli.KeepAlive(kctx, sess.Lease())
		if err != nil {
			cancel()
			sess.Close()
			cli.Close()
			return nil, err
		}
		p.stopWatch = cancel
		go func() {
			for r := range ch {
				if r != nil {
					p.last.Store(time.Now().UnixNano())
				}
			}
		}()
	}
	return p, nil
}

type etcdPart struct {
	a         *etcdImpl
	cli       *clientv3.Client
	sess      *concurrency.Session
	stopWatch context.CancelFunc
	last      atomic.Int64 // UnixNano of the last keep-alive answer
	crashed   bool
}

func (p *etcdPart) acquire(ctx context.Context, name string) (lease, error) {
	key := p.a.prefix() + name
	if p.a.election {
		e := concurrency.NewElection(p.sess, key)
		if err := e.Campaign(ctx, "x"); err != nil {
			return nil, err
		}
		return &etcdLease{p: p, e: e}, nil
	}
	m := concurrency.NewMutex(p.sess, key)
	if err := m.Lock(ctx); err != nil {
		return nil, err
	}
	return &etcdLease{p: p, m: m}, nil
}

// crash stops the session's keep-alives without revoking its lease.
func (p *etcdPart) crash() {
	p.crashed = true
	if p.stopWatch != nil {
		p.stopWatch()
	}
	p.sess.Orphan()
}

func (p *etcdPart) close() error {
	if p.stopWatch != nil {
		p.stopWatch()
	}
	if !p.crashed {
		_ = p.sess.Close() // revokes the session's lease
	}
	return p.cli.Close()
}

type etcdLease struct {
	p *etcdPart
	m *concurrency.Mutex
	e *concurrency.Election
}

func (l *etcdLease) renew(ctx context.Context) error {
	_, err := l.p.cli.KeepAliveOnce(ctx, l.p.sess.Lease())
	return err
}

func (l *etcdLease) release(ctx context.Context) error {
	if l.e != nil {
		return l.e.Resign(ctx)
	}
	return l.m.Unlock(ctx)
}

func (l *etcdLease) lastRenew() time.Time { return time.Unix(0, l.p.last.Load()) }
