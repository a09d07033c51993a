package storeopen

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tenure-dev/tenure/cmd/tenure/internal/storeurl"
	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/natsstore"
)

// natsOptions returns the NATS client options the URL's credentials and
// TLS parameters make, reading the files they name, and the secrets it
// read (to redact).
func natsOptions(t storeurl.Target, timeout time.Duration) ([]nats.Option, []string, error) {
	opts := []nats.Option{
		nats.Name(applicationName),
		nats.Timeout(timeout),
		// A long-running holder outlives server restarts: reconnect for
		// ever; calls in between fail as unavailable and the holder stands
		// down.
		nats.MaxReconnects(-1),
	}
	var secrets []string
	if t.Files.UsesTLS() {
		cfg, err := tlsConfig(t.Files, nil, t.Display)
		if err != nil {
			return nil, nil, err
		}
		opts = append(opts, nats.Secure(cfg))
	}
	pw, err := readPassword(t.Files, t.Display)
	if err != nil {
		return nil, nil, err
	}
	if pw == "" {
		pw = t.Password
	} else {
		secrets = append(secrets, pw)
	}
	if t.User != "" {
		opts = append(opts, nats.UserInfo(t.User, pw))
	}
	if t.Files.Token != "" {
		b, err := os.ReadFile(t.Files.Token)
		if err != nil {
			return nil, nil, storeurl.Errorf(store.ErrInvalid, nil, "storeurl: store URL %s: cannot read %s: %v", t.Display, storeurl.ParamTokenFile, err)
		}
		token := strings.TrimRight(string(b), "\r\n")
		if token == "" {
			return nil, nil, storeurl.Errorf(store.ErrInvalid, nil, "storeurl: store URL %s: %s %s is empty; write the token into it", t.Display, storeurl.ParamTokenFile, t.Files.Token)
		}
		secrets = append(secrets, token)
		opts = append(opts, nats.Token(token))
	}
	if t.Files.Creds != "" {
		if _, err := os.Stat(t.Files.Creds); err != nil {
			return nil, nil, storeurl.Errorf(store.ErrInvalid, nil, "storeurl: store URL %s: cannot read %s: %v", t.Display, storeurl.ParamCredsFile, err)
		}
		opts = append(opts, nats.UserCredentials(t.Files.Creds))
	}
	return opts, secrets, nil
}

// natsConfig returns the configuration of the NATS store t names, refusing
// what the store refuses.
func natsConfig(t storeurl.Target) (natsstore.Config, error) {
	cfg := natsstore.Config{Bucket: t.Bucket, Replicas: t.Replicas}
	if err := cfg.Validate(); err != nil {
		return natsstore.Config{}, storeurl.Errorf(store.ErrInvalid, err, "storeurl: store URL %s: %v", t.Display, err)
	}
	return cfg, nil
}

// openNats connects to the servers and opens the store on its bucket;
// when forMigrate is set it creates a missing bucket first.
func openNats(ctx context.Context, t storeurl.Target, timeout time.Duration, forMigrate bool) (*Opened, error) {
	cfg, err := natsConfig(t)
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := anyAnswers(pctx, t.Endpoints); err != nil {
		return nil, storeurl.Errorf(store.ErrUnavailable, nil, "storeurl: cannot reach NATS at %s: %s", t.Display, t.Wrap(err))
	}
	opts, secrets, err := natsOptions(t, timeout)
	if err != nil {
		return nil, err
	}
	t = t.WithSecrets(secrets...)
	servers := make([]string, len(t.Endpoints))
	for i, ep := range t.Endpoints {
		servers[i] = "nats://" + ep
	}
	nc, err := nats.Connect(strings.Join(servers, ","), opts...)
	if err != nil {
		return nil, storeurl.Errorf(store.ErrUnavailable, nil, "storeurl: cannot connect to NATS at %s: %s", t.Display, t.Wrap(err))
	}
	closeClient := func() error { nc.Close(); return nil }
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, storeurl.Errorf(store.ErrUnavailable, err, "storeurl: NATS at %s: %s", t.Display, t.Wrap(err))
	}
	if forMigrate {
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
	return &Opened{Target: t, Store: st, closeClient: closeClient, nats: st}, nil
}

// migrateNats says what `tenure migrate` made: Open created the bucket.
func (o *Opened) migrateNats() string {
	bucket := cmp.Or(o.Target.Bucket, natsstore.DefaultBucket)
	return fmt.Sprintf("the NATS store %s has its bucket %q (stream KV_%s: file storage, one value per key, per-key TTLs)", o.Target.Display, bucket, bucket)
}
