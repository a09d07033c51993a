package storeurl

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/consulstore"
)

// Query parameters of a Consul URL that are tenure's own (with
// [ParamPrefix], which Redis and etcd URLs take too).
const (
	// ParamSessionTTLMin is the Consul servers' session_ttl_min
	// ([Consul.MinSessionTTL]), a duration such as 1s.
	ParamSessionTTLMin = "tenure_session_ttl_min"
	// ParamLockDelay is the lock-delay of the store's Consul sessions
	// ([Consul.LockDelay]), a duration such as 15s.
	ParamLockDelay = "tenure_lock_delay"
)

// Consul is a consul:// URL: store/consulstore, through the local agent.
type Consul struct {
	// Endpoints is the agent's host:port; none for the Consul client's
	// default: $CONSUL_HTTP_ADDR, else 127.0.0.1:8500.
	Endpoints []string
	// Prefix is the key prefix, from the tenure_prefix parameter; empty
	// for the default.
	Prefix string
	// MinSessionTTL is the servers' session_ttl_min, from the
	// tenure_session_ttl_min parameter; zero for the default.
	MinSessionTTL time.Duration
	// LockDelay is the lock-delay of the store's sessions, from the
	// tenure_lock_delay parameter; zero for none.
	LockDelay time.Duration
	// Files are the files the URL's TLS and token parameters name.
	Files Files
}

// defaultConsulPort is the port of an agent named without one.
const defaultConsulPort = "8500"

// Name is "Consul".
func (*Consul) Name() string { return "Consul" }

// Form is how a Consul URL is written.
func (*Consul) Form() string { return consulForm }

// Traits of Consul: the servers' session_ttl_min sets the minimum TTL.
func (*Consul) Traits() Traits {
	return Traits{TTLFloor: " (the Consul servers' session_ttl_min, from tenure_session_ttl_min)",
		TTLFloorHint: fmt.Sprintf(" (the Consul servers' session_ttl_min; when theirs is lower, give it as %s in the store URL)", ParamSessionTTLMin)}
}

const consulForm = "consul://HOST:PORT[?tenure_prefix=PREFIX&tenure_session_ttl_min=D&tenure_lock_delay=D]"

func parseConsul(raw string) (Target, error) {
	u, q, err := parseServerURL(raw, consulForm)
	if err != nil {
		return Target{}, err
	}
	if u.User != nil {
		return Target{}, Errorf(store.ErrInvalid, nil, "storeurl: store URL %q holds credentials; give Consul's ACL token in CONSUL_HTTP_TOKEN or CONSUL_HTTP_TOKEN_FILE instead, and write the URL as %s", roughRedact(raw), consulForm)
	}
	c := &Consul{}
	t := Target{Backend: c, Display: displayURL(u)}
	if u.Path != "" && u.Path != "/" {
		return Target{}, Errorf(store.ErrInvalid, nil, "storeurl: store URL %s has a path (%s); a Consul URL names the agent only: write it as %s", t.Display, u.Path, consulForm)
	}
	if strings.Contains(u.Host, ",") {
		return Target{}, Errorf(store.ErrInvalid, nil, "storeurl: store URL %s names several agents; name the one local Consul agent: %s", t.Display, consulForm)
	}
	if c.Endpoints, err = endpoints(u.Host, defaultConsulPort, t.Display); err != nil {
		return Target{}, err
	}
	if c.Prefix, _, err = takeParam(q, ParamPrefix, t.Display); err != nil {
		return Target{}, err
	}
	if c.Files, err = takeFiles(q, t.Display, true, ""); err != nil {
		return Target{}, err
	}
	if c.Files.Password != "" {
		return Target{}, Errorf(store.ErrInvalid, nil, "storeurl: store URL %s: Consul takes an ACL token, not a password: give %s", t.Display, ParamTokenFile)
	}
	if c.Files.Token, _, err = takeParam(q, ParamTokenFile, t.Display); err != nil {
		return Target{}, err
	}
	if err := takeDuration(q, ParamSessionTTLMin, t.Display, &c.MinSessionTTL); err != nil {
		return Target{}, err
	}
	if err := takeDuration(q, ParamLockDelay, t.Display, &c.LockDelay); err != nil {
		return Target{}, err
	}
	if err := refuseParams(q, t.Display, "a Consul URL takes "+ParamPrefix+", "+ParamSessionTTLMin+", "+ParamLockDelay+", "+ParamTLSCA+", "+ParamTLSCert+", "+ParamTLSKey+" and "+ParamTokenFile); err != nil {
		return Target{}, err
	}
	return t, nil
}

// config returns the store's configuration.
func (c *Consul) config() consulstore.Config {
	return consulstore.Config{KeyPrefix: c.Prefix, MinSessionTTL: c.MinSessionTTL, LockDelay: c.LockDelay}
}

// Open makes a client of the agent and asks the cluster for its leader.
func (c *Consul) Open(ctx context.Context, t Target, o OpenOptions) (Conn, error) {
	timeout := o.Timeout
	// The consul command's environment is honoured: CONSUL_HTTP_TOKEN,
	// CONSUL_HTTP_SSL, CONSUL_CACERT and the rest.
	cfg := api.DefaultConfig()
	if len(c.Endpoints) > 0 {
		cfg.Address = c.Endpoints[0]
	}
	applyConsul(c.Files, cfg)
	tr := cfg.Transport
	closeClient := func() error {
		tr.CloseIdleConnections()
		return nil
	}
	client, err := api.NewClient(cfg)
	if err != nil {
		return nil, Errorf(store.ErrInvalid, nil, "storeurl: store URL %s: %s", t.Display, t.Wrap(err))
	}
	st, err := consulstore.New(client, c.config())
	if err != nil {
		return nil, Errorf(store.ErrInvalid, err, "storeurl: store URL %s: %s", t.Display, t.Wrap(err))
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
		return nil, Errorf(store.ErrUnavailable, nil, "storeurl: cannot reach Consul at %s (%s): %s", t.Display, cfg.Address, t.Wrap(err))
	}
	return &consulConn{baseConn: baseConn{t: t, st: st}, close: closeClient, prefix: st.Config().KeyPrefix}, nil
}

// applyConsul points a Consul client configuration at HTTPS with the TLS
// files, and at the token file, that f names. The Consul client reads the
// files; its errors name them, never their content.
func applyConsul(f Files, cfg *api.Config) {
	if f.UsesTLS() {
		cfg.Scheme = "https"
		cfg.TLSConfig.CAFile = f.TLSCA
		cfg.TLSConfig.CertFile = f.TLSCert
		cfg.TLSConfig.KeyFile = f.TLSKey
	}
	if f.Token != "" {
		cfg.TokenFile = f.Token
		cfg.Token = ""
	}
}

// MigrationSQL refuses: the store keeps no schema.
func (*Consul) MigrationSQL(t Target) (string, error) { return noSchema(t) }

// GrantSQL refuses: the store has no SQL roles.
func (*Consul) GrantSQL(t Target, _ string) (string, error) { return noGrant(t) }

// ReadGrantSQL refuses as GrantSQL does.
func (*Consul) ReadGrantSQL(t Target, _ string) (string, error) { return noGrant(t) }

// consulConn is an open Consul store; close drops its client's idle
// connections.
type consulConn struct {
	baseConn
	close  func() error
	prefix string
}

func (c *consulConn) Close() error { return c.close() }

// Migrate says there is nothing to migrate.
func (c *consulConn) Migrate(context.Context) (string, error) { return keysOnly(c.t, c.prefix), nil }

var (
	_ Backend = (*Consul)(nil)
)
