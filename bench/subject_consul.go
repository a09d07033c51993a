package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/consulstore"
)

// consulClient is a Consul API client over a transport of its own.
func consulClient(addr string, h *httpCounter) (*api.Client, error) {
	return api.NewClient(&api.Config{Address: addr, HttpClient: &http.Client{Transport: h}})
}

// consulDeleteTree deletes the keys under prefix, best effort.
func consulDeleteTree(ctx context.Context, addr, prefix string) {
	h := newHTTPCounter(nil)
	defer h.next.CloseIdleConnections()
	cli, err := consulClient(addr, h)
	if err != nil {
		return
	}
	_, _ = cli.KV().DeleteTree(prefix, (&api.WriteOptions{}).WithContext(ctx))
}

func tenureConsul(e *env, p profile) *tenureBackend {
	prefix := "tenure-bench/" + e.runID + "/" + p.name + "/"
	// A prefix per profile: consulstore's listeners hear every change
	// under their prefix, and the profiles run side by side.
	cfg := consulstore.Config{KeyPrefix: prefix, MinSessionTTL: e.consulMinTTL}
	return &tenureBackend{
		store: "consul",
		wire:  true,
		open: func(ctx context.Context, c *counter, _ int32) (store.Store, func(), error) {
			h := newHTTPCounter(c)
			cli, err := consulClient(e.consul, h)
			if err != nil {
				return nil, nil, err
			}
			st, err := consulstore.New(cli, cfg)
			if err != nil {
				return nil, nil, err
			}
			return st, func() { st.Close(); h.next.CloseIdleConnections() }, nil
		},
		settings: fmt.Sprintf("consulstore over the api client, KeyPrefix tenure-bench/<run>/%s/, MinSessionTTL %s (the agent's session_ttl_min)", p.name, e.consulMinTTL),
		cleanup:  func(ctx context.Context) { consulDeleteTree(ctx, e.consul, prefix) },
	}
}

// ---- consul api.Lock ------------------------------------------------------------

const (
	consulDefaultSessionTTL = 15 * time.Second // api.DefaultLockSessionTTL
	// consulLockMany caps the leases of consul-lock's idle participant: a
	// held api.Lock keeps one blocking query open, and an agent serves at
	// most 200 connections per client address by default.
	consulLockMany = 50
)

type consulLockImpl struct {
	e   *env
	p   profile
	ttl time.Duration
}

func newConsulLockSubject(e *env, p profile) *subject {
	a := &consulLockImpl{e: e, p: p, ttl: consulDefaultSessionTTL}
	settings := "github.com/hashicorp/consul/api v1.25.1 Client.LockOpts with the library's defaults: session TTL 15s, LockWaitTime 15s, Consul's lock-delay 15s"
	if p.ttl > 0 {
		a.ttl = p.ttl
		settings = fmt.Sprintf("github.com/hashicorp/consul/api v1.25.1 Client.LockOpts, SessionTTL %s, lock-delay 0 (LockDelay -1ns: 0 would mean Consul's 15s)", p.ttl)
	}
	settings += fmt.Sprintf("; one session per Lock, renewed every TTL/2 by the library; renew call: Session().Renew of the lock's session; idle load capped at %d locks (one blocking query each)", consulLockMany)
	return &subject{Name: "consul-lock", Store: "consul", Profile: p.name, TTL: a.ttl, RenewEvery: a.ttl / 2,
		MaxLeases: consulLockMany, Settings: settings, impl: a}
}

func (a *consulLockImpl) prefix() string { return "tenure-bench-anchors/" + a.e.runID + "/" }

func (a *consulLockImpl) close(ctx context.Context) { consulDeleteTree(ctx, a.e.consul, a.prefix()) }

func (a *consulLockImpl) participant(ctx context.Context, id string, c *counter, crashable bool) (participant, error) {
	h := newHTTPCounter(c)
	cli, err := consulClient(a.e.consul, h)
	if err != nil {
		return nil, err
	}
	return &consulPart{a: a, cli: cli, h: h}, nil
}

type consulPart struct {
	a   *consulLockImpl
	cli *api.Client
	h   *httpCounter
}

func (p *consulPart) acquire(ctx context.Context, name string) (lease, error) {
	o := &api.LockOptions{Key: p.a.prefix() + name}
	if p.a.p.ttl > 0 {
		o.SessionTTL, o.LockDelay = p.a.ttl.String(), -time.Nanosecond
	}
	lk, err := p.cli.LockOpts(o)
	if err != nil {
		return nil, err
	}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			close(stop)
		case <-done:
		}
	}()
	lost, err := lk.Lock(stop)
	close(done)
	if err != nil {
		return nil, err
	}
	if lost == nil {
		return nil, fmt.Errorf("consul lock %s: %w", name, errors.Join(ctx.Err(), errors.New("stopped before it was held")))
	}
	p.h.lastRenew.Store(time.Now().UnixNano())
	return &consulLease{p: p, lk: lk, key: o.Key}, nil
}

func (p *consulPart) crash() { p.h.kill() }

func (p *consulPart) close() error {
	p.h.next.CloseIdleConnections()
	return nil
}

type consulLease struct {
	p       *consulPart
	lk      *api.Lock
	key     string
	session string
}

// renew: api.Lock renews its session by itself and does not expose it;
// the session is read from the key once and renewed as the library would.
func (l *consulLease) renew(ctx context.Context) error {
	if l.session == "" {
		kv, _, err := l.p.cli.KV().Get(l.key, (&api.QueryOptions{}).WithContext(ctx))
		if err != nil {
			return err
		}
		if kv == nil || kv.Session == "" {
			return fmt.Errorf("consul lock %s: the key holds no session", l.key)
		}
		l.session = kv.Session
	}
	_, _, err := l.p.cli.Session().Renew(l.session, (&api.WriteOptions{}).WithContext(ctx))
	return err
}

func (l *consulLease) release(context.Context) error { return l.lk.Unlock() }

func (l *consulLease) lastRenew() time.Time { return time.Unix(0, l.p.h.lastRenew.Load()) }

// consulFill leaves n released lease records under the prefix of tenure's
// Consul store, as a prefix that has served n leases holds them: each
// lease is acquired and released with the store's own calls, 8 at a
// time, each call tried again when the store reports itself unavailable
// (every acquisition and release rewrites the prefix's announcement key,
// so calls on different names contend there: 32 at a time made one give
// up). The Consul targets are measured on a prefix that holds
// 10,000 records: a listener's or a waiter's cost must not grow with them.
func consulFill(ctx context.Context, be *tenureBackend, e *env, n int) error {
	st, closeSt, err := be.open(ctx, nil, 0)
	if err != nil {
		return err
	}
	defer closeSt()
	holder := store.Holder{Label: "fill", Instance: e.runID}
	ttl := max(e.consulMinTTL, 10*time.Second)
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	const workers, tries = 8, 10
	// retried calls f until it succeeds, fails otherwise than unavailable,
	// or has been tried tries times.
	retried := func(f func() error) (err error) {
		for range tries {
			if err = f(); !errors.Is(err, store.ErrUnavailable) {
				return err
			}
		}
		return err
	}
	var next atomic.Int64
	errs := make(chan error, workers)
	for range workers {
		go func() {
			for i := next.Add(1); i <= int64(n) && fctx.Err() == nil; i = next.Add(1) {
				name := fmt.Sprintf("fill-%d", i)
				var g store.Grant
				err := retried(func() (err error) {
					g, err = st.Acquire(fctx, store.AcquireParams{Name: name, Holder: holder, TTL: ttl})
					return err
				})
				if err == nil {
					err = retried(func() error {
						return st.Release(fctx, store.ReleaseParams{Name: name, Holder: holder, Token: g.Token})
					})
				}
				if err != nil && fctx.Err() == nil {
					errs <- fmt.Errorf("fill %s: %w", name, err)
					cancel()
					return
				}
			}
			errs <- nil
		}()
	}
	var first error
	for range workers {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	if first == nil {
		first = ctx.Err()
	}
	return first
}
