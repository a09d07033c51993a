package storeurl

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tenure-dev/tenure/store"

	"github.com/hashicorp/consul/api"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/logging"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/store/consulstore"
	"github.com/tenure-dev/tenure/store/etcdstore"
	"github.com/tenure-dev/tenure/store/redisstore"
)

// Query parameters of a Consul URL that are tenure's own (with
// [ParamPrefix], which Redis and etcd URLs take too).
const (
	// ParamSessionTTLMin is the Consul servers' session_ttl_min
	// (consulstore.Config.MinSessionTTL), a duration such as 1s.
	ParamSessionTTLMin = "tenure_session_ttl_min"
	// ParamLockDelay is the lock-delay of the store's Consul sessions
	// (consulstore.Config.LockDelay), a duration such as 15s.
	ParamLockDelay = "tenure_lock_delay"
)

// Default ports of a server named without one.
const (
	defaultEtcdPort   = "2379"
	defaultConsulPort = "8500"
	// defaultEtcdEndpoint is etcdctl's default, for an etcd:// URL that
	// names no host.
	defaultEtcdEndpoint = "127.0.0.1:" + defaultEtcdPort
)

// parseServerURL parses raw as scheme://… and returns it with its query,
// refusing a URL that is not one.
func parseServerURL(raw, form string) (*url.URL, url.Values, error) {
	u, err := url.Parse(raw)
	if err != nil {
		reason := err.Error()
		if ue, ok := errors.AsType[*url.Error](err); ok {
			reason = ue.Err.Error() // url.Error repeats the URL, password included
		}
		return nil, nil, newError(store.ErrInvalid, nil, "storeurl: store URL %q is not a valid URL: %s; write it as %s", roughRedact(raw), roughRedact(reason), form)
	}
	if u.Opaque != "" || !strings.HasPrefix(raw[len(u.Scheme)+1:], "//") {
		return nil, nil, newError(store.ErrInvalid, nil, "storeurl: store URL %q is not a valid %s URL; write it as %s", roughRedact(raw), u.Scheme, form)
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, nil, newError(store.ErrInvalid, nil, "storeurl: store URL %q is not a valid URL: its query has a bad escape or separator", roughRedact(raw))
	}
	if u.Fragment != "" {
		return nil, nil, newError(store.ErrInvalid, nil, "storeurl: store URL %q has a fragment (#…); write it as %s", roughRedact(raw), form)
	}
	return u, q, nil
}

// takeParam removes the parameter key from q and returns its value. It
// must be given once, with a value.
func takeParam(q url.Values, key, display string) (string, bool, error) {
	vs, ok := q[key]
	if !ok {
		return "", false, nil
	}
	if len(vs) != 1 || vs[0] == "" {
		return "", false, newError(store.ErrInvalid, nil, "storeurl: store URL %s: %s must be given once, with a value", display, key)
	}
	q.Del(key)
	return vs[0], true, nil
}

// takeDuration removes the duration parameter key from q.
func takeDuration(q url.Values, key, display string, dst *time.Duration) error {
	v, ok, err := takeParam(q, key, display)
	if err != nil || !ok {
		return err
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return newError(store.ErrInvalid, nil, "storeurl: store URL %s: %s=%q is not a duration; write a non-negative number with a unit, such as 1s or 500ms", display, key, v)
	}
	*dst = d
	return nil
}

// refuseParams refuses parameters left in q.
func refuseParams(q url.Values, display, takes string) error {
	for _, key := range slices.Sorted(maps.Keys(q)) {
		return newError(store.ErrInvalid, nil, "storeurl: store URL %s: parameter %q is not known; %s", display, key, takes)
	}
	return nil
}

const redisForm = "redis://[USER:PASSWORD@]HOST:PORT[/DB][?tenure_prefix=PREFIX] (rediss:// for TLS)"

func parseRedis(raw string) (Target, error) {
	u, q, err := parseServerURL(raw, redisForm)
	if err != nil {
		return Target{}, err
	}
	t := Target{Kind: Redis}
	if u.User != nil {
		if pw, ok := u.User.Password(); ok && pw != "" {
			t.secrets = append(t.secrets, pw)
		}
	}
	t.Display = t.Redact(displayURL(u))
	prefix, ok, err := takeParam(q, ParamPrefix, t.Display)
	if err != nil {
		return Target{}, err
	}
	if ok {
		t.Redis.KeyPrefix = prefix
	}
	if t.sec, err = takeSecurity(q, t.Display, strings.EqualFold(u.Scheme, "rediss"), "rediss://…"); err != nil {
		return Target{}, err
	}
	u.RawQuery = q.Encode()
	if _, err := t.Redis.Keys(); err != nil {
		return Target{}, newError(store.ErrInvalid, err, "storeurl: store URL %s: %s: %v", t.Display, ParamPrefix, err)
	}
	t.connString = u.String()
	if _, err := redis.ParseURL(t.connString); err != nil {
		return Target{}, newError(store.ErrInvalid, nil, "storeurl: store URL %s: %s; write it as %s", t.Display, t.Redact(err.Error()), redisForm)
	}
	return t, nil
}

func (t Target) openRedis(ctx context.Context, timeout time.Duration) (*Opened, error) {
	opts, err := redis.ParseURL(t.connString)
	if err != nil {
		return nil, newError(store.ErrInvalid, nil, "storeurl: store URL %s: %s", t.Display, t.Redact(err.Error()))
	}
	pw, err := t.sec.applyRedis(opts, t.Display)
	if err != nil {
		return nil, err
	}
	if pw != "" {
		t.secrets = append(t.secrets, pw)
	}
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
		return nil, newError(store.ErrUnavailable, nil, "storeurl: cannot reach Redis at %s: %s", t.Display, oneLine(err.Error()))
	}
	// go-redis logs dial failures to standard error from its pool, which
	// would break tenure's one-line errors; the failure reaches the caller
	// as an error anyway. Its logger is global: this package serves the
	// tenure command alone.
	logging.Disable()
	client := redis.NewClient(opts)
	st, err := redisstore.New(client, t.Redis)
	if err != nil {
		_ = client.Close() // The configuration error is the one to report.
		return nil, newError(store.ErrInvalid, err, "storeurl: %s", t.Redact(err.Error()))
	}
	if err := client.Ping(pctx).Err(); err != nil {
		_ = st.Close()     // It holds nothing yet.
		_ = client.Close() // The failed round trip is the error to report.
		return nil, newError(store.ErrUnavailable, nil, "storeurl: cannot reach Redis at %s: %s", t.Display, t.Redact(oneLine(err.Error())))
	}
	return &Opened{Target: t, Store: st, closeClient: client.Close, prefix: st.Keys().Prefix}, nil
}

// parseHostList parses SCHEME://[USERINFO@]HOST[,HOST…][PATH][?QUERY], a
// URL whose host list may name several hosts of one cluster, which net/url
// refuses: it parses the rest of the URL around a stand-in host. It returns
// that URL (name says which store's, in errors) and its query, the host list and what follows it, as written.
func parseHostList(raw, scheme, name, form string) (u *url.URL, q url.Values, hosts, tail string, err error) {
	_, rest, _ := strings.Cut(raw, ":")
	after, ok := strings.CutPrefix(rest, "//")
	if !ok {
		return nil, nil, "", "", newError(store.ErrInvalid, nil, "storeurl: store URL %q is not a valid %s URL; write it as %s", roughRedact(raw), name, form)
	}
	authority := after
	if i := strings.IndexAny(after, "/?#"); i >= 0 {
		authority, tail = after[:i], after[i:]
	}
	userinfo := ""
	hosts = authority
	if at := strings.LastIndex(authority, "@"); at >= 0 {
		userinfo, hosts = authority[:at+1], authority[at+1:]
	}
	u, q, err = parseServerURL(scheme+"://"+userinfo+"host"+tail, form)
	return u, q, hosts, tail, err
}

const etcdForm = "etcd://[USER:PASSWORD@]HOST:PORT[,HOST:PORT…][?tenure_prefix=PREFIX]"

func parseEtcd(raw string) (Target, error) {
	u, q, hosts, tail, err := parseHostList(raw, "etcd", "etcd", etcdForm)
	if err != nil {
		return Target{}, err
	}
	t := Target{Kind: Etcd}
	display := "etcd://"
	if u.User != nil {
		t.user = u.User.Username()
		display += url.User(t.user).String()
		if pw, ok := u.User.Password(); ok {
			t.password = pw
			if pw != "" {
				t.secrets = append(t.secrets, pw)
			}
			display += ":" + mask
		}
		display += "@"
		if t.user == "" {
			return Target{}, newError(store.ErrInvalid, nil, "storeurl: store URL %s has a password but no user name; write it as %s", display+hosts, etcdForm)
		}
	}
	t.Display = display + hosts + t.Redact(tail)
	if u.Path != "" && u.Path != "/" {
		return Target{}, newError(store.ErrInvalid, nil, "storeurl: store URL %s has a path (%s); an etcd URL names endpoints only: write it as %s", t.Display, u.Path, etcdForm)
	}
	if t.Endpoints, err = endpoints(hosts, defaultEtcdPort, t.Display); err != nil {
		return Target{}, err
	}
	if len(t.Endpoints) == 0 {
		t.Endpoints = []string{defaultEtcdEndpoint}
	}
	prefix, _, err := takeParam(q, ParamPrefix, t.Display)
	if err != nil {
		return Target{}, err
	}
	t.Etcd.KeyPrefix = prefix
	if t.sec, err = takeSecurity(q, t.Display, true, ""); err != nil {
		return Target{}, err
	}
	if t.sec.passwordFile != "" && (t.password != "" || t.user == "") {
		return Target{}, newError(store.ErrInvalid, nil, "storeurl: store URL %s: with %s, give the user name and no password in the URL: etcd://USER@HOST:PORT?%s=PATH", t.Display, ParamPasswordFile, ParamPasswordFile)
	}
	if err := refuseParams(q, t.Display, "an etcd URL takes only "+ParamPrefix+", "+ParamTLSCA+", "+ParamTLSCert+", "+ParamTLSKey+" and "+ParamPasswordFile); err != nil {
		return Target{}, err
	}
	return t, nil
}

// endpoints splits a comma-separated host list into host:port endpoints,
// giving a host without a port the default one. An empty list is none.
func endpoints(hosts, defaultPort, display string) ([]string, error) {
	if hosts == "" {
		return nil, nil
	}
	var eps []string
	for h := range strings.SplitSeq(hosts, ",") {
		if h == "" {
			return nil, newError(store.ErrInvalid, nil, "storeurl: store URL %s has an empty endpoint; separate HOST:PORT endpoints with single commas", display)
		}
		if !strings.Contains(h, ":") || (strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]")) {
			h += ":" + defaultPort
		}
		host, port, err := net.SplitHostPort(h)
		if err == nil && host == "" {
			err = errors.New("no host")
		}
		if err == nil {
			if n, perr := strconv.Atoi(port); perr != nil || n < 1 || n > 65535 {
				err = fmt.Errorf("port %q is not a number from 1 to 65535", port)
			}
		}
		if err != nil {
			return nil, newError(store.ErrInvalid, nil, "storeurl: store URL %s: endpoint %q is not HOST:PORT: %v", display, h, err)
		}
		eps = append(eps, net.JoinHostPort(host, port))
	}
	return eps, nil
}

func (t Target) openEtcd(ctx context.Context, timeout time.Duration) (*Opened, error) {
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// The etcd client waits for a connection until the call's deadline,
	// however plainly it is refused: try the endpoints first, so that a
	// wrong address fails at once.
	if err := anyAnswers(pctx, t.Endpoints); err != nil {
		return nil, newError(store.ErrUnavailable, nil, "storeurl: cannot reach etcd at %s: %s", t.Display, oneLine(err.Error()))
	}
	cfg, err := t.etcdSecurity()
	if err != nil {
		return nil, err
	}
	if cfg.Password != "" {
		t.secrets = append(t.secrets, cfg.Password)
	}
	client, err := clientv3.New(clientv3.Config{
		Endpoints:   t.Endpoints,
		DialTimeout: timeout,
		Username:    t.user,
		Password:    cfg.Password,
		TLS:         cfg.TLS,
		// The client's own log lines would break tenure's one-line errors;
		// its errors reach the caller anyway.
		Logger: zap.NewNop(),
	})
	if err != nil {
		return nil, newError(store.ErrUnavailable, nil, "storeurl: cannot reach etcd at %s: %s", t.Display, t.Redact(oneLine(err.Error())))
	}
	st, err := etcdstore.New(client, t.Etcd)
	if err != nil {
		_ = client.Close() // The configuration error is the one to report.
		return nil, newError(store.ErrInvalid, err, "storeurl: %s", t.Redact(err.Error()))
	}
	prefix := t.Etcd.KeyPrefix
	if prefix == "" {
		prefix = etcdstore.DefaultKeyPrefix
	}
	if _, err := client.Get(pctx, prefix); err != nil {
		_ = st.Close()     // It holds nothing yet.
		_ = client.Close() // The failed round trip is the error to report.
		return nil, newError(store.ErrUnavailable, nil, "storeurl: cannot reach etcd at %s within %s: %s", t.Display, timeout, t.Redact(oneLine(err.Error())))
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

const consulForm = "consul://HOST:PORT[?tenure_prefix=PREFIX&tenure_session_ttl_min=D&tenure_lock_delay=D]"

func parseConsul(raw string) (Target, error) {
	u, q, err := parseServerURL(raw, consulForm)
	if err != nil {
		return Target{}, err
	}
	if u.User != nil {
		return Target{}, newError(store.ErrInvalid, nil, "storeurl: store URL %q holds credentials; give Consul's ACL token in CONSUL_HTTP_TOKEN or CONSUL_HTTP_TOKEN_FILE instead, and write the URL as %s", roughRedact(raw), consulForm)
	}
	t := Target{Kind: Consul, Display: displayURL(u)}
	if u.Path != "" && u.Path != "/" {
		return Target{}, newError(store.ErrInvalid, nil, "storeurl: store URL %s has a path (%s); a Consul URL names the agent only: write it as %s", t.Display, u.Path, consulForm)
	}
	if strings.Contains(u.Host, ",") {
		return Target{}, newError(store.ErrInvalid, nil, "storeurl: store URL %s names several agents; name the one local Consul agent: %s", t.Display, consulForm)
	}
	if t.Endpoints, err = endpoints(u.Host, defaultConsulPort, t.Display); err != nil {
		return Target{}, err
	}
	prefix, _, err := takeParam(q, ParamPrefix, t.Display)
	if err != nil {
		return Target{}, err
	}
	t.Consul.KeyPrefix = prefix
	if t.sec, err = takeSecurity(q, t.Display, true, ""); err != nil {
		return Target{}, err
	}
	if t.sec.passwordFile != "" {
		return Target{}, newError(store.ErrInvalid, nil, "storeurl: store URL %s: Consul takes an ACL token, not a password: give %s", t.Display, ParamTokenFile)
	}
	if t.sec.tokenFile, _, err = takeParam(q, ParamTokenFile, t.Display); err != nil {
		return Target{}, err
	}
	if err := takeDuration(q, ParamSessionTTLMin, t.Display, &t.Consul.MinSessionTTL); err != nil {
		return Target{}, err
	}
	if err := takeDuration(q, ParamLockDelay, t.Display, &t.Consul.LockDelay); err != nil {
		return Target{}, err
	}
	if err := refuseParams(q, t.Display, "a Consul URL takes "+ParamPrefix+", "+ParamSessionTTLMin+", "+ParamLockDelay+", "+ParamTLSCA+", "+ParamTLSCert+", "+ParamTLSKey+" and "+ParamTokenFile); err != nil {
		return Target{}, err
	}
	return t, nil
}

func (t Target) openConsul(ctx context.Context, timeout time.Duration) (*Opened, error) {
	// The consul command's environment is honoured: CONSUL_HTTP_TOKEN,
	// CONSUL_HTTP_SSL, CONSUL_CACERT and the rest.
	cfg := api.DefaultConfig()
	if len(t.Endpoints) > 0 {
		cfg.Address = t.Endpoints[0]
	}
	t.sec.applyConsul(cfg)
	tr := cfg.Transport
	closeClient := func() error {
		tr.CloseIdleConnections()
		return nil
	}
	client, err := api.NewClient(cfg)
	if err != nil {
		return nil, newError(store.ErrInvalid, nil, "storeurl: store URL %s: %s", t.Display, oneLine(err.Error()))
	}
	st, err := consulstore.New(client, t.Consul)
	if err != nil {
		return nil, newError(store.ErrInvalid, err, "storeurl: store URL %s: %s", t.Display, oneLine(err.Error()))
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
		return nil, newError(store.ErrUnavailable, nil, "storeurl: cannot reach Consul at %s (%s): %s", t.Display, cfg.Address, oneLine(err.Error()))
	}
	return &Opened{Target: t, Store: st, closeClient: closeClient, prefix: st.Config().KeyPrefix}, nil
}
