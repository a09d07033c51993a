package storeurl

import (
	"net/url"
	"strconv"

	"github.com/tenure-dev/tenure/store"
)

// Nats is the kind of a nats:// URL: store/natsstore.
const Nats Kind = "nats"

// Query parameters of a nats:// URL that are tenure's own (with the TLS
// parameters, password_file and token_file).
const (
	// ParamBucket is the JetStream KV bucket ([Target.Bucket]).
	ParamBucket = "tenure_bucket"
	// ParamReplicas is how many servers keep a bucket `tenure migrate`
	// creates ([Target.Replicas]).
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
		t.User = u.User.Username()
		display += url.User(t.User).String()
		if pw, ok := u.User.Password(); ok {
			hasPassword = true
			t.Password = pw
			if pw != "" {
				t.secrets = append(t.secrets, pw)
			}
			display += ":" + mask
		}
		display += "@"
	}
	t.Display = display + hosts + t.Redact(tail)
	if u.User != nil && t.User == "" {
		return Target{}, Errorf(store.ErrInvalid, nil, "storeurl: store URL %s has a password but no user name; write it as %s", t.Display, natsForm)
	}
	if u.Path != "" && u.Path != "/" {
		return Target{}, Errorf(store.ErrInvalid, nil, "storeurl: store URL %s has a path (%s); a NATS URL names servers only: write it as %s", t.Display, u.Path, natsForm)
	}
	if t.Endpoints, err = endpoints(hosts, defaultNatsPort, t.Display); err != nil {
		return Target{}, err
	}
	if len(t.Endpoints) == 0 {
		t.Endpoints = []string{"127.0.0.1:" + defaultNatsPort}
	}
	if t.Bucket, _, err = takeParam(q, ParamBucket, t.Display); err != nil {
		return Target{}, err
	}
	replicas, ok, err := takeParam(q, ParamReplicas, t.Display)
	if err != nil {
		return Target{}, err
	}
	if ok {
		n, err := strconv.Atoi(replicas)
		if err != nil {
			return Target{}, Errorf(store.ErrInvalid, nil, "storeurl: store URL %s: %s=%q is not a number; write 1, 3 or 5", t.Display, ParamReplicas, replicas)
		}
		t.Replicas = n
	}
	if t.Files, err = takeFiles(q, t.Display, true, ""); err != nil {
		return Target{}, err
	}
	if t.Files.Token, _, err = takeParam(q, ParamTokenFile, t.Display); err != nil {
		return Target{}, err
	}
	if t.Files.Creds, _, err = takeParam(q, ParamCredsFile, t.Display); err != nil {
		return Target{}, err
	}
	switch {
	case t.Files.Password != "" && (hasPassword || t.User == ""):
		return Target{}, Errorf(store.ErrInvalid, nil, "storeurl: store URL %s: with %s, give the user name and no password in the URL: nats://USER@HOST:PORT?%s=PATH", t.Display, ParamPasswordFile, ParamPasswordFile)
	case t.User != "" && !hasPassword && t.Files.Password == "":
		return Target{}, Errorf(store.ErrInvalid, nil, "storeurl: store URL %s names a user but no password; give it as USER:PASSWORD@ or in %s (for a NATS token use %s=PATH)", t.Display, ParamPasswordFile, ParamTokenFile)
	case countSet(t.User != "", t.Files.Token != "", t.Files.Creds != "") > 1:
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
