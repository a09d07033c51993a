package storeurl

import (
	"crypto/tls"
	"crypto/x509"
	"net/url"
	"os"
	"strings"

	"github.com/hashicorp/consul/api"
	"github.com/redis/go-redis/v9"

	"github.com/tenure-dev/tenure/store"
)

// Query parameters of a rediss://, etcd:// or consul:// URL that are
// tenure's own, for TLS and for a password or token kept out of the URL
// (etcd and Consul speak TLS as soon as a TLS file is given). [Parse] removes them before the URL
// reaches go-redis, and reads none of the files: [Target.Open] does.
// (A PostgreSQL URL takes libpq's own: sslmode=verify-full, sslrootcert,
// sslcert, sslkey, passfile.)
const (
	// ParamTLSCA names a PEM file of the certificate authorities that
	// vouch for the server; without it the system's roots are used.
	ParamTLSCA = "tls_ca_file"
	// ParamTLSCert and ParamTLSKey name the PEM files of a client
	// certificate and its key, for a server that asks for one.
	ParamTLSCert = "tls_cert_file"
	ParamTLSKey  = "tls_key_file"
	// ParamPasswordFile names a file whose content (without a trailing
	// newline) is the password, so that it appears neither in the URL nor
	// in the process list.
	ParamPasswordFile = "password_file"
	// ParamTokenFile names a file holding a Consul ACL token (Consul's
	// own CONSUL_HTTP_TOKEN_FILE works too).
	ParamTokenFile = "token_file"
)

// security is what a Redis URL says about TLS and where its password is.
type security struct {
	caFile, certFile, keyFile string
	passwordFile              string
	tokenFile                 string // Consul and NATS
	credsFile                 string // NATS only
}

// usesTLS reports whether s names a TLS file.
func (s security) usesTLS() bool { return s.caFile != "" || s.certFile != "" }

// takeSecurity removes the TLS and password-file parameters from q. TLS
// files need a scheme that speaks TLS (useTLS).
func takeSecurity(q url.Values, display string, useTLS bool, tlsScheme string) (security, error) {
	var s security
	for _, p := range []struct {
		key string
		dst *string
	}{{ParamTLSCA, &s.caFile}, {ParamTLSCert, &s.certFile}, {ParamTLSKey, &s.keyFile}, {ParamPasswordFile, &s.passwordFile}} {
		v, _, err := takeParam(q, p.key, display)
		if err != nil {
			return security{}, err
		}
		*p.dst = v
	}
	if (s.caFile != "" || s.certFile != "" || s.keyFile != "") && !useTLS {
		return security{}, newError(store.ErrInvalid, nil, "storeurl: store URL %s: %s, %s and %s configure TLS; write the URL as %s to use it", display, ParamTLSCA, ParamTLSCert, ParamTLSKey, tlsScheme)
	}
	if (s.certFile == "") != (s.keyFile == "") {
		return security{}, newError(store.ErrInvalid, nil, "storeurl: store URL %s: give %s and %s together (a client certificate and its key)", display, ParamTLSCert, ParamTLSKey)
	}
	return s, nil
}

// tlsConfig returns base (or a new configuration) with the CA and client
// certificate s names loaded.
func (s security) tlsConfig(base *tls.Config, display string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if base != nil {
		cfg = base.Clone()
	}
	if s.caFile != "" {
		pem, err := os.ReadFile(s.caFile)
		if err != nil {
			return nil, newError(store.ErrInvalid, nil, "storeurl: store URL %s: cannot read %s: %v", display, ParamTLSCA, err)
		}
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem) {
			return nil, newError(store.ErrInvalid, nil, "storeurl: store URL %s: %s %s holds no PEM certificate", display, ParamTLSCA, s.caFile)
		}
		cfg.RootCAs = roots
	}
	if s.certFile != "" {
		pair, err := tls.LoadX509KeyPair(s.certFile, s.keyFile)
		if err != nil {
			// The error names the files, never the key's content.
			return nil, newError(store.ErrInvalid, nil, "storeurl: store URL %s: cannot load the client certificate %s with key %s: %v", display, s.certFile, s.keyFile, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// readPassword returns the content of the password file, without the
// trailing newline, or "" when s names none.
func (s security) readPassword(display string) (string, error) {
	if s.passwordFile == "" {
		return "", nil
	}
	b, err := os.ReadFile(s.passwordFile)
	if err != nil {
		return "", newError(store.ErrInvalid, nil, "storeurl: store URL %s: cannot read %s: %v", display, ParamPasswordFile, err)
	}
	pw := strings.TrimRight(string(b), "\r\n")
	if pw == "" {
		return "", newError(store.ErrInvalid, nil, "storeurl: store URL %s: %s %s is empty; write the password into it", display, ParamPasswordFile, s.passwordFile)
	}
	return pw, nil
}

// applyRedis sets what s says on go-redis options, and returns the
// password read from a file (a secret to redact), if any.
func (s security) applyRedis(opts *redis.Options, display string) (string, error) {
	if opts.TLSConfig != nil {
		cfg, err := s.tlsConfig(opts.TLSConfig, display)
		if err != nil {
			return "", err
		}
		opts.TLSConfig = cfg
	}
	pw, err := s.readPassword(display)
	if err != nil || pw == "" {
		return "", err
	}
	if opts.Password != "" {
		return "", newError(store.ErrInvalid, nil, "storeurl: store URL %s has a password and %s; give one of them", display, ParamPasswordFile)
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
func (t Target) etcdSecurity() (etcdOptions, error) {
	o := etcdOptions{Password: t.password}
	if t.sec.usesTLS() {
		cfg, err := t.sec.tlsConfig(nil, t.Display)
		if err != nil {
			return etcdOptions{}, err
		}
		o.TLS = cfg
	}
	pw, err := t.sec.readPassword(t.Display)
	if err != nil {
		return etcdOptions{}, err
	}
	if pw != "" {
		o.Password = pw
	}
	return o, nil
}

// applyConsul points a Consul client configuration at HTTPS with the TLS
// files, and at the token file, that s names. The Consul client reads the
// files; its errors name them, never their content.
func (s security) applyConsul(cfg *api.Config) {
	if s.usesTLS() {
		cfg.Scheme = "https"
		cfg.TLSConfig.CAFile = s.caFile
		cfg.TLSConfig.CertFile = s.certFile
		cfg.TLSConfig.KeyFile = s.keyFile
	}
	if s.tokenFile != "" {
		cfg.TokenFile = s.tokenFile
		cfg.Token = ""
	}
}
