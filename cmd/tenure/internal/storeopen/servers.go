package storeopen

import (
	"cmp"
	"context"
	"errors"
	"net"
	"time"

	"github.com/tenure-dev/tenure/store"

	"github.com/hashicorp/consul/api"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/logging"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/cmd/tenure/internal/storeurl"
	"github.com/tenure-dev/tenure/store/consulstore"
	"github.com/tenure-dev/tenure/store/etcdstore"
	"github.com/tenure-dev/tenure/store/redisstore"
)

// redisConfigs returns go-redis's options for the Redis URL t names and
// the store's configuration, refusing what either refuses.
func redisConfigs(t storeurl.Target) (*redis.Options, redisstore.Config, error) {
	cfg := redisstore.Config{KeyPrefix: t.Prefix}
	if _, err := cfg.Keys(); err != nil {
		return nil, redisstore.Config{}, storeurl.Errorf(store.ErrInvalid, err, "storeurl: store URL %s: %s: %v", t.Display, storeurl.ParamPrefix, err)
	}
	opts, err := redis.ParseURL(t.URL)
	if err != nil {
		return nil, redisstore.Config{}, storeurl.Errorf(store.ErrInvalid, nil, "storeurl: store URL %s: %s; write it as %s", t.Display, t.Redact(err.Error()), storeurl.Redis.Form())
	}
	return opts, cfg, nil
}

func openRedis(ctx context.Context, t storeurl.Target, timeout time.Duration) (*Opened, error) {
	opts, cfg, err := redisConfigs(t)
	if err != nil {
		return nil, err
	}
	pw, err := applyRedis(t, opts)
	if err != nil {
		return nil, err
	}
	t = t.WithSecrets(pw)
	// Calls end at their context's deadline, as redisstore requires.
	opts.ContextTimeoutEnabled = true
	if opts.DialTimeout == 0 {
		opts.DialTimeout = timeout
	}
	if opts.ClientName == "" {
		opts.ClientName = applicationName
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// go-redis retries a refused connection for seconds: try the address
	// first, so that a wrong one fails at once.
	if err := anyAnswers(pctx, []string{opts.Addr}); err != nil {
		return nil, storeurl.Errorf(store.ErrUnavailable, nil, "storeurl: cannot reach Redis at %s: %s", t.Display, t.Wrap(err))
	}
	// go-redis logs dial failures to standard error from its pool, which
	// would break tenure's one-line errors; the failure reaches the caller
	// as an error anyway. Its logger is global: this package serves the
	// tenure command alone.
	logging.Disable()
	client := redis.NewClient(opts)
	st, err := redisstore.New(client, cfg)
	if err != nil {
		_ = client.Close() // The configuration error is the one to report.
		return nil, storeurl.Errorf(store.ErrInvalid, err, "storeurl: %s", t.Redact(err.Error()))
	}
	if err := client.Ping(pctx).Err(); err != nil {
		_ = st.Close()     // It holds nothing yet.
		_ = client.Close() // The failed round trip is the error to report.
		return nil, storeurl.Errorf(store.ErrUnavailable, nil, "storeurl: cannot reach Redis at %s: %s", t.Display, t.Wrap(err))
	}
	return &Opened{Target: t, Store: st, closeClient: client.Close, prefix: st.Keys().Prefix}, nil
}

func openEtcd(ctx context.Context, t storeurl.Target, timeout time.Duration) (*Opened, error) {
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// The etcd client waits for a connection until the call's deadline,
	// however plainly it is refused: try the endpoints first, so that a
	// wrong address fails at once.
	if err := anyAnswers(pctx, t.Endpoints); err != nil {
		return nil, storeurl.Errorf(store.ErrUnavailable, nil, "storeurl: cannot reach etcd at %s: %s", t.Display, t.Wrap(err))
	}
	sec, err := etcdSecurity(t)
	if err != nil {
		return nil, err
	}
	t = t.WithSecrets(sec.Password)
	client, err := clientv3.New(clientv3.Config{
		Endpoints:   t.Endpoints,
		DialTimeout: timeout,
		Username:    t.User,
		Password:    sec.Password,
		TLS:         sec.TLS,
		// The client's own log lines would break tenure's one-line errors;
		// its errors reach the caller anyway.
		Logger: zap.NewNop(),
	})
	if err != nil {
		return nil, storeurl.Errorf(store.ErrUnavailable, nil, "storeurl: cannot reach etcd at %s: %s", t.Display, t.Wrap(err))
	}
	st, err := etcdstore.New(client, etcdstore.Config{KeyPrefix: t.Prefix})
	if err != nil {
		_ = client.Close() // The configuration error is the one to report.
		return nil, storeurl.Errorf(store.ErrInvalid, err, "storeurl: %s", t.Redact(err.Error()))
	}
	prefix := cmp.Or(t.Prefix, etcdstore.DefaultKeyPrefix)
	if _, err := client.Get(pctx, prefix); err != nil {
		_ = st.Close()     // It holds nothing yet.
		_ = client.Close() // The failed round trip is the error to report.
		return nil, storeurl.Errorf(store.ErrUnavailable, nil, "storeurl: cannot reach etcd at %s within %s: %s", t.Display, timeout, t.Wrap(err))
	}
	return &Opened{Target: t, Store: st, closeClient: client.Close, prefix: prefix}, nil
}

// anyAnswers returns nil as soon as one of endpoints (host:port) accepts a
// TCP connection, and the last error when none does.
func anyAnswers(ctx context.Context, endpoints []string) error {
	var d net.Dialer
	var err error
	for _, ep := range endpoints {
		var conn net.Conn
		if conn, err = d.DialContext(ctx, "tcp", ep); err == nil {
			_ = conn.Close() // It has answered; the client makes its own connections.
			return nil
		}
	}
	return err
}

// consulConfig returns the configuration of the Consul store t names.
func consulConfig(t storeurl.Target) consulstore.Config {
	return consulstore.Config{KeyPrefix: t.Prefix, MinSessionTTL: t.MinSessionTTL, LockDelay: t.LockDelay}
}

func openConsul(ctx context.Context, t storeurl.Target, timeout time.Duration) (*Opened, error) {
	// The consul command's environment is honoured: CONSUL_HTTP_TOKEN,
	// CONSUL_HTTP_SSL, CONSUL_CACERT and the rest.
	cfg := api.DefaultConfig()
	if len(t.Endpoints) > 0 {
		cfg.Address = t.Endpoints[0]
	}
	applyConsul(t.Files, cfg)
	tr := cfg.Transport
	closeClient := func() error {
		tr.CloseIdleConnections()
		return nil
	}
	client, err := api.NewClient(cfg)
	if err != nil {
		return nil, storeurl.Errorf(store.ErrInvalid, nil, "storeurl: store URL %s: %s", t.Display, t.Wrap(err))
	}
	st, err := consulstore.New(client, consulConfig(t))
	if err != nil {
		return nil, storeurl.Errorf(store.ErrInvalid, err, "storeurl: store URL %s: %s", t.Display, t.Wrap(err))
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	leader, err := client.Status().LeaderWithQueryOptions((&api.QueryOptions{}).WithContext(pctx))
	if err == nil && leader == "" {
		err = errors.New("the cluster has no leader")
	}
	if err != nil {
		_ = st.Close() // It holds nothing yet.
		_ = closeClient()
		return nil, storeurl.Errorf(store.ErrUnavailable, nil, "storeurl: cannot reach Consul at %s (%s): %s", t.Display, cfg.Address, t.Wrap(err))
	}
	return &Opened{Target: t, Store: st, closeClient: closeClient, prefix: st.Config().KeyPrefix}, nil
}
