package cli

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/cmd/tenure/internal/storeurl"
	"github.com/tenure-dev/tenure/internal/testutil"
)

func TestServeUsage(t *testing.T) {
	t.Parallel()
	db := sqliteURL(t)
	for _, args := range [][]string{
		{"serve", "--store", db},
		{"serve", "--http", "", "--store", db},
		{"serve", "--http", "8080", "--store", db},
		{"serve", "--http", "127.0.0.1:0", "--interval", "0s", "--store", db},
		{"serve", "--http", "127.0.0.1:0", "--interval", "5s", "--healthy-within", "5s", "--store", db},
		{"serve", "--http", "127.0.0.1:0", "bad\tname", "--store", db},
		{"serve", "--http", "127.0.0.1:0", "--store", ""},
	} {
		o := cli(t, args...)
		require.Equal(t, ExitUsage, o.code, "%q: %s", args, o.stderr)
		requireOneLine(t, o)
		require.Contains(t, o.stderr, "tenure help serve")
	}
	o := cli(t, "help", "serve")
	require.Equal(t, ExitOK, o.code)
	for _, want := range []string{"Usage: tenure serve --http ADDR", "/metrics", "/healthz", "--healthy-within duration", "(default 10s or 3×--interval, the longer)", "--interval duration (default 1s)"} {
		require.Contains(t, o.stdout, want)
	}
}

// TestServeOnSQLite runs tenure serve until its context ends, and reads
// its page and health check over HTTP.
func TestServeOnSQLite(t *testing.T) {
	t.Parallel()
	db := sqliteURL(t)
	st := openSQLite(t, db)
	h := testutil.Holder(t, "host-1")
	acquire(t, st, "nightly", h)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stderr := newLineWriter()
	done := make(chan int, 1)
	go func() {
		// An --interval above a third of the default health bound raises
		// the bound instead of being refused.
		done <- Main(ctx, []string{"serve", "--http", "127.0.0.1:0", "--interval", "5s", "--store", db}, io.Discard, stderr)
	}()
	line := testutil.Receive(t, stderr.lines, "the serving line", 30*time.Second)
	m := regexp.MustCompile(`^tenure: serving the status of sqlite:\S+ on (http://127\.0\.0\.1:\d+/) \(also /metrics and /healthz\)`).FindStringSubmatch(line)
	require.NotNil(t, m, line)

	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	body := func(path string) (int, string) {
		resp, err := client.Get(m[1] + path)
		require.NoError(t, err)
		defer func() { require.NoError(t, resp.Body.Close()) }()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b)
	}
	code, health := body("healthz")
	require.Equal(t, http.StatusOK, code, "serve read the store before it listened: %s", health)
	require.Contains(t, health, "ok: ")
	code, page := body("")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, page, `data-lease="nightly"`)
	require.Contains(t, page, "host-1/"+h.Instance)
	code, metrics := body("metrics")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, metrics, `tenure_serve_lease_held{lease="nightly"} 1`)

	cancel()
	require.Equal(t, ExitOK, testutil.Receive(t, done, "serve's exit", 30*time.Second))
}

func TestServeAddressInUse(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer func() { require.NoError(t, ln.Close()) }()
	var stdout, stderr bytes.Buffer
	code := Main(context.Background(), []string{"serve", "--http", ln.Addr().String(), "--store", sqliteURL(t)}, &stdout, &stderr)
	require.Equal(t, ExitFailure, code, stderr.String())
	require.Regexp(t, `^tenure: serve: cannot listen on 127\.0\.0\.1:\d+: .*address already in use; choose another address or port\n$`, stderr.String())
}

// TestServeNotMigrated checks that serve fails as status does when its
// first read of the store fails: 78 for a PostgreSQL schema never migrated.
func TestServeNotMigrated(t *testing.T) {
	t.Parallel()
	sep := "?"
	if strings.Contains(testutil.PostgresURL(), "?") {
		sep = "&"
	}
	u := testutil.PostgresURL() + sep + storeurl.ParamSchema + "=" + testutil.UniqueName(t)
	o := cli(t, "serve", "--http", "127.0.0.1:0", "--store", u)
	if o.code == ExitUnavailable {
		testutil.NeedServer(t, "PostgreSQL", errors.New(o.stderr))
	}
	require.Equal(t, ExitNotMigrated, o.code, o.stderr)
	requireOneLine(t, o)
	require.Contains(t, o.stderr, "tenure migrate")
}

func TestServeUnreachableIs69(t *testing.T) {
	t.Parallel()
	o := cli(t, "serve", "--http", "127.0.0.1:0", "--store", "postgres://alice:Sup3rSecret@"+closedPort(t)+"/db?sslmode=disable")
	require.Equal(t, ExitUnavailable, o.code, o.stderr)
	requireOneLine(t, o)
	require.NotContains(t, o.stderr, "Sup3rSecret")
}
