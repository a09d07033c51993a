package testserver

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/tenure-dev/tenure/internal/faultnet"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/natsstore"
	"github.com/tenure-dev/tenure/store/storetest"
)

// restartTimeout bounds a server's restart for [storetest.Fault.Restart].
const restartTimeout = 2 * time.Minute

// sharedServer is why a harness over the machine's server declines to
// restart it.
const sharedServer = "the tests share the machine's server, which other tests use meanwhile: restarting it would fail them"

// Proxy starts a [faultnet.Proxy] in front of target (host:port), closed
// when tb ends.
func Proxy(tb testing.TB, target string) *faultnet.Proxy {
	tb.Helper()
	p, err := faultnet.Listen(target)
	if err != nil {
		tb.Fatalf("testserver: %v", err)
	}
	tb.Cleanup(func() {
		if err := p.Close(); err != nil {
			tb.Errorf("testserver: %v", err)
		}
	})
	return p
}

// Crasher is a server a [storetest.Fault] can crash and restart: a
// [Process], or a server made of one.
type Crasher interface {
	Kill()
	Restart(ctx context.Context) error
}

// CutFault returns a [storetest.Fault] on the store s whose connections
// go through p: Cut is a partition that also dropped every open
// connection (faultnet's Cut under a BlackHole), Restore ends it. With srv
// (the server behind p) not nil, Kill and Restart crash it and start it
// again, and Restart returns s.
func CutFault(p *faultnet.Proxy, srv Crasher, s store.Store) storetest.Fault {
	f := storetest.Fault{
		Cut: func(testing.TB) {
			p.BlackHole()
			p.Cut()
		},
		Restore: func(testing.TB) { p.Restore() },
	}
	if srv != nil {
		f.Kill = func(testing.TB) { srv.Kill() }
		f.Restart = func(tb testing.TB) store.Store {
			tb.Helper()
			ctx, cancel := context.WithTimeout(tb.Context(), restartTimeout)
			defer cancel()
			if err := srv.Restart(ctx); err != nil {
				tb.Fatalf("testserver: restart: %v", err)
			}
			return s
		}
	}
	return f
}

// Faults implements [storetest.Capabilities.Faults]: a store as
// NewStore makes one, on a pool of its own (Pool's configuration) through
// a proxy; the machine's server is not restarted.
func (h PostgresHarness) Faults() storetest.Faults {
	return storetest.Faults{NoRestart: sharedServer, NewStore: func(tb testing.TB) (store.Store, storetest.Fault) {
		tb.Helper()
		cfg := h.pool().Config()
		p := Proxy(tb, net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port))))
		host, port, err := net.SplitHostPort(p.Addr())
		if err != nil {
			tb.Fatalf("testserver: proxy address: %v", err)
		}
		n, err := strconv.ParseUint(port, 10, 16)
		if err != nil {
			tb.Fatalf("testserver: proxy port: %v", err)
		}
		cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Fallbacks = host, uint16(n), nil
		pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
		if err != nil {
			tb.Fatalf("testserver: pool: %v", err)
		}
		tb.Cleanup(pool.Close)
		s := h.storeOn(tb, pool)
		return s, CutFault(p, nil, s)
	}}
}

// Faults implements [storetest.Capabilities.Faults]: a store as NewStore
// makes one, on a handle of its own (as Account, when set) through a
// proxy; the machine's server is not restarted.
func (h MySQLHarness) Faults() storetest.Faults {
	return storetest.Faults{NoRestart: sharedServer, NewStore: func(tb testing.TB) (store.Store, storetest.Fault) {
		tb.Helper()
		dc := MySQLDriverConfig(tb, h.Account)
		p := Proxy(tb, dc.Addr)
		dc.Addr = p.Addr()
		s := h.storeOn(tb, MySQLOpen(tb, dc))
		return s, CutFault(p, nil, s)
	}}
}

// Faults implements [storetest.Capabilities.Faults]: a store on a
// redis-server of its own that persists nothing (a restart loses every
// key), through a proxy.
func (RedisHarness) Faults() storetest.Faults {
	return storetest.Faults{NewStore: func(tb testing.TB) (store.Store, storetest.Fault) {
		tb.Helper()
		srv := OwnRedis(tb, RedisConfig{})
		p := Proxy(tb, srv.Addr())
		c := redis.NewClient(&redis.Options{Addr: p.Addr(), ContextTimeoutEnabled: true})
		tb.Cleanup(func() { _ = c.Close() })
		s := RedisHarness{Client: c}.NewStore(tb)
		return s, CutFault(p, srv, s)
	}}
}

// Faults implements [storetest.Capabilities.Faults]: a store on a server
// agent of its own, which keeps its Raft log on disk across a restart,
// through a proxy.
func (h ConsulHarness) Faults() storetest.Faults {
	return storetest.Faults{NewStore: func(tb testing.TB) (store.Store, storetest.Fault) {
		tb.Helper()
		agent, err := StartConsul(tb.Context(), ConsulConfig{Server: true})
		testutil.NeedServer(tb, "consul agent", err)
		tb.Cleanup(func() {
			if err := agent.Stop(); err != nil {
				tb.Errorf("testserver: stop consul %s: %v", agent.Node, err)
			}
		})
		p := Proxy(tb, agent.HTTPAddr)
		s := h.storeOn(tb, ConsulClient(tb, p.Addr()))
		return s, CutFault(p, agent, s)
	}}
}

// Faults implements [storetest.Capabilities.Faults]: a store on a
// nats-server of its own (JetStream on file storage), through a proxy.
func (NatsHarness) Faults() storetest.Faults {
	return storetest.Faults{NewStore: func(tb testing.TB) (store.Store, storetest.Fault) {
		tb.Helper()
		srv := OwnNats(tb)
		p := Proxy(tb, strings.TrimPrefix(srv.URL, "nats://"))
		// The server as its clients see it through the proxy, to connect
		// as [Nats.Conn] does.
		proxied := &Nats{Process: srv.Process, Name: srv.Name, URL: "nats://" + p.Addr()}
		js, err := jetstream.New(proxied.Conn(tb))
		if err != nil {
			tb.Fatalf("testserver: %v", err)
		}
		cfg := natsstore.Config{Bucket: "t" + testutil.RandomHex(8)}
		if err := natsstore.Migrate(tb.Context(), js, cfg); err != nil {
			tb.Fatalf("testserver: %v", err)
		}
		s, err := natsstore.Open(tb.Context(), js, cfg)
		if err != nil {
			tb.Fatalf("testserver: %v", err)
		}
		tb.Cleanup(func() { _ = s.Close() })
		return s, CutFault(p, srv, s)
	}}
}
