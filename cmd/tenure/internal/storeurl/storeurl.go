package storeurl

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"unicode"

	"github.com/tenure-dev/tenure/store"
)

// EnvVar names the environment variable that holds the store URL when no
// --store flag gives one.
const EnvVar = "TENURE_STORE"

// ParamPrefix is the query parameter that sets the prefix of the names a
// store keeps: the table prefix of PostgreSQL and MySQL, the key prefix of
// Redis, etcd and Consul, the prefix of the Lease objects' names on
// Kubernetes.
const ParamPrefix = "tenure_prefix"

// mask replaces every secret in what this package prints.
const mask = "xxxxx"

// Schemes are the URL schemes [Parse] accepts; [Supported] shows a form of
// each, and the tests hold `tenure help` and every --store flag's usage to
// naming them all.
var Schemes = schemes()

// Supported lists the URL forms accepted, for messages.
const Supported = "postgres://…, postgresql://…, mysql://…, mariadb://…, sqlite:PATH, redis://…, rediss://…, etcd://HOST:PORT[,HOST:PORT], consul://HOST:PORT, nats://HOST:PORT[,HOST:PORT], k8s://NAMESPACE or always:REASON"

// Target is a parsed store URL: what to open, and how to show it. Its
// Backend holds what the URL says as plain data; the store's own rules on
// it (the characters a prefix may hold, a bucket's name, ...) are checked
// when the store is opened.
type Target struct {
	// Backend is the store the URL names, with what the URL says of it:
	// a [*Postgres], [*SQLite], [*MySQL], [*Redis], [*Etcd], [*Consul],
	// [*Nats], [*Kubernetes] or [*Always].
	Backend Backend
	// Display is the URL with every password replaced by xxxxx, safe to
	// print and log.
	Display string
	// Default reports that no URL was given and the default SQLite file is
	// used.
	Default bool

	secrets []string // what Redact masks
}

// File is the file on this host that the store keeps its leases in (an
// SQLite store's), or "" for a store kept elsewhere.
func (t Target) File() string {
	if f, ok := t.Backend.(interface{ file() string }); ok {
		return f.file()
	}
	return ""
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
	return defaultSQLite()
}

// Parse parses a store URL (see the package documentation). It reads no
// file and no environment variable except HOME, for a leading ~/ in an
// SQLite path.
func Parse(raw string) (Target, error) {
	raw = strings.TrimSpace(raw)
	if i := strings.IndexFunc(raw, unicode.IsControl); i >= 0 {
		return Target{}, Errorf(store.ErrInvalid, nil, "storeurl: store URL %q has a control character at byte %d; a URL has none: percent-encode it (%%0A for a newline) or remove it", roughRedact(raw), i)
	}
	scheme, _, ok := strings.Cut(raw, ":")
	if !ok || !schemeSyntax.MatchString(scheme) {
		hint := ""
		if strings.ContainsAny(raw, "/.") && !strings.Contains(raw, "://") {
			hint = fmt.Sprintf(" (for an SQLite file write %q)", "sqlite:"+raw)
		}
		return Target{}, Errorf(store.ErrInvalid, nil, "storeurl: store URL %q has no scheme; use %s%s", roughRedact(raw), Supported, hint)
	}
	parse := parserOf(scheme)
	if parse == nil {
		return Target{}, Errorf(store.ErrInvalid, nil, "storeurl: store URL scheme %q is not supported; use %s", scheme, Supported)
	}
	return parse(raw)
}

var schemeSyntax = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*$`)

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
