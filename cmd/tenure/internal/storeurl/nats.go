package storeurl

import (
	"context"
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

// Nats is the kind of a nats:// URL: store/natsstore.
const Nats Kind = "nats"

// Query parameters of a nats:// URL that are tenure's own (with the TLS
// parameters, password_file and token_file).
const (
	// ParamBucket is the JetStream KV bucket (natsstore.Config.Bucket).
	ParamBucket = "tenure_bucket"
	// ParamReplicas is how many servers keep a bucket `tenure migrate`
	// creates (natsstore.Config.Replicas).
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
	t := Target{Kind: Nats}
	display := "nats://"
	hasPassword := false
	if u.User != nil {
		t.user = u.User.Username()
		display += url.User(t.user).String()
		if pw, ok := u.User.Password(); ok {
			hasPassword = true
			t.password = pw
			if pw != "" {
				t.secrets = append(t.secrets, pw)
			}
			display += ":" + mask
		}
		display += "@"
	}
	t.Display = display + hosts + t.Redact(tail)
	if u.User != nil && t.user == "" {
		return Target{}, newError(store.ErrInvalid, nil, "storeurl: store URL %s has a password but no user name; write it as %s", t.Display, natsForm)
	}
	if u.Path != "" && u.Path != "/" {
		return Target{}, newError(store.ErrInvalid, nil, "storeurl: store URL %s has a path (%s); a NATS URL names servers only: write it as %s", t.Display, u.Path, natsForm)
	}
	if t.Endpoints, err = endpoints(hosts, defaultNatsPort, t.Display); err != nil {
		return Target{}, err
	}
	if len(t.Endpoints) == 0 {
		t.Endpoints = []string{"127.0.0.1:" + defaultNatsPort}
	}
	bucket, _, err := takeParam(q, ParamBucket, t.Display)
	if err != nil {
		return Target{}, err
	}
	t.Nats.Bucket = bucket
	replicas, ok, err := takeParam(q, ParamReplicas, t.Display)
	if err != nil {
		return Target{}, err
	}
	if ok {
		n, err := strconv.Atoi(replicas)
		if err != nil {
			return Target{}, newError(store.ErrInvalid, nil, "storeurl: store URL %s: %s=%q is not a number; write 1, 3 or 5", t.Display, ParamReplicas, replicas)
		}
		t.Nats.Replicas = n
	}
	if err := t.Nats.Validate(); err != nil {
		return Target{}, newError(store.ErrInvalid, err, "storeurl: store URL %s: %v", t.Display, err)
	}
	if t.sec, err = takeSecurity(q, t.Display, true, ""); err != nil {
		return Target{}, err
	}
	if t.sec.tokenFile, _, err = takeParam(q, ParamTokenFile, t.Display); err != nil {
		return Target{}, err
	}
	creds, _, err := takeParam(q, ParamCredsFile, t.Display)
	if err != nil {
		return Target{}, err
	}
	t.sec.credsFile = creds
	switch {
	case t.sec.passwordFile != "" && (hasPassword || t.user == ""):
		return Target{}, newError(store.ErrInvalid, nil, "storeurl: store URL %s: with %s, give the user name and no password in the URL: nats://USER@HOST:PORT?%s=PATH", t.Display, ParamPasswordFile, ParamPasswordFile)
	case t.user != "" && !hasPassword && t.sec.passwordFile == "":
		return Target{}, newError(store.ErrInvalid, nil, "storeurl: store URL %s names a user but no password; give it as USER:PASSWORD@ or in %s (for a NATS token use %s=PATH)", t.Display, ParamPasswordFile, ParamTokenFile)
	case countSet(t.user != "", t.sec.tokenFile != "", t.sec.credsFile != "") > 1:
		return Target{}, newError(store.ErrInvalid, nil, "storeurl: store URL %s: give one of a user and password, %s and %s", t.Display, ParamTokenFile, ParamCredsFile)
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

// natsOptions returns the NATS client options the URL's credentials and
// TLS parameters make, reading the files they name, and the secrets it
// read (to redact).
func (t Target) natsOptions(timeout time.Duration) ([]nats.Option, []string, error) {
	opts := []nats.Option{
		nats.Name(applicationName),
		nats.Timeout(timeout),
		// A long-running holder outlives server restarts: reconnect for
		// ever; calls in between fail as unavailable and the holder stands
		// down.
		nats.MaxReconnects(-1),
	}
	var secrets []string
	if t.sec.usesTLS() {
		cfg, err := t.sec.tlsConfig(nil, t.Display)
		if err != nil {
			return nil, nil, err
		}
		opts = append(opts, nats.Secure(cfg))
	}
	pw, err := t.sec.readPassword(t.Display)
	if err != nil {
		return nil, nil, err
	}
	if pw == "" {
		pw = t.password
	} else {
		secrets = append(secrets, pw)
	}
	if t.user != "" {
		opts = append(opts, nats.UserInfo(t.user, pw))
	}
	if t.sec.tokenFile != "" {
		b, err := os.ReadFile(t.sec.tokenFile)
		if err != nil {
			return nil, nil, newError(store.ErrInvalid, nil, "storeurl: store URL %s: cannot read %s: %v", t.Display, ParamTokenFile, err)
		}
		token := strings.TrimRight(string(b), "\r\n")
		if token == "" {
			return nil, nil, newError(store.ErrInvalid, nil, "storeurl: store URL %s: %s %s is empty; write the token into it", t.Display, ParamTokenFile, t.sec.tokenFile)
		}
		secrets = append(secrets, token)
		opts = append(opts, nats.Token(token))
	}
	if t.sec.credsFile != "" {
		if _, err := os.Stat(t.sec.credsFile); err != nil {
			return nil, nil, newError(store.ErrInvalid, nil, "storeurl: store URL %s: cannot read %s: %v", t.Display, ParamCredsFile, err)
		}
		opts = append(opts, nats.UserCredentials(t.sec.credsFile))
	}
	return opts, secrets, nil
}

// openNats connects to the servers and opens the store on its bucket;
// when forMigrate is set it creates a missing bucket first.
func (t Target) openNats(ctx context.Context, timeout time.Duration, forMigrate bool) (*Opened, error) {
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := anyAnswers(pctx, t.Endpoints); err != nil {
		return nil, newError(store.ErrUnavailable, nil, "storeurl: cannot reach NATS at %s: %s", t.Display, oneLine(err.Error()))
	}
	opts, secrets, err := t.natsOptions(timeout)
	if err != nil {
		return nil, err
	}
	t.secrets = append(t.secrets, secrets...)
	servers := make([]string, len(t.Endpoints))
	for i, ep := range t.Endpoints {
		servers[i] = "nats://" + ep
	}
	nc, err := nats.Connect(strings.Join(servers, ","), opts...)
	if err != nil {
		return nil, newError(store.ErrUnavailable, nil, "storeurl: cannot connect to NATS at %s: %s", t.Display, t.Redact(oneLine(err.Error())))
	}
	closeClient := func() error { nc.Close(); return nil }
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, newError(store.ErrUnavailable, err, "storeurl: NATS at %s: %s", t.Display, t.Redact(oneLine(err.Error())))
	}
	if forMigrate {
		if err := natsstore.Migrate(pctx, js, t.Nats); err != nil {
			nc.Close()
			return nil, t.Wrap(err)
		}
	}
	st, err := natsstore.Open(pctx, js, t.Nats)
	if err != nil {
		nc.Close()
		return nil, t.Wrap(err)
	}
	return &Opened{Target: t, Store: st, closeClient: closeClient, nats: st}, nil
}

// migrateNats says what `tenure migrate` made: Open created the bucket.
func (o *Opened) migrateNats() string {
	bucket := o.Target.Nats.Bucket
	if bucket == "" {
		bucket = natsstore.DefaultBucket
	}
	return fmt.Sprintf("the NATS store %s has its bucket %q (stream KV_%s: file storage, one value per key, per-key TTLs)", o.Target.Display, bucket, bucket)
}
