package storeurl

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/natsstore"
)

// Nats is a nats:// URL: store/natsstore, a JetStream KV bucket.
type Nats struct {
	// Endpoints are the servers, host:port each.
	Endpoints []string
	// User and Password are the URL's user info. Print [Target.Display]
	// instead.
	User, Password string
	// Bucket is the JetStream KV bucket, from the tenure_bucket parameter;
	// empty for the default.
	Bucket string
	// Replicas is how many servers keep a bucket `tenure migrate` creates,
	// from the tenure_replicas parameter; zero for the default.
	Replicas int
	// Files are the files the URL's TLS and secret parameters name.
	Files Files
}

// Name is "NATS".
func (*Nats) Name() string { return "NATS" }

// Form is how a NATS URL is written.
func (*Nats) Form() string { return natsForm }

// Traits of NATS: message TTLs in whole seconds.
func (*Nats) Traits() Traits {
	return Traits{Schema: "the JetStream KV bucket exists with file storage, one value per key and per-key TTLs (checked when opened)",
		TTLFloor: " (nats-server keeps message TTLs in whole seconds; the store rounds TTLs up)"}
}

// Query parameters of a nats:// URL that are tenure's own (with the TLS
// parameters, password_file and token_file).
const (
	// ParamBucket is the JetStream KV bucket ([Nats.Bucket]).
	ParamBucket = "tenure_bucket"
	// ParamReplicas is how many servers keep a bucket `tenure migrate`
	// creates ([Nats.Replicas]).
	ParamReplicas = "tenure_replicas"
	// ParamCredsFile names a NATS credentials file (a user JWT and its
	// NKey seed, as `nsc` writes them).
	ParamCredsFile = "creds_file"
)

const (
	natsForm        = "nats://[USER[:PASSWORD]@]HOST:PORT[,HOST:PORT…][?tenure_bucket=NAME]"
	defaultNatsPort = "4222"
)

// parseNats reads nats://USER:PASSWORD@HOST:PORT,HOST:PORT?PARAMS. Several
// servers of one cluster may be listed; the client connects to one and
// fails over to the others.
func parseNats(raw string) (Target, error) {
	u, q, hosts, tail, err := parseHostList(raw, "nats", "NATS", natsForm)
	if err != nil {
		return Target{}, err
	}
	n := &Nats{}
	t := Target{Backend: n}
	display := "nats://"
	hasPassword := false
	if u.User != nil {
		n.User = u.User.Username()
		display += url.User(n.User).String()
		if pw, ok := u.User.Password(); ok {
			hasPassword = true
			n.Password = pw
			if pw != "" {
				t.secrets = append(t.secrets, pw)
			}
			display += ":" + mask
		}
		display += "@"
	}
	t.Display = display + hosts + t.Redact(tail)
	if u.User != nil && n.User == "" {
		return Target{}, Errorf(store.ErrInvalid, nil, "storeurl: store URL %s has a password but no user name; write it as %s", t.Display, natsForm)
	}
	if u.Path != "" && u.Path != "/" {
		return Target{}, Errorf(store.ErrInvalid, nil, "storeurl: store URL %s has a path (%s); a NATS URL names servers only: write it as %s", t.Display, u.Path, natsForm)
	}
	if n.Endpoints, err = endpoints(hosts, defaultNatsPort, t.Display); err != nil {
		return Target{}, err
	}
	if len(n.Endpoints) == 0 {
		n.Endpoints = []string{"127.0.0.1:" + defaultNatsPort}
	}
	if n.Bucket, _, err = takeParam(q, ParamBucket, t.Display); err != nil {
		return Target{}, err
	}
	replicas, ok, err := takeParam(q, ParamReplicas, t.Display)
	if err != nil {
		return Target{}, err
	}
	if ok {
		r, err := strconv.Atoi(replicas)
		if err != nil {
			return Target{}, Errorf(store.ErrInvalid, nil, "storeurl: store URL %s: %s=%q is not a number; write 1, 3 or 5", t.Display, ParamReplicas, replicas)
		}
		n.Replicas = r
	}
	if n.Files, err = takeFiles(q, t.Display, true, ""); err != nil {
		return Target{}, err
	}
	if n.Files.Token, _, err = takeParam(q, ParamTokenFile, t.Display); err != nil {
		return Target{}, err
	}
	if n.Files.Creds, _, err = takeParam(q, ParamCredsFile, t.Display); err != nil {
		return Target{}, err
	}
	switch {
	case n.Files.Password != "" && (hasPassword || n.User == ""):
		return Target{}, Errorf(store.ErrInvalid, nil, "storeurl: store URL %s: with %s, give the user name and no password in the URL: nats://USER@HOST:PORT?%s=PATH", t.Display, ParamPasswordFile, ParamPasswordFile)
	case n.User != "" && !hasPassword && n.Files.Password == "":
		return Target{}, Errorf(store.ErrInvalid, nil, "storeurl: store URL %s names a user but no password; give it as USER:PASSWORD@ or in %s (for a NATS token use %s=PATH)", t.Display, ParamPasswordFile, ParamTokenFile)
	case countSet(n.User != "", n.Files.Token != "", n.Files.Creds != "") > 1:
		return Target{}, Errorf(store.ErrInvalid, nil, "storeurl: store URL %s: give one of a user and password, %s and %s", t.Display, ParamTokenFile, ParamCredsFile)
	}
	if err := refuseParams(q, t.Display, "a NATS URL takes only "+ParamBucket+", "+ParamReplicas+", "+ParamTLSCA+", "+ParamTLSCert+", "+ParamTLSKey+", "+ParamPasswordFile+", "+ParamTokenFile+" and "+ParamCredsFile); err != nil {
		return Target{}, err
	}
	return t, nil
}

func countSet(bs ...bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

// options returns the NATS client options the URL's credentials and
// TLS parameters make, reading the files they name, and the secrets it
// read (to redact).
func (n *Nats) options(t Target, timeout time.Duration) ([]nats.Option, []string, error) {
	opts := []nats.Option{
		nats.Name(applicationName),
		nats.Timeout(timeout),
		// A long-running holder outlives server restarts: reconnect for
		// ever; calls in between fail as unavailable and the holder stands
		// down.
		nats.MaxReconnects(-1),
	}
	var secrets []string
	if n.Files.UsesTLS() {
		cfg, err := tlsConfig(n.Files, nil, t.Display)
		if err != nil {
			return nil, nil, err
		}
		opts = append(opts, nats.Secure(cfg))
	}
	pw, err := readPassword(n.Files, t.Display)
	if err != nil {
		return nil, nil, err
	}
	if pw == "" {
		pw = n.Password
	} else {
		secrets = append(secrets, pw)
	}
	if n.User != "" {
		opts = append(opts, nats.UserInfo(n.User, pw))
	}
	if n.Files.Token != "" {
		b, err := os.ReadFile(n.Files.Token)
		if err != nil {
			return nil, nil, Errorf(store.ErrInvalid, nil, "storeurl: store URL %s: cannot read %s: %v", t.Display, ParamTokenFile, err)
		}
		token := strings.TrimRight(string(b), "\r\n")
		if token == "" {
			return nil, nil, Errorf(store.ErrInvalid, nil, "storeurl: store URL %s: %s %s is empty; write the token into it", t.Display, ParamTokenFile, n.Files.Token)
		}
		secrets = append(secrets, token)
		opts = append(opts, nats.Token(token))
	}
	if n.Files.Creds != "" {
		if _, err := os.Stat(n.Files.Creds); err != nil {
			return nil, nil, Errorf(store.ErrInvalid, nil, "storeurl: store URL %s: cannot read %s: %v", t.Display, ParamCredsFile, err)
		}
		opts = append(opts, nats.UserCredentials(n.Files.Creds))
	}
	return opts, secrets, nil
}

// config returns the store's configuration, refusing what the store
// refuses.
func (n *Nats) config(t Target) (natsstore.Config, error) {
	cfg := natsstore.Config{Bucket: n.Bucket, Replicas: n.Replicas}
	if err := cfg.Validate(); err != nil {
		return natsstore.Config{}, Errorf(store.ErrInvalid, err, "storeurl: store URL %s: %v", t.Display, err)
	}
	return cfg, nil
}

// Open connects to the servers and opens the store on its bucket; for
// `tenure migrate` ([OpenOptions.Migrate]) it creates a missing bucket
// first.
func (n *Nats) Open(ctx context.Context, t Target, o OpenOptions) (Conn, error) {
	timeout := o.Timeout
	cfg, err := n.config(t)
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := anyAnswers(pctx, n.Endpoints); err != nil {
		return nil, Errorf(store.ErrUnavailable, nil, "storeurl: cannot reach NATS at %s: %s", t.Display, t.Wrap(err))
	}
	opts, secrets, err := n.options(t, timeout)
	if err != nil {
		return nil, err
	}
	t = t.WithSecrets(secrets...)
	servers := make([]string, len(n.Endpoints))
	for i, ep := range n.Endpoints {
		servers[i] = "nats://" + ep
	}
	nc, err := nats.Connect(strings.Join(servers, ","), opts...)
	if err != nil {
		return nil, Errorf(store.ErrUnavailable, nil, "storeurl: cannot connect to NATS at %s: %s", t.Display, t.Wrap(err))
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, Errorf(store.ErrUnavailable, err, "storeurl: NATS at %s: %s", t.Display, t.Wrap(err))
	}
	if o.Migrate {
		if err := natsstore.Migrate(pctx, js, cfg); err != nil {
			nc.Close()
			return nil, t.Wrap(err)
		}
	}
	st, err := natsstore.Open(pctx, js, cfg)
	if err != nil {
		nc.Close()
		return nil, t.Wrap(err)
	}
	return &natsConn{baseConn: baseConn{t: t, st: st}, backend: n, nats: st, nc: nc}, nil
}

// MigrationSQL refuses: the store keeps no SQL.
func (*Nats) MigrationSQL(Target) (string, error) {
	return "", Errorf(store.ErrInvalid, nil, "storeurl: the NATS store keeps no SQL: there is nothing to print; tenure migrate (without --print) creates its JetStream KV bucket")
}

// GrantSQL refuses: the store has no SQL roles.
func (*Nats) GrantSQL(t Target, _ string) (string, error) { return noGrant(t) }

// ReadGrantSQL refuses as GrantSQL does.
func (*Nats) ReadGrantSQL(t Target, _ string) (string, error) { return noGrant(t) }

// natsConn is an open NATS store and its connection.
type natsConn struct {
	baseConn
	backend *Nats
	nats    *natsstore.Store
	nc      *nats.Conn
}

func (c *natsConn) Close() error {
	c.nc.Close()
	return nil
}

// CheckSchema opens the store without creating its bucket: a missing
// bucket is behind.
func (b *Nats) CheckSchema(ctx context.Context, t Target, o OpenOptions) ([]string, bool, error) {
	o.Migrate = false
	c, err := b.Open(ctx, t, o)
	if errors.Is(err, store.ErrNotMigrated) {
		return []string{fmt.Sprintf("the NATS store %s has no bucket yet: %v", t.Display, err)}, true, nil
	}
	if err != nil {
		return nil, false, err
	}
	defer func() { _ = c.Close() }() // Nothing was changed; a failed close leaves nothing to do.
	msg, err := c.Migrate(ctx)
	return []string{msg + ": nothing to migrate"}, false, err
}

// Migrate says what `tenure migrate` made: Open created the bucket.
func (c *natsConn) Migrate(context.Context) (string, error) {
	bucket := cmp.Or(c.backend.Bucket, natsstore.DefaultBucket)
	return fmt.Sprintf("the NATS store %s has its bucket %q (stream KV_%s: file storage, one value per key, per-key TTLs)", c.t.Display, bucket, bucket), nil
}

// WallClock reads the server's clock: message TTLs run on the wall clock
// of the stream's server.
func (c *natsConn) WallClock(context.Context) (*WallClock, error) {
	return &WallClock{read: func(ctx context.Context) (time.Time, error) {
		now, err := c.nats.ServerTime(ctx)
		return now, c.t.Wrap(err)
	}, close: func() error { return nil }}, nil
}

// Durability reads how many servers keep the bucket: nats-server
// acknowledges a write before it is on disk, so with one replica a power
// loss forgets the last writes. Whether the server syncs every write
// (sync_always) no client can see.
func (c *natsConn) Durability(context.Context) []Concern {
	n := c.nats.Replicas()
	if n >= 3 {
		return []Concern{{Detail: fmt.Sprintf("the bucket is kept by %d servers: a power loss of one host loses no acknowledged write", n)}}
	}
	servers := "1 server"
	if n != 1 {
		servers = fmt.Sprintf("%d servers", n)
	}
	return []Concern{{Warn: true,
		Detail: fmt.Sprintf("the bucket is kept by %s, and nats-server acknowledges writes before they are on disk (it syncs every 2 minutes unless sync_always is set, which a client cannot see): "+
			"a power loss of its host can forget the leases acquired or released in that time, and let a second holder in beside the first; tokens still grow (their floor is the server's clock), so fences keep the two apart", servers),
		Fix: "set jetstream { sync_always: true } in the server's configuration (this warning stays: tenure cannot see it), or keep the leases in a new bucket of 3 replicas on a cluster (tenure migrate with tenure_replicas=3 and a new tenure_bucket; tokens stay above the old bucket's, their floor being the server's clock)"}}
}

var (
	_ Backend = (*Nats)(nil)
	_ Durable = (*natsConn)(nil)
)
