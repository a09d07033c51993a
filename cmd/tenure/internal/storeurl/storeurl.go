package storeurl

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/tenure-dev/tenure/store"

	"github.com/tenure-dev/tenure/store/sqlitestore"
)

// EnvVar names the environment variable that holds the store URL when no
// --store flag gives one.
const EnvVar = "TENURE_STORE"

// Query parameters of a PostgreSQL URL that are tenure's own; [Parse]
// removes them before the URL reaches pgx.
const (
	// ParamSchema sets the schema of the tenure objects ([Target.Schema]).
	ParamSchema = "tenure_schema"
	// ParamPrefix sets the prefix of their names ([Target.Prefix]), as in
	// a MySQL URL; in a Redis, etcd or Consul URL it is the store's key
	// prefix, in a k8s:// URL the prefix of its Lease objects' names.
	ParamPrefix = "tenure_prefix"
	// ParamListen says where a PostgreSQL store listens for notifications
	// ([Target.Listen], [Target.NoListen]): a postgres:// URL (escaped as
	// a query value) of a direct connection, for a URL that goes through
	// PgBouncer in transaction mode, or "off".
	ParamListen = "tenure_listen"
	// ListenOff is the value of [ParamListen] that turns listening off.
	ListenOff = "off"
)

// mask replaces every secret in what this package prints.
const mask = "xxxxx"

// Schemes are the URL schemes [Parse] accepts; [Supported] shows a form of
// each, and the tests hold `tenure help` and every --store flag's usage to
// naming them all.
var Schemes = []string{"postgres", "postgresql", "mysql", "mariadb", "sqlite", "redis", "rediss", "etcd", "consul", "nats", "k8s", "always"}

// Supported lists the URL forms accepted, for messages.
const Supported = "postgres://…, postgresql://…, mysql://…, mariadb://…, sqlite:PATH, redis://…, rediss://…, etcd://HOST:PORT[,HOST:PORT], consul://HOST:PORT, nats://HOST:PORT[,HOST:PORT], k8s://NAMESPACE or always:REASON"

// Kind is the kind of store a URL names.
type Kind string

// The kinds of store [Parse] knows.
const (
	Postgres Kind = "postgres"
	SQLite   Kind = "sqlite"
	Redis    Kind = "redis"
	Etcd     Kind = "etcd"
	Consul   Kind = "consul"
	// AlwaysLeader is store/alwaysleader: every holder leads, for
	// genuinely idempotent jobs, with a written reason.
	AlwaysLeader Kind = "always"
)

// Name is the kind's name for people: PostgreSQL, SQLite, Redis, etcd or
// Consul.
func (k Kind) Name() string {
	switch k {
	case Postgres:
		return "PostgreSQL"
	case SQLite:
		return "SQLite"
	case Redis:
		return "Redis"
	case Etcd:
		return "etcd"
	case Consul:
		return "Consul"
	case AlwaysLeader:
		return "always-leader"
	case MySQL:
		return "MySQL"
	case Nats:
		return "NATS"
	case Kubernetes:
		return "Kubernetes"
	}
	return string(k)
}

// postgresForm is how the messages of this package ask for a PostgreSQL URL.
const postgresForm = "postgres://USER@HOST:PORT/DATABASE"

// Form is how a URL of the kind is written, as messages ask for it: the
// scheme, the parts and tenure's parameters.
func (k Kind) Form() string {
	switch k {
	case Postgres:
		return postgresForm
	case SQLite:
		return "sqlite:PATH"
	case Redis:
		return redisForm
	case Etcd:
		return etcdForm
	case Consul:
		return consulForm
	case AlwaysLeader:
		return "always:REASON"
	case MySQL:
		return mysqlForm
	case Nats:
		return natsForm
	case Kubernetes:
		return k8sForm
	}
	return Supported
}

// Target is a parsed store URL: what to open, and how to show it. It holds
// what the URL says as plain data; the store's own rules on it (the
// characters a prefix may hold, a bucket's name, ...) are checked when the
// store is opened.
type Target struct {
	// Kind says which store the URL names.
	Kind Kind
	// Display is the URL with every password replaced by xxxxx, safe to
	// print and log.
	Display string
	// Default reports that no URL was given and the default SQLite file is
	// used.
	Default bool
	// Path is the SQLite file, as given (Kind SQLite).
	Path string
	// URL is the PostgreSQL or Redis URL without tenure's parameters, for
	// pgx or go-redis to parse (Kind Postgres, Redis). It holds the
	// password: print Display instead.
	URL string
	// Schema is the schema of the tenure objects, from the tenure_schema
	// parameter; empty for the default (Kind Postgres).
	Schema string
	// Listen is the URL of the connection a PostgreSQL store listens on,
	// from the tenure_listen parameter; empty for one of the URL's own
	// (Kind Postgres). It holds its password: print Display instead.
	Listen string
	// NoListen reports tenure_listen=off: the store does not listen
	// (Kind Postgres).
	NoListen bool
	// Prefix is the tenure_prefix parameter; empty for the store's default.
	// It is the table prefix of PostgreSQL and MySQL, the key prefix of
	// Redis, etcd and Consul, and the prefix of the Lease objects' names
	// on Kubernetes (Kind Postgres, MySQL, Redis, Etcd, Consul,
	// Kubernetes).
	Prefix string
	// Database is the database, from the URL's path (Kind MySQL).
	Database string
	// DriverParams are the URL's other query parameters, encoded, for
	// go-sql-driver/mysql's DSN (Kind MySQL).
	DriverParams string
	// MinSessionTTL is the Consul servers' session_ttl_min, from the
	// tenure_session_ttl_min parameter; zero for the default (Kind Consul).
	MinSessionTTL time.Duration
	// LockDelay is the lock-delay of the store's sessions, from the
	// tenure_lock_delay parameter; zero for none (Kind Consul).
	LockDelay time.Duration
	// Bucket is the JetStream KV bucket, from the tenure_bucket parameter;
	// empty for the default (Kind Nats).
	Bucket string
	// Replicas is how many servers keep a bucket `tenure migrate` creates,
	// from the tenure_replicas parameter; zero for the default (Kind Nats).
	Replicas int
	// Namespace is the namespace of the Lease objects, from the URL's
	// host; empty for the kubeconfig context's, or the pod's (Kind
	// Kubernetes).
	Namespace string
	// Kubeconfig is the kubeconfig file, from the kubeconfig parameter;
	// empty for kubectl's default (Kind Kubernetes).
	Kubeconfig string
	// KubeContext is the kubeconfig context, from the context parameter;
	// empty for its current one (Kind Kubernetes).
	KubeContext string
	// Endpoints are the etcd endpoints or NATS servers, host:port each
	// (Kind Etcd, Nats), the Consul agent's host:port, none for the Consul
	// client's default: $CONSUL_HTTP_ADDR, else 127.0.0.1:8500 (Kind
	// Consul), or the MySQL server's host:port (Kind MySQL).
	Endpoints []string
	// User is the user name of the URL's user info (Kind MySQL, Etcd,
	// Nats).
	User string
	// Password is the password of the URL's user info (Kind MySQL, Etcd,
	// Nats). Print Display instead.
	Password string
	// Files are the files the URL's TLS and secret parameters name (Kind
	// Redis, Etcd, Consul, Nats).
	Files Files
	// Reason is why an always-leader store may run the job anywhere, any
	// number of times at once (Kind AlwaysLeader).
	Reason string

	secrets []string // what Redact masks
}

// Resolve returns the target of flagValue when it is non-empty, else of
// the TENURE_STORE variable read with getenv, else the default SQLite file.
func Resolve(flagValue string, getenv func(string) string) (Target, error) {
	if flagValue != "" {
		return Parse(flagValue)
	}
	if raw := getenv(EnvVar); raw != "" {
		t, err := Parse(raw)
		if err != nil {
			return Target{}, fmt.Errorf("%w (from %s)", err, EnvVar)
		}
		return t, nil
	}
	path, err := sqlitestore.DefaultPath()
	if err != nil {
		return Target{}, Errorf(store.ErrInvalid, err, "storeurl: no store URL given and no default SQLite file: %v; pass --store or set %s", err, EnvVar)
	}
	return Target{Kind: SQLite, Display: "sqlite:" + path, Default: true, Path: path}, nil
}

// Parse parses a store URL (see the package documentation). It reads no
// file and no environment variable except HOME, for a leading ~/ in an
// SQLite path.
func Parse(raw string) (Target, error) {
	raw = strings.TrimSpace(raw)
	scheme, rest, ok := strings.Cut(raw, ":")
	if !ok || !schemeSyntax.MatchString(scheme) {
		hint := ""
		if strings.ContainsAny(raw, "/.") && !strings.Contains(raw, "://") {
			hint = fmt.Sprintf(" (for an SQLite file write %q)", "sqlite:"+raw)
		}
		return Target{}, Errorf(store.ErrInvalid, nil, "storeurl: store URL %q has no scheme; use %s%s", roughRedact(raw), Supported, hint)
	}
	switch s := strings.ToLower(scheme); s {
	case "postgres", "postgresql":
		return parsePostgres(raw)
	case "sqlite":
		return parseSQLite(raw, rest)
	case "redis", "rediss":
		return parseRedis(raw)
	case "etcd":
		return parseEtcd(raw)
	case "consul":
		return parseConsul(raw)
	case "mysql", "mariadb":
		return parseMySQL(raw)
	case "nats":
		return parseNats(raw)
	case "k8s":
		return parseKubernetes(raw)
	case "always":
		return parseAlways(raw, rest)
	default:
		return Target{}, Errorf(store.ErrInvalid, nil, "storeurl: store URL scheme %q is not supported; use %s", scheme, Supported)
	}
}

// parseAlways reads always:REASON; the reason may be percent-encoded. What
// a reason may be is store/alwaysleader's to say, when the store is opened.
func parseAlways(raw, rest string) (Target, error) {
	reason, err := url.PathUnescape(rest)
	if err != nil {
		return Target{}, Errorf(store.ErrInvalid, err, "storeurl: store URL %q: the reason is not valid percent-encoding: %v", raw, err)
	}
	return Target{Kind: AlwaysLeader, Display: "always:" + reason, Reason: reason}, nil
}

var schemeSyntax = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*$`)

func parseSQLite(raw, rest string) (Target, error) {
	path := rest
	if after, ok := strings.CutPrefix(rest, "//"); ok {
		if !strings.HasPrefix(after, "/") {
			return Target{}, Errorf(store.ErrInvalid, nil, "storeurl: store URL %q names a host; an SQLite store is a local file: use sqlite:PATH or sqlite:///ABSOLUTE/PATH", raw)
		}
		path = after
	}
	if path == "" {
		return Target{}, Errorf(store.ErrInvalid, nil, "storeurl: store URL %q has no file path; use sqlite:PATH, e.g. sqlite:/var/lib/myjob/tenure.db", raw)
	}
	if after, ok := strings.CutPrefix(path, "~/"); ok {
		home, err := os.UserHomeDir()
		if err != nil {
			return Target{}, Errorf(store.ErrInvalid, err, "storeurl: store URL %q starts with ~/ but the home directory is unknown: %v; use an absolute path", raw, err)
		}
		path = filepath.Join(home, after)
	}
	return Target{Kind: SQLite, Display: "sqlite:" + path, Path: path}, nil
}

func parsePostgres(raw string) (Target, error) {
	u, err := url.Parse(raw)
	if err != nil {
		reason := err.Error()
		if ue, ok := errors.AsType[*url.Error](err); ok {
			reason = ue.Err.Error() // url.Error repeats the URL, password included
		}
		return Target{}, Errorf(store.ErrInvalid, nil, "storeurl: store URL %q is not a valid URL: %s", roughRedact(raw), roughRedact(reason))
	}
	if u.Opaque != "" || !strings.HasPrefix(raw[len(u.Scheme)+1:], "//") {
		return Target{}, Errorf(store.ErrInvalid, nil, "storeurl: store URL %q is not a valid PostgreSQL URL; write it as %s", roughRedact(raw), postgresForm)
	}
	if u.Fragment != "" || strings.Contains(raw, "#") {
		// Whatever follows "#" is no part of the connection: a password
		// written after it would neither be used nor be known as one.
		return Target{}, Errorf(store.ErrInvalid, nil, "storeurl: store URL %q has a fragment (#…); write it as %s", roughRedact(raw), postgresForm)
	}
	t := Target{Kind: Postgres}
	if u.User != nil {
		if pw, ok := u.User.Password(); ok && pw != "" {
			t.secrets = append(t.secrets, pw)
		}
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return Target{}, Errorf(store.ErrInvalid, nil, "storeurl: store URL %q is not a valid URL: its query has a bad escape or separator", roughRedact(raw))
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
	listen, err := parseListen(q)
	if err != nil {
		return Target{}, err
	}
	t.Display = t.Redact(displayURL(u))
	if listen != nil {
		t.secrets = append(t.secrets, listen.secrets...)
		t.Display = t.Redact(displayURL(withListen(u, listen.Display)))
		t.Listen, t.NoListen = listen.URL, listen.NoListen
	}
	for _, p := range []struct {
		key string
		dst *string
	}{{ParamSchema, &t.Schema}, {ParamPrefix, &t.Prefix}, {ParamListen, new(string)}} {
		vs, ok := q[p.key]
		if !ok {
			continue
		}
		if len(vs) != 1 || vs[0] == "" {
			return Target{}, Errorf(store.ErrInvalid, nil, "storeurl: store URL %s: %s must be given once, with a value", t.Display, p.key)
		}
		*p.dst = vs[0]
		q.Del(p.key)
	}
	if t.Schema != "" || t.Prefix != "" || listen != nil {
		u.RawQuery = q.Encode()
	}
	t.URL = withSlashes(u.String(), u.Scheme)
	return t, nil
}

// parseListen reads the tenure_listen parameter of q: nil when there is
// none, a target whose NoListen is set for "off", else the target of the
// PostgreSQL URL it holds.
func parseListen(q url.Values) (*Target, error) {
	vs, ok := q[ParamListen]
	if !ok {
		return nil, nil
	}
	if len(vs) != 1 || vs[0] == "" {
		return nil, Errorf(store.ErrInvalid, nil, "storeurl: %s must be given once, with a value: %s, or the URL of a direct connection to the server (escaped as a query value)", ParamListen, ListenOff)
	}
	if vs[0] == ListenOff {
		return &Target{NoListen: true, Display: ListenOff}, nil
	}
	if !strings.HasPrefix(vs[0], "postgres://") && !strings.HasPrefix(vs[0], "postgresql://") {
		return nil, Errorf(store.ErrInvalid, nil, "storeurl: %s is %q: write %s, or the postgres:// URL of a direct connection to the server, escaped as a query value", ParamListen, roughRedact(vs[0]), ListenOff)
	}
	inner, err := parsePostgres(vs[0])
	if err != nil {
		return nil, Errorf(store.ErrInvalid, err, "%v (the URL of %s)", err, ParamListen)
	}
	if inner.Schema != "" || inner.Prefix != "" || inner.Listen != "" || inner.NoListen {
		return nil, Errorf(store.ErrInvalid, nil, "storeurl: the URL of %s (%s) takes no tenure_ parameters: those of the store URL hold", ParamListen, inner.Display)
	}
	return &inner, nil
}

// withListen returns u with the value of its tenure_listen parameter
// replaced by display, for Display.
func withListen(u *url.URL, display string) *url.URL {
	c := *u
	q := c.Query()
	q.Set(ParamListen, display)
	c.RawQuery = q.Encode()
	return &c
}

// withSlashes puts back the "//" that url.URL.String drops when a URL has
// neither host nor path ("postgres://?sslmode=disable"): without it pgx
// would not read the string as a URL.
func withSlashes(s, scheme string) string {
	if rest, ok := strings.CutPrefix(s, scheme+":"); ok && !strings.HasPrefix(rest, "//") {
		return scheme + "://" + rest
	}
	return s
}

// isSecretParam reports whether a query parameter's value is to be kept
// secret: password and sslpassword, and any key that ends as they do (a
// mistyped URL such as postgres://?/db?password=… makes "/db?password" a
// key, and its value is still the user's password).
func isSecretParam(key string) bool {
	return strings.HasSuffix(strings.ToLower(key), "password")
}

// displayURL renders u with every password replaced by the mask.
func displayURL(u *url.URL) string {
	c := *u
	if c.User != nil {
		if _, ok := c.User.Password(); ok {
			c.User = url.UserPassword(c.User.Username(), mask)
		}
	}
	q := c.Query()
	masked := false
	for key := range q {
		if isSecretParam(key) {
			q[key] = []string{mask}
			masked = true
		}
	}
	if masked {
		c.RawQuery = q.Encode()
	}
	return withSlashes(c.String(), c.Scheme)
}

// roughRedact masks what looks like a password in a string that is not a
// valid URL: everything between the scheme and the last '@', and every
// password parameter.
func roughRedact(s string) string {
	if i := strings.Index(s, "://"); i >= 0 {
		if at := strings.LastIndex(s, "@"); at > i {
			s = s[:i+3] + mask + s[at:]
		}
	}
	return secretParam.ReplaceAllString(s, "${1}="+mask)
}

var secretParam = regexp.MustCompile(`(?i)((?:ssl)?password)=[^&\s]*`)

// Redact returns s with every secret of t masked. Every message this
// package returns has been through it; use it on messages of errors that
// come from the store's client library.
func (t Target) Redact(s string) string {
	for _, secret := range t.secrets {
		for _, form := range []string{secret, url.QueryEscape(secret), url.PathEscape(secret)} {
			s = strings.ReplaceAll(s, form, mask)
		}
	}
	return s
}

// WithSecrets returns t with secrets (a password or token read from a file
// the URL names) added to what [Target.Redact] masks; empty ones are
// ignored.
func (t Target) WithSecrets(secrets ...string) Target {
	t.secrets = slices.Clip(t.secrets)
	for _, s := range secrets {
		if s != "" {
			t.secrets = append(t.secrets, s)
		}
	}
	return t
}

// Wrap returns err with its message redacted and on one line, keeping
// what it matches with errors.Is and errors.As. Use it on every error of
// the store before printing it.
func (t Target) Wrap(err error) error {
	if err == nil {
		return nil
	}
	return &redacted{msg: t.Redact(oneLine(err.Error())), err: err}
}

type redacted struct {
	msg string
	err error
}

func (e *redacted) Error() string { return e.msg }
func (e *redacted) Unwrap() error { return e.err }

// oneLine joins a multi-line message (pgx indents continuation lines).
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// storeError is the error of this package and of the one that opens
// stores: a message already redacted, the sentinel it matches, and the
// cause (whose message may hold a secret and is never shown).
type storeError struct {
	msg   string
	kind  error
	cause error
}

// Errorf returns an error whose message is format's, matching kind (a
// sentinel such as [store.ErrInvalid]) with errors.Is and wrapping cause,
// whose message is not shown. The message must hold no secret: pass what
// may hold one through [Target.Redact] first.
func Errorf(kind, cause error, format string, args ...any) error {
	return &storeError{msg: fmt.Sprintf(format, args...), kind: kind, cause: cause}
}

func (e *storeError) Error() string { return e.msg }

// Is matches the sentinel the error was classified as.
func (e *storeError) Is(target error) bool { return target == e.kind }

func (e *storeError) Unwrap() error { return e.cause }
