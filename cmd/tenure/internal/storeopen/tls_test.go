package storeopen_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/cmd/tenure/internal/storeopen"
	"github.com/tenure-dev/tenure/cmd/tenure/internal/storeurl"
	"github.com/tenure-dev/tenure/internal/testserver/consulserver"
	"github.com/tenure-dev/tenure/internal/testserver/etcdserver"
	"github.com/tenure-dev/tenure/internal/testserver/pgserver"
	"github.com/tenure-dev/tenure/internal/testserver/redisserver"
	"github.com/tenure-dev/tenure/internal/testserver/testca"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store"
)

// openTLS parses and opens raw and proves the store works with one
// acquisition and, where the store has a wall clock, one read of it over
// the connection tenure doctor makes; it returns the first error of Open,
// Migrate, Acquire or the clock's read, each wrapped by the Target as the
// tenure command prints them.
func openTLS(t *testing.T, raw string) error {
	t.Helper()
	tgt, err := storeurl.Parse(raw)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	o, err := storeopen.Open(ctx, tgt, storeopen.Options{ConnectTimeout: 5 * time.Second})
	if err != nil {
		return err
	}
	t.Cleanup(func() { require.NoError(t, o.Close()) })
	if _, ok := tgt.Backend.(*storeurl.Postgres); ok {
		if _, err := o.Migrate(ctx); err != nil {
			return err
		}
	}
	g, err := o.Store.Acquire(ctx, store.AcquireParams{Name: testutil.UniqueName(t), Holder: testutil.Holder(t, "tls"), TTL: 10 * time.Second})
	if err != nil {
		return tgt.Wrap(err)
	}
	require.Positive(t, g.Token)
	// tenure doctor reads the store's clock over a connection of its own,
	// which must be made with the same files.
	clock, err := o.WallClock(ctx)
	if errors.Is(err, storeurl.ErrNoWallClock) {
		return nil
	}
	require.NoError(t, err)
	defer func() { require.NoError(t, clock.Close()) }()
	at, err := clock.Read(ctx)
	if err != nil {
		return tgt.Wrap(err)
	}
	require.WithinDuration(t, time.Now(), at, time.Minute)
	return nil
}

// writeSecret writes a secret into a file of the test's and returns its path.
func writeSecret(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}

// requireHidden checks that err's message and the URL's Display never show
// secret.
func requireHidden(t *testing.T, raw string, err error, secret string) {
	t.Helper()
	require.Error(t, err)
	require.NotContains(t, err.Error(), secret)
	tgt, perr := storeurl.Parse(raw)
	require.NoError(t, perr)
	require.NotContains(t, tgt.Display, secret)
}

func TestPostgresTLS(t *testing.T) {
	t.Parallel()
	ca := testca.New(t)
	pg := pgserver.OwnPostgresTLS(t, ca)
	base := func(user string) string {
		return fmt.Sprintf("postgres://%s@127.0.0.1:%d/postgres?sslmode=verify-full&sslrootcert=%s", user, pg.Port, url.QueryEscape(ca.CertFile))
	}
	pwUser, certUser := base(pgserver.PostgresTLSPasswordUser), base(pgserver.PostgresTLSCertUser)
	passfile := func(t *testing.T, pw string) string {
		return writeSecret(t, "pgpass", fmt.Sprintf("127.0.0.1:%d:postgres:%s:%s\n", pg.Port, pgserver.PostgresTLSPasswordUser, pw))
	}

	t.Run("VerifyFullWithPassfile", func(t *testing.T) {
		t.Parallel()
		require.NoError(t, openTLS(t, pwUser+"&passfile="+url.QueryEscape(passfile(t, pg.Password))))
	})
	t.Run("PlainConnectionRefused", func(t *testing.T) {
		t.Parallel()
		raw := fmt.Sprintf("postgres://%s@127.0.0.1:%d/postgres?sslmode=disable&passfile=%s", pgserver.PostgresTLSPasswordUser, pg.Port, url.QueryEscape(passfile(t, pg.Password)))
		err := openTLS(t, raw)
		require.ErrorIs(t, err, store.ErrInvalid, "the server refused the connection for the URL's sake")
		require.ErrorContains(t, err, "no encryption")
	})
	t.Run("UnknownCA", func(t *testing.T) {
		t.Parallel()
		other := testca.New(t)
		raw := strings.Replace(pwUser, url.QueryEscape(ca.CertFile), url.QueryEscape(other.CertFile), 1) + "&passfile=" + url.QueryEscape(passfile(t, pg.Password))
		err := openTLS(t, raw)
		require.ErrorIs(t, err, store.ErrUnavailable)
		require.ErrorContains(t, err, "certificate")
	})
	t.Run("WrongPasswordNotShown", func(t *testing.T) {
		t.Parallel()
		const wrong = "Wr0ngPassw0rdSecret"
		raw := pwUser + "&passfile=" + url.QueryEscape(passfile(t, wrong))
		err := openTLS(t, raw)
		require.ErrorIs(t, err, store.ErrInvalid)
		require.ErrorContains(t, err, "password authentication failed")
		requireHidden(t, raw, err, wrong)

		inURL := strings.Replace(pwUser, "@", ":"+wrong+"@", 1)
		err = openTLS(t, inURL)
		require.ErrorIs(t, err, store.ErrInvalid)
		requireHidden(t, inURL, err, wrong)
	})
	t.Run("ClientCertificate", func(t *testing.T) {
		t.Parallel()
		c := ca.Client(t, pgserver.PostgresTLSCertUser)
		require.NoError(t, openTLS(t, certUser+"&sslcert="+url.QueryEscape(c.CertFile)+"&sslkey="+url.QueryEscape(c.KeyFile)))
	})
	t.Run("ClientCertificateRequired", func(t *testing.T) {
		t.Parallel()
		err := openTLS(t, certUser)
		require.ErrorIs(t, err, store.ErrInvalid)
	})
	t.Run("ClientCertificateOfAnotherUser", func(t *testing.T) {
		t.Parallel()
		c := ca.Client(t, "mallory")
		err := openTLS(t, certUser+"&sslcert="+url.QueryEscape(c.CertFile)+"&sslkey="+url.QueryEscape(c.KeyFile))
		require.ErrorIs(t, err, store.ErrInvalid)
		require.ErrorContains(t, err, "certificate authentication failed")
	})
	t.Run("ClientCertificateOfAnotherCA", func(t *testing.T) {
		t.Parallel()
		c := testca.New(t).Client(t, pgserver.PostgresTLSCertUser)
		err := openTLS(t, certUser+"&sslcert="+url.QueryEscape(c.CertFile)+"&sslkey="+url.QueryEscape(c.KeyFile))
		require.ErrorIs(t, err, store.ErrInvalid)
	})
}

func TestRedisTLS(t *testing.T) {
	t.Parallel()
	ca := testca.New(t)
	r := redisserver.OwnRedisTLS(t, ca, false)
	base := fmt.Sprintf("rediss://%s@127.0.0.1:%d/0?tls_ca_file=%s", redisserver.RedisTLSUser, r.Port, url.QueryEscape(ca.CertFile))
	pwFile := func(t *testing.T, pw string) string {
		return url.QueryEscape(writeSecret(t, "redis-password", pw+"\n"))
	}

	t.Run("ACLUserWithPasswordFile", func(t *testing.T) {
		t.Parallel()
		require.NoError(t, openTLS(t, base+"&password_file="+pwFile(t, r.Password)+"&tenure_prefix="+testutil.UniqueName(t)+":"))
	})
	t.Run("PasswordInURL", func(t *testing.T) {
		t.Parallel()
		raw := strings.Replace(base, "@", ":"+r.Password+"@", 1)
		tgt, err := storeurl.Parse(raw)
		require.NoError(t, err)
		require.NotContains(t, tgt.Display, r.Password)
		require.NoError(t, openTLS(t, raw))
	})
	t.Run("WrongPasswordNotShown", func(t *testing.T) {
		t.Parallel()
		const wrong = "Wr0ngRedisSecret"
		raw := base + "&password_file=" + pwFile(t, wrong)
		err := openTLS(t, raw)
		require.ErrorIs(t, err, store.ErrUnavailable)
		require.ErrorContains(t, err, "WRONGPASS")
		requireHidden(t, raw, err, wrong)
	})
	t.Run("NoPassword", func(t *testing.T) {
		t.Parallel()
		err := openTLS(t, base)
		require.ErrorIs(t, err, store.ErrUnavailable)
	})
	t.Run("UnknownCA", func(t *testing.T) {
		t.Parallel()
		err := openTLS(t, fmt.Sprintf("rediss://%s@127.0.0.1:%d/0?password_file=%s", redisserver.RedisTLSUser, r.Port, pwFile(t, r.Password)))
		require.ErrorIs(t, err, store.ErrUnavailable)
		require.ErrorContains(t, err, "certificate")
	})
	t.Run("PlainToTLSPort", func(t *testing.T) {
		t.Parallel()
		err := openTLS(t, fmt.Sprintf("redis://%s@127.0.0.1:%d/0?password_file=%s", redisserver.RedisTLSUser, r.Port, pwFile(t, r.Password)))
		require.ErrorIs(t, err, store.ErrUnavailable)
	})
	t.Run("ClientCertificates", func(t *testing.T) {
		t.Parallel()
		rc := redisserver.OwnRedisTLS(t, ca, true)
		c := ca.Client(t, "worker")
		raw := fmt.Sprintf("rediss://%s@127.0.0.1:%d/0?tls_ca_file=%s&password_file=%s", redisserver.RedisTLSUser, rc.Port, url.QueryEscape(ca.CertFile), pwFile(t, rc.Password))
		require.Error(t, openTLS(t, raw), "the server asks for a client certificate")
		require.NoError(t, openTLS(t, raw+"&tls_cert_file="+url.QueryEscape(c.CertFile)+"&tls_key_file="+url.QueryEscape(c.KeyFile)))
	})
}

// TestSecurityFilesRefused checks the files a URL's security parameters
// name, which Open reads.
func TestSecurityFilesRefused(t *testing.T) {
	t.Parallel()
	t.Run("PasswordTwice", func(t *testing.T) {
		t.Parallel()
		const secret = "InURLSecret99"
		raw := "rediss://u:" + secret + "@127.0.0.1:1/0?password_file=" + url.QueryEscape(writeSecret(t, "pw", "other"))
		err := openTLS(t, raw)
		require.ErrorIs(t, err, store.ErrInvalid)
		require.ErrorContains(t, err, "has a password and password_file")
		require.NotContains(t, err.Error(), secret)
	})
	t.Run("MissingFiles", func(t *testing.T) {
		t.Parallel()
		for _, raw := range []string{
			"rediss://127.0.0.1:1/0?password_file=/nonexistent/pw",
			"rediss://127.0.0.1:1/0?tls_ca_file=/nonexistent/ca.pem",
			"rediss://127.0.0.1:1/0?tls_cert_file=/nonexistent/c.pem&tls_key_file=/nonexistent/k.pem",
		} {
			err := openTLS(t, raw)
			require.ErrorIs(t, err, store.ErrInvalid, raw)
			require.ErrorContains(t, err, "/nonexistent/", raw)
		}
	})
}

func TestEtcdTLS(t *testing.T) {
	t.Parallel()
	ca := testca.New(t)
	e := etcdserver.OwnEtcdTLS(t, ca)
	certOf := func(t *testing.T, user string) string {
		c := ca.Client(t, user)
		return "&tls_cert_file=" + url.QueryEscape(c.CertFile) + "&tls_key_file=" + url.QueryEscape(c.KeyFile)
	}
	withCA := "tls_ca_file=" + url.QueryEscape(ca.CertFile)

	t.Run("ClientCertificateAuthenticates", func(t *testing.T) {
		t.Parallel()
		require.NoError(t, openTLS(t, "etcd://"+e.Addr+"?"+withCA+certOf(t, "root")+"&tenure_prefix="+testutil.UniqueName(t)+"/"))
	})
	t.Run("PasswordFile", func(t *testing.T) {
		t.Parallel()
		pw := url.QueryEscape(writeSecret(t, "etcd-password", e.Password+"\n"))
		require.NoError(t, openTLS(t, "etcd://root@"+e.Addr+"?"+withCA+certOf(t, "nobody")+"&password_file="+pw))
	})
	t.Run("PasswordInURL", func(t *testing.T) {
		t.Parallel()
		raw := "etcd://root:" + e.Password + "@" + e.Addr + "?" + withCA + certOf(t, "nobody")
		tgt, err := storeurl.Parse(raw)
		require.NoError(t, err)
		require.NotContains(t, tgt.Display, e.Password)
		require.NoError(t, openTLS(t, raw))
	})
	t.Run("WrongPasswordNotShown", func(t *testing.T) {
		t.Parallel()
		const wrong = "Wr0ngEtcdSecret"
		raw := "etcd://root@" + e.Addr + "?" + withCA + certOf(t, "nobody") + "&password_file=" + url.QueryEscape(writeSecret(t, "pw", wrong))
		err := openTLS(t, raw)
		require.ErrorIs(t, err, store.ErrUnavailable)
		requireHidden(t, raw, err, wrong)
		inURL := "etcd://root:" + wrong + "@" + e.Addr + "?" + withCA + certOf(t, "nobody")
		err = openTLS(t, inURL)
		require.ErrorIs(t, err, store.ErrUnavailable)
		requireHidden(t, inURL, err, wrong)
	})
	t.Run("CertificateOfAnUnknownUser", func(t *testing.T) {
		t.Parallel()
		require.Error(t, openTLS(t, "etcd://"+e.Addr+"?"+withCA+certOf(t, "nobody")))
	})
	t.Run("NoClientCertificate", func(t *testing.T) {
		t.Parallel()
		require.ErrorIs(t, openTLS(t, "etcd://"+e.Addr+"?"+withCA), store.ErrUnavailable)
	})
	t.Run("UnknownCA", func(t *testing.T) {
		t.Parallel()
		other := testca.New(t)
		require.ErrorIs(t, openTLS(t, "etcd://"+e.Addr+"?tls_ca_file="+url.QueryEscape(other.CertFile)+certOf(t, "root")), store.ErrUnavailable)
	})
	t.Run("PlainToTLSPort", func(t *testing.T) {
		t.Parallel()
		require.ErrorIs(t, openTLS(t, "etcd://"+e.Addr), store.ErrUnavailable)
	})
}

func TestConsulTLS(t *testing.T) {
	t.Parallel()
	ca := testca.New(t)
	c := consulserver.OwnConsulTLS(t, ca)
	withCA := "consul://" + c.HTTPSAddr + "?tls_ca_file=" + url.QueryEscape(ca.CertFile)

	t.Run("TokenFile", func(t *testing.T) {
		t.Parallel()
		tok := url.QueryEscape(writeSecret(t, "consul-token", c.Token+"\n"))
		require.NoError(t, openTLS(t, withCA+"&token_file="+tok+"&tenure_prefix="+testutil.UniqueName(t)+"/"))
	})
	t.Run("WrongTokenNotShown", func(t *testing.T) {
		t.Parallel()
		const wrong = "00000000-0000-4000-8000-00000000beef"
		raw := withCA + "&token_file=" + url.QueryEscape(writeSecret(t, "consul-token", wrong))
		err := openTLS(t, raw)
		require.Error(t, err)
		require.ErrorContains(t, err, "ACL not found")
		requireHidden(t, raw, err, wrong)
	})
	t.Run("NoToken", func(t *testing.T) {
		t.Parallel()
		err := openTLS(t, withCA)
		require.Error(t, err)
		require.ErrorContains(t, err, "Permission denied")
	})
	t.Run("UnknownCA", func(t *testing.T) {
		t.Parallel()
		other := testca.New(t)
		tok := url.QueryEscape(writeSecret(t, "consul-token", c.Token))
		err := openTLS(t, "consul://"+c.HTTPSAddr+"?tls_ca_file="+url.QueryEscape(other.CertFile)+"&token_file="+tok)
		require.ErrorIs(t, err, store.ErrUnavailable)
		require.ErrorContains(t, err, "certificate")
	})
	t.Run("PlainToTLSPort", func(t *testing.T) {
		t.Parallel()
		require.ErrorIs(t, openTLS(t, "consul://"+c.HTTPSAddr), store.ErrUnavailable)
	})
}
