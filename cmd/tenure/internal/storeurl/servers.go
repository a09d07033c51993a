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
