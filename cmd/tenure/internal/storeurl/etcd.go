package storeurl

import (
	"cmp"
	"context"
	"crypto/tls"
	"net/url"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/etcdstore"
)

// Etcd is an etcd:// URL: store/etcdstore, an etcd cluster.
type Etcd struct {
	// Endpoints are the cluster's endpoints, host:port each.
	Endpoints []string
	// User and Password are the URL's user info. Print [Target.Display]
	// instead.
	User, Password string
	// Prefix is the key prefix, from the tenure_prefix parameter; empty
	// for the default.
	Prefix string
	// Files are the files the URL's TLS and password parameters name.
	Files Files
}

// Default ports of an etcd endpoint named without one.
const (
	defaultEtcdPort = "2379"
	// defaultEtcdEndpoint is etcdctl's default, for an etcd:// URL that
	// names no host.
	defaultEtcdEndpoint = "127.0.0.1:" + defaultEtcdPort
)

// Name is "etcd".
func (*Etcd) Name() string { return "etcd" }

// Form is how an etcd URL is written.
func (*Etcd) Form() string { return etcdForm }

// Traits of etcd: its lessor sets the minimum TTL.
func (*Etcd) Traits() Traits { return Traits{TTLFloor: " (etcd's lessor refuses shorter leases)"} }

const etcdForm = "etcd://[USER:PASSWORD@]HOST:PORT[,HOST:PORT…][?tenure_prefix=PREFIX]"

func parseEtcd(raw string) (Target, error) {
	u, q, hosts, tail, err := parseHostList(raw, "etcd", "etcd", etcdForm)
	if err != nil {
		return Target{}, err
	}
	e := &Etcd{}
	t := Target{Backend: e}
	display := "etcd://"
	if u.User != nil {
		e.User = u.User.Username()
		display += url.User(e.User).String()
		if pw, ok := u.User.Password(); ok {
			e.Password = pw
			if pw != "" {
				t.secrets = append(t.secrets, pw)
			}
			display += ":" + mask
		}
		display += "@"
		if e.User == "" {
			return Target{}, Errorf(store.ErrInvalid, nil, "storeurl: store URL %s has a password but no user name; write it as %s", display+hosts, etcdForm)
		}
	}
	t.Display = display + hosts + t.Redact(tail)
	if u.Path != "" && u.Path != "/" {
		return Target{}, Errorf(store.ErrInvalid, nil, "storeurl: store URL %s has a path (%s); an etcd URL names endpoints only: write it as %s", t.Display, u.Path, etcdForm)
	}
	if e.Endpoints, err = endpoints(hosts, defaultEtcdPort, t.Display); err != nil {
		return Target{}, err
	}
	if len(e.Endpoints) == 0 {
		e.Endpoints = []string{defaultEtcdEndpoint}
	}
	if e.Prefix, _, err = takeParam(q, ParamPrefix, t.Display); err != nil {
		return Target{}, err
	}
	if e.Files, err = takeFiles(q, t.Display, true, ""); err != nil {
		return Target{}, err
	}
	if e.Files.Password != "" && (e.Password != "" || e.User == "") {
		return Target{}, Errorf(store.ErrInvalid, nil, "storeurl: store URL %s: with %s, give the user name and no password in the URL: etcd://USER@HOST:PORT?%s=PATH", t.Display, ParamPasswordFile, ParamPasswordFile)
	}
	if err := refuseParams(q, t.Display, "an etcd URL takes only "+ParamPrefix+", "+ParamTLSCA+", "+ParamTLSCert+", "+ParamTLSKey+" and "+ParamPasswordFile); err != nil {
		return Target{}, err
	}
	return t, nil
}

// Open connects, trying the endpoints first, and asks the cluster one
// round trip.
func (e *Etcd) Open(ctx context.Context, t Target, o OpenOptions) (Conn, error) {
	timeout := o.Timeout
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// The etcd client waits for a connection until the call's deadline,
	// however plainly it is refused: try the endpoints first, so that a
	// wrong address fails at once.
	if err := anyAnswers(pctx, e.Endpoints); err != nil {
		return nil, Errorf(store.ErrUnavailable, nil, "storeurl: cannot reach etcd at %s: %s", t.Display, t.Wrap(err))
	}
	sec, err := e.security(t)
	if err != nil {
		return nil, err
	}
	t = t.WithSecrets(sec.Password)
	client, err := clientv3.New(clientv3.Config{
		Endpoints:   e.Endpoints,
		DialTimeout: timeout,
		Username:    e.User,
		Password:    sec.Password,
		TLS:         sec.TLS,
		// The client's own log lines would break tenure's one-line errors;
		// its errors reach the caller anyway.
		Logger: zap.NewNop(),
	})
	if err != nil {
		return nil, Errorf(store.ErrUnavailable, nil, "storeurl: cannot reach etcd at %s: %s", t.Display, t.Wrap(err))
	}
	st, err := etcdstore.New(client, etcdstore.Config{KeyPrefix: e.Prefix})
	if err != nil {
		_ = client.Close() // The configuration error is the one to report.
		return nil, Errorf(store.ErrInvalid, err, "storeurl: %s", t.Redact(err.Error()))
	}
	prefix := cmp.Or(e.Prefix, etcdstore.DefaultKeyPrefix)
	if _, err := client.Get(pctx, prefix); err != nil {
		_ = st.Close()     // It holds nothing yet.
		_ = client.Close() // The failed round trip is the error to report.
		return nil, Errorf(store.ErrUnavailable, nil, "storeurl: cannot reach etcd at %s within %s: %s", t.Display, timeout, t.Wrap(err))
	}
	return &etcdConn{baseConn: baseConn{t: t, st: st}, client: client, prefix: prefix}, nil
}

// etcdSecurity is what an etcd client gets from the URL's security
// parameters.
type etcdSecurity struct {
	TLS      *tls.Config
	Password string
}

// security reads the TLS files and the password file the URL names.
func (e *Etcd) security(t Target) (etcdSecurity, error) {
	o := etcdSecurity{Password: e.Password}
	if e.Files.UsesTLS() {
		cfg, err := tlsConfig(e.Files, nil, t.Display)
		if err != nil {
			return etcdSecurity{}, err
		}
		o.TLS = cfg
	}
	pw, err := readPassword(e.Files, t.Display)
	if err != nil {
		return etcdSecurity{}, err
	}
	if pw != "" {
		o.Password = pw
	}
	return o, nil
}

// MigrationSQL refuses: the store keeps no schema.
func (*Etcd) MigrationSQL(t Target) (string, error) { return noSchema(t) }

// GrantSQL refuses: the store has no SQL roles.
func (*Etcd) GrantSQL(t Target, _ string) (string, error) { return noGrant(t) }

// ReadGrantSQL refuses as GrantSQL does.
func (*Etcd) ReadGrantSQL(t Target, _ string) (string, error) { return noGrant(t) }

// etcdConn is an open etcd store and its client.
type etcdConn struct {
	baseConn
	client *clientv3.Client
	prefix string
}

func (c *etcdConn) Close() error { return c.client.Close() }

// Migrate says there is nothing to migrate.
func (c *etcdConn) Migrate(context.Context) (string, error) { return keysOnly(c.t, c.prefix), nil }

var (
	_ Backend = (*Etcd)(nil)
)
