package storeurl

import (
	"context"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/logging"

	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/redisstore"
)

// Redis is a redis:// or rediss:// URL: store/redisstore, one server.
type Redis struct {
	// URL is the URL without tenure's parameters, for go-redis to parse.
	// It holds the password: print [Target.Display] instead.
	URL string
	// Prefix is the key prefix, from the tenure_prefix parameter; empty
	// for the default.
	Prefix string
	// Files are the files the URL's TLS and password parameters name.
	Files Files
}

// Name is "Redis".
func (*Redis) Name() string { return "Redis" }

// Form is how a Redis URL is written.
func (*Redis) Form() string { return redisForm }

// Traits of Redis: renewals set the expiry (PX) from the server's now.
func (*Redis) Traits() Traits { return Traits{RenewKeepsExpiry: true} }

const redisForm = "redis://[USER:PASSWORD@]HOST:PORT[/DB][?tenure_prefix=PREFIX] (rediss:// for TLS)"

func parseRedis(raw string) (Target, error) {
	u, q, err := parseServerURL(raw, redisForm)
	if err != nil {
		return Target{}, err
	}
	r := &Redis{}
	t := Target{Backend: r}
	if u.User != nil {
		if pw, ok := u.User.Password(); ok && pw != "" {
			t.secrets = append(t.secrets, pw)
		}
	}
	t.Display = t.Redact(displayURL(u))
	if r.Prefix, _, err = takeParam(q, ParamPrefix, t.Display); err != nil {
		return Target{}, err
	}
	if r.Files, err = takeFiles(q, t.Display, strings.EqualFold(u.Scheme, "rediss"), "rediss://…"); err != nil {
		return Target{}, err
	}
	u.RawQuery = q.Encode()
	r.URL = u.String()
	return t, nil
}

// configs returns go-redis's options for the URL and the store's
// configuration, refusing what either refuses.
func (r *Redis) configs(t Target) (*redis.Options, redisstore.Config, error) {
	cfg := redisstore.Config{KeyPrefix: r.Prefix}
	if _, err := cfg.Keys(); err != nil {
		return nil, redisstore.Config{}, Errorf(store.ErrInvalid, err, "storeurl: store URL %s: %s: %v", t.Display, ParamPrefix, err)
	}
	opts, err := redis.ParseURL(r.URL)
	if err != nil {
		return nil, redisstore.Config{}, Errorf(store.ErrInvalid, nil, "storeurl: store URL %s: %s; write it as %s", t.Display, t.Redact(err.Error()), redisForm)
	}
	return opts, cfg, nil
}

// Open connects, trying the address first, and asks the server one round
// trip.
func (r *Redis) Open(ctx context.Context, t Target, o OpenOptions) (Conn, error) {
	timeout := o.Timeout
	opts, cfg, err := r.configs(t)
	if err != nil {
		return nil, err
	}
	pw, err := r.apply(t, opts)
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
		return nil, Errorf(store.ErrUnavailable, nil, "storeurl: cannot reach Redis at %s: %s", t.Display, t.Wrap(err))
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
		return nil, Errorf(store.ErrInvalid, err, "storeurl: %s", t.Redact(err.Error()))
	}
	if err := client.Ping(pctx).Err(); err != nil {
		_ = st.Close()     // It holds nothing yet.
		_ = client.Close() // The failed round trip is the error to report.
		return nil, Errorf(store.ErrUnavailable, nil, "storeurl: cannot reach Redis at %s: %s", t.Display, t.Wrap(err))
	}
	return &redisConn{baseConn: baseConn{t: t, st: st}, backend: r, redis: st, client: client, prefix: st.Keys().Prefix}, nil
}

// apply sets what the URL's files say on go-redis options, and returns the
// password read from a file (a secret to redact), if any.
func (r *Redis) apply(t Target, opts *redis.Options) (string, error) {
	if opts.TLSConfig != nil {
		cfg, err := tlsConfig(r.Files, opts.TLSConfig, t.Display)
		if err != nil {
			return "", err
		}
		opts.TLSConfig = cfg
	}
	pw, err := readPassword(r.Files, t.Display)
	if err != nil || pw == "" {
		return "", err
	}
	if opts.Password != "" {
		return "", Errorf(store.ErrInvalid, nil, "storeurl: store URL %s has a password and %s; give one of them", t.Display, ParamPasswordFile)
	}
	opts.Password = pw
	return pw, nil
}

// MigrationSQL refuses: the store keeps no schema.
func (*Redis) MigrationSQL(t Target) (string, error) { return noSchema(t) }

// GrantSQL refuses: the store has no SQL roles.
func (*Redis) GrantSQL(t Target, _ string) (string, error) { return noGrant(t) }

// ReadGrantSQL refuses as GrantSQL does.
func (*Redis) ReadGrantSQL(t Target, _ string) (string, error) { return noGrant(t) }

// redisConn is an open Redis store and its client.
type redisConn struct {
	baseConn
	backend *Redis
	redis   *redisstore.Store
	client  *redis.Client
	prefix  string
}

func (c *redisConn) Close() error { return c.client.Close() }

// Migrate says there is nothing to migrate.
func (c *redisConn) Migrate(context.Context) (string, error) { return keysOnly(c.t, c.prefix), nil }

// WallClock reads TIME on a connection of its own, made as the store's is
// (TLS files and password_file included), which Close closes.
func (c *redisConn) WallClock(context.Context) (*WallClock, error) {
	opts, _, err := c.backend.configs(c.t)
	if err != nil {
		return nil, err
	}
	if _, err := c.backend.apply(c.t, opts); err != nil {
		return nil, err
	}
	opts.ContextTimeoutEnabled = true
	client := redis.NewClient(opts)
	return &WallClock{read: func(ctx context.Context) (time.Time, error) {
		now, err := client.Time(ctx).Result()
		return now, c.t.Wrap(err)
	}, close: client.Close}, nil
}

// Durability reads the server's persistence, eviction and replication
// settings ([redisstore.Store.CheckDurability]).
func (c *redisConn) Durability(ctx context.Context) []Concern {
	risks, err := c.redis.CheckDurability(ctx)
	if err != nil {
		return []Concern{{Warn: true, Detail: err.Error(),
			Fix: "check appendonly, appendfsync, maxmemory-policy and the replicas by hand"}}
	}
	if len(risks) == 0 {
		return []Concern{{Detail: "appendonly yes, appendfsync always, no replicas, maxmemory-policy noeviction: acknowledged writes survive a restart"}}
	}
	var cs []Concern
	for _, r := range risks {
		// The effect ends with what to do when there is a setting to change.
		effect, fix := r.Effect, "see the redisstore package documentation, Failure modes, for what a loss costs; keep fences that must survive it elsewhere"
		if i := strings.LastIndex(effect, "; "); i >= 0 && (strings.HasPrefix(effect[i+2:], "run with") || strings.HasPrefix(effect[i+2:], "connect to")) {
			effect, fix = effect[:i], effect[i+2:]
		}
		cs = append(cs, Concern{Warn: true, Detail: r.Setting + "=" + r.Value + ": " + effect, Fix: fix})
	}
	return cs
}

var (
	_ Backend = (*Redis)(nil)
	_ Durable = (*redisConn)(nil)
)
