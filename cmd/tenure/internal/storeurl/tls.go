package storeurl

import (
	"net/url"

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
