package storeurl

import (
	"crypto/tls"
	"crypto/x509"
	"net/url"
	"os"
	"strings"

	"github.com/tenure-dev/tenure/store"
)

// Query parameters of a rediss://, etcd://, consul:// or nats:// URL that
// are tenure's own, for TLS and for a password or token kept out of the URL
// (etcd, Consul and NATS speak TLS as soon as a TLS file is given). [Parse]
// removes them before the URL reaches go-redis, and reads none of the
// files: the store is given them when it is opened. (A PostgreSQL URL takes
// libpq's own: sslmode=verify-full, sslrootcert, sslcert, sslkey,
// passfile.)
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
	// own CONSUL_HTTP_TOKEN_FILE works too) or a NATS token.
	ParamTokenFile = "token_file"
)

// Files are the files a URL's TLS and secret parameters name, as given;
// empty when not given.
type Files struct {
	// TLSCA is the tls_ca_file parameter (Redis, etcd, Consul, NATS).
	TLSCA string
	// TLSCert and TLSKey are the tls_cert_file and tls_key_file
	// parameters, given together (Redis, etcd, Consul, NATS).
	TLSCert, TLSKey string
	// Password is the password_file parameter (Redis, etcd, NATS).
	Password string
	// Token is the token_file parameter (Consul, NATS).
	Token string
	// Creds is the creds_file parameter (NATS).
	Creds string
}

// UsesTLS reports whether f names a TLS file: an etcd, Consul or NATS
// store is then reached over TLS.
func (f Files) UsesTLS() bool { return f.TLSCA != "" || f.TLSCert != "" }

// takeFiles removes the TLS and password-file parameters from q. TLS files
// need a scheme that speaks TLS (useTLS).
func takeFiles(q url.Values, display string, useTLS bool, tlsScheme string) (Files, error) {
	var f Files
	for _, p := range []struct {
		key string
		dst *string
	}{{ParamTLSCA, &f.TLSCA}, {ParamTLSCert, &f.TLSCert}, {ParamTLSKey, &f.TLSKey}, {ParamPasswordFile, &f.Password}} {
		v, _, err := takeParam(q, p.key, display)
		if err != nil {
			return Files{}, err
		}
		*p.dst = v
	}
	if (f.TLSCA != "" || f.TLSCert != "" || f.TLSKey != "") && !useTLS {
		return Files{}, Errorf(store.ErrInvalid, nil, "storeurl: store URL %s: %s, %s and %s configure TLS; write the URL as %s to use it", display, ParamTLSCA, ParamTLSCert, ParamTLSKey, tlsScheme)
	}
	if (f.TLSCert == "") != (f.TLSKey == "") {
		return Files{}, Errorf(store.ErrInvalid, nil, "storeurl: store URL %s: give %s and %s together (a client certificate and its key)", display, ParamTLSCert, ParamTLSKey)
	}
	return f, nil
}

// tlsConfig returns base (or a new configuration) with the CA and client
// certificate f names loaded.
func tlsConfig(f Files, base *tls.Config, display string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if base != nil {
		cfg = base.Clone()
	}
	if f.TLSCA != "" {
		pem, err := os.ReadFile(f.TLSCA)
		if err != nil {
			return nil, Errorf(store.ErrInvalid, nil, "storeurl: store URL %s: cannot read %s: %v", display, ParamTLSCA, err)
		}
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem) {
			return nil, Errorf(store.ErrInvalid, nil, "storeurl: store URL %s: %s %s holds no PEM certificate", display, ParamTLSCA, f.TLSCA)
		}
		cfg.RootCAs = roots
	}
	if f.TLSCert != "" {
		pair, err := tls.LoadX509KeyPair(f.TLSCert, f.TLSKey)
		if err != nil {
			// The error names the files, never the key's content.
			return nil, Errorf(store.ErrInvalid, nil, "storeurl: store URL %s: cannot load the client certificate %s with key %s: %v", display, f.TLSCert, f.TLSKey, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// readPassword returns the content of the password file f names, without
// the trailing newline, or "" when it names none.
func readPassword(f Files, display string) (string, error) {
	if f.Password == "" {
		return "", nil
	}
	b, err := os.ReadFile(f.Password)
	if err != nil {
		return "", Errorf(store.ErrInvalid, nil, "storeurl: store URL %s: cannot read %s: %v", display, ParamPasswordFile, err)
	}
	pw := strings.TrimRight(string(b), "\r\n")
	if pw == "" {
		return "", Errorf(store.ErrInvalid, nil, "storeurl: store URL %s: %s %s is empty; write the password into it", display, ParamPasswordFile, f.Password)
	}
	return pw, nil
}
