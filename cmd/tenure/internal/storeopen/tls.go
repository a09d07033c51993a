package storeopen

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"strings"

	"github.com/hashicorp/consul/api"
	"github.com/redis/go-redis/v9"

	"github.com/tenure-dev/tenure/cmd/tenure/internal/storeurl"
	"github.com/tenure-dev/tenure/store"
)

// tlsConfig returns base (or a new configuration) with the CA and client
// certificate f names loaded.
func tlsConfig(f storeurl.Files, base *tls.Config, display string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if base != nil {
		cfg = base.Clone()
	}
	if f.TLSCA != "" {
		pem, err := os.ReadFile(f.TLSCA)
		if err != nil {
			return nil, storeurl.Errorf(store.ErrInvalid, nil, "storeurl: store URL %s: cannot read %s: %v", display, storeurl.ParamTLSCA, err)
		}
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem) {
			return nil, storeurl.Errorf(store.ErrInvalid, nil, "storeurl: store URL %s: %s %s holds no PEM certificate", display, storeurl.ParamTLSCA, f.TLSCA)
		}
		cfg.RootCAs = roots
	}
	if f.TLSCert != "" {
		pair, err := tls.LoadX509KeyPair(f.TLSCert, f.TLSKey)
		if err != nil {
			// The error names the files, never the key's content.
			return nil, storeurl.Errorf(store.ErrInvalid, nil, "storeurl: store URL %s: cannot load the client certificate %s with key %s: %v", display, f.TLSCert, f.TLSKey, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// readPassword returns the content of the password file f names, without
// the trailing newline, or "" when it names none.
func readPassword(f storeurl.Files, display string) (string, error) {
	if f.Password == "" {
		return "", nil
	}
	b, err := os.ReadFile(f.Password)
	if err != nil {
		return "", storeurl.Errorf(store.ErrInvalid, nil, "storeurl: store URL %s: cannot read %s: %v", display, storeurl.ParamPasswordFile, err)
	}
	pw := strings.TrimRight(string(b), "\r\n")
	if pw == "" {
		return "", storeurl.Errorf(store.ErrInvalid, nil, "storeurl: store URL %s: %s %s is empty; write the password into it", display, storeurl.ParamPasswordFile, f.Password)
	}
	return pw, nil
}

// applyRedis sets what the URL's files say on go-redis options, and
// returns the password read from a file (a secret to redact), if any.
func applyRedis(t storeurl.Target, opts *redis.Options) (string, error) {
	if opts.TLSConfig != nil {
		cfg, err := tlsConfig(t.Files, opts.TLSConfig, t.Display)
		if err != nil {
			return "", err
		}
		opts.TLSConfig = cfg
	}
	pw, err := readPassword(t.Files, t.Display)
	if err != nil || pw == "" {
		return "", err
	}
	if opts.Password != "" {
		return "", storeurl.Errorf(store.ErrInvalid, nil, "storeurl: store URL %s has a password and %s; give one of them", t.Display, storeurl.ParamPasswordFile)
	}
	opts.Password = pw
	return pw, nil
}

// etcdOptions is what an etcd client gets from the URL's security
// parameters.
type etcdOptions struct {
	TLS      *tls.Config
	Password string
}

// etcdSecurity reads the TLS files and the password file of an etcd URL.
func etcdSecurity(t storeurl.Target) (etcdOptions, error) {
	o := etcdOptions{Password: t.Password}
	if t.Files.UsesTLS() {
		cfg, err := tlsConfig(t.Files, nil, t.Display)
		if err != nil {
			return etcdOptions{}, err
		}
		o.TLS = cfg
	}
	pw, err := readPassword(t.Files, t.Display)
	if err != nil {
		return etcdOptions{}, err
	}
	if pw != "" {
		o.Password = pw
	}
	return o, nil
}

// applyConsul points a Consul client configuration at HTTPS with the TLS
// files, and at the token file, that f names. The Consul client reads the
// files; its errors name them, never their content.
func applyConsul(f storeurl.Files, cfg *api.Config) {
	if f.UsesTLS() {
		cfg.Scheme = "https"
		cfg.TLSConfig.CAFile = f.TLSCA
		cfg.TLSConfig.CertFile = f.TLSCert
		cfg.TLSConfig.KeyFile = f.TLSKey
	}
	if f.Token != "" {
		cfg.TokenFile = f.Token
		cfg.Token = ""
	}
}
