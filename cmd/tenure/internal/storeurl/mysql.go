package storeurl

import (
	"net"
	"strings"

	"github.com/tenure-dev/tenure/store"
)

// MySQL is the kind of a mysql:// or mariadb:// URL: store/mysqlstore.
const MySQL Kind = "mysql"

const (
	mysqlForm        = "mysql://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?tenure_prefix=PREFIX&PARAM=VALUE…] (or mariadb://)"
	defaultMySQLPort = "3306"
)

// parseMySQL reads mysql://USER:PASSWORD@HOST:PORT/DATABASE?PARAMS. The
// database is required. tenure_prefix sets the table prefix; every other
// parameter is for go-sql-driver/mysql, as a DSN parameter (tls, timeout,
// readTimeout, charset, …, or a session variable to SET).
func parseMySQL(raw string) (Target, error) {
	u, q, err := parseServerURL(raw, mysqlForm)
	if err != nil {
		return Target{}, err
	}
	t := Target{Kind: MySQL}
	if u.User != nil {
		t.User = u.User.Username()
		if pw, ok := u.User.Password(); ok && pw != "" {
			t.Password = pw
			t.secrets = append(t.secrets, pw)
		}
	}
	for key, values := range q {
		if isSecretParam(key) {
			for _, v := range values {
				if v != "" {
					t.secrets = append(t.secrets, v)
				}
			}
		}
	}
	t.Display = t.Redact(displayURL(u))
	if t.Prefix, _, err = takeParam(q, ParamPrefix, t.Display); err != nil {
		return Target{}, err
	}
	t.Database = strings.TrimPrefix(u.Path, "/")
	if t.Database == "" || strings.Contains(t.Database, "/") {
		return Target{}, Errorf(store.ErrInvalid, nil, "storeurl: store URL %s names no database; write it as %s", t.Display, mysqlForm)
	}
	t.DriverParams = q.Encode()
	host, port := u.Hostname(), u.Port()
	if host == "" {
		host = "127.0.0.1"
	}
	if port == "" {
		port = defaultMySQLPort
	}
	t.Endpoints = []string{net.JoinHostPort(host, port)}
	return t, nil
}
