package storeurl

import (
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
)

// Query parameters of a Consul URL that are tenure's own (with
// [ParamPrefix], which Redis and etcd URLs take too).
const (
	// ParamSessionTTLMin is the Consul servers' session_ttl_min
	// ([Target.MinSessionTTL]), a duration such as 1s.
	ParamSessionTTLMin = "tenure_session_ttl_min"
	// ParamLockDelay is the lock-delay of the store's Consul sessions
	// ([Target.LockDelay]), a duration such as 15s.
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
		return nil, nil, Errorf(store.ErrInvalid, nil, "storeurl: store URL %q is not a valid URL: %s; write it as %s", roughRedact(raw), roughRedact(reason), form)
	}
	if u.Opaque != "" || !strings.HasPrefix(raw[len(u.Scheme)+1:], "//") {
		return nil, nil, Errorf(store.ErrInvalid, nil, "storeurl: store URL %q is not a valid %s URL; write it as %s", roughRedact(raw), u.Scheme, form)
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, nil, Errorf(store.ErrInvalid, nil, "storeurl: store URL %q is not a valid URL: its query has a bad escape or separator", roughRedact(raw))
	}
	if u.Fragment != "" {
		return nil, nil, Errorf(store.ErrInvalid, nil, "storeurl: store URL %q has a fragment (#…); write it as %s", roughRedact(raw), form)
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
		return "", false, Errorf(store.ErrInvalid, nil, "storeurl: store URL %s: %s must be given once, with a value", display, key)
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
		return Errorf(store.ErrInvalid, nil, "storeurl: store URL %s: %s=%q is not a duration; write a non-negative number with a unit, such as 1s or 500ms", display, key, v)
	}
	*dst = d
	return nil
}

// refuseParams refuses parameters left in q.
func refuseParams(q url.Values, display, takes string) error {
	for _, key := range slices.Sorted(maps.Keys(q)) {
		return Errorf(store.ErrInvalid, nil, "storeurl: store URL %s: parameter %q is not known; %s", display, key, takes)
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
	if t.Prefix, _, err = takeParam(q, ParamPrefix, t.Display); err != nil {
		return Target{}, err
	}
	if t.Files, err = takeFiles(q, t.Display, strings.EqualFold(u.Scheme, "rediss"), "rediss://…"); err != nil {
		return Target{}, err
	}
	u.RawQuery = q.Encode()
	t.URL = u.String()
	return t, nil
}

// parseHostList parses SCHEME://[USERINFO@]HOST[,HOST…][PATH][?QUERY], a
// URL whose host list may name several hosts of one cluster, which net/url
// refuses: it parses the rest of the URL around a stand-in host. It returns
// that URL (name says which store's, in errors) and its query, the host list and what follows it, as written.
func parseHostList(raw, scheme, name, form string) (u *url.URL, q url.Values, hosts, tail string, err error) {
	_, rest, _ := strings.Cut(raw, ":")
	after, ok := strings.CutPrefix(rest, "//")
	if !ok {
		return nil, nil, "", "", Errorf(store.ErrInvalid, nil, "storeurl: store URL %q is not a valid %s URL; write it as %s", roughRedact(raw), name, form)
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
		t.User = u.User.Username()
		display += url.User(t.User).String()
		if pw, ok := u.User.Password(); ok {
			t.Password = pw
			if pw != "" {
				t.secrets = append(t.secrets, pw)
			}
			display += ":" + mask
		}
		display += "@"
		if t.User == "" {
			return Target{}, Errorf(store.ErrInvalid, nil, "storeurl: store URL %s has a password but no user name; write it as %s", display+hosts, etcdForm)
		}
	}
	t.Display = display + hosts + t.Redact(tail)
	if u.Path != "" && u.Path != "/" {
		return Target{}, Errorf(store.ErrInvalid, nil, "storeurl: store URL %s has a path (%s); an etcd URL names endpoints only: write it as %s", t.Display, u.Path, etcdForm)
	}
	if t.Endpoints, err = endpoints(hosts, defaultEtcdPort, t.Display); err != nil {
		return Target{}, err
	}
	if len(t.Endpoints) == 0 {
		t.Endpoints = []string{defaultEtcdEndpoint}
	}
	if t.Prefix, _, err = takeParam(q, ParamPrefix, t.Display); err != nil {
		return Target{}, err
	}
	if t.Files, err = takeFiles(q, t.Display, true, ""); err != nil {
		return Target{}, err
	}
	if t.Files.Password != "" && (t.Password != "" || t.User == "") {
		return Target{}, Errorf(store.ErrInvalid, nil, "storeurl: store URL %s: with %s, give the user name and no password in the URL: etcd://USER@HOST:PORT?%s=PATH", t.Display, ParamPasswordFile, ParamPasswordFile)
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
			return nil, Errorf(store.ErrInvalid, nil, "storeurl: store URL %q has an empty endpoint; separate HOST:PORT endpoints with single commas", display)
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
			return nil, Errorf(store.ErrInvalid, nil, "storeurl: store URL %q: endpoint %q is not HOST:PORT: %v", display, h, err)
		}
		eps = append(eps, net.JoinHostPort(host, port))
	}
	return eps, nil
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
	t := Target{Kind: Consul, Display: displayURL(u)}
	if u.Path != "" && u.Path != "/" {
		return Target{}, Errorf(store.ErrInvalid, nil, "storeurl: store URL %s has a path (%s); a Consul URL names the agent only: write it as %s", t.Display, u.Path, consulForm)
	}
	if strings.Contains(u.Host, ",") {
		return Target{}, Errorf(store.ErrInvalid, nil, "storeurl: store URL %s names several agents; name the one local Consul agent: %s", t.Display, consulForm)
	}
	if t.Endpoints, err = endpoints(u.Host, defaultConsulPort, t.Display); err != nil {
		return Target{}, err
	}
	if t.Prefix, _, err = takeParam(q, ParamPrefix, t.Display); err != nil {
		return Target{}, err
	}
	if t.Files, err = takeFiles(q, t.Display, true, ""); err != nil {
		return Target{}, err
	}
	if t.Files.Password != "" {
		return Target{}, Errorf(store.ErrInvalid, nil, "storeurl: store URL %s: Consul takes an ACL token, not a password: give %s", t.Display, ParamTokenFile)
	}
	if t.Files.Token, _, err = takeParam(q, ParamTokenFile, t.Display); err != nil {
		return Target{}, err
	}
	if err := takeDuration(q, ParamSessionTTLMin, t.Display, &t.MinSessionTTL); err != nil {
		return Target{}, err
	}
	if err := takeDuration(q, ParamLockDelay, t.Display, &t.LockDelay); err != nil {
		return Target{}, err
	}
	if err := refuseParams(q, t.Display, "a Consul URL takes "+ParamPrefix+", "+ParamSessionTTLMin+", "+ParamLockDelay+", "+ParamTLSCA+", "+ParamTLSCert+", "+ParamTLSKey+" and "+ParamTokenFile); err != nil {
		return Target{}, err
	}
	return t, nil
}
