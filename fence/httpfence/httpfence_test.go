package httpfence_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tenure-dev/tenure/store"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/fence/httpfence"
	"github.com/tenure-dev/tenure/internal/testutil"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

// testBundle is a handler behind the middleware on an in-memory fence
// store, counting the requests that reach it.
type testBundle struct {
	fences  *httpfence.Memory
	handler http.Handler
	calls   atomic.Int64
	errs    chan error // what OnError saw
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	b := &testBundle{fences: httpfence.NewMemory(), errs: make(chan error, 10)}
	b.handler = b.wrap(t, b.fences)
	return b
}

func (b *testBundle) wrap(t *testing.T, store httpfence.FenceStore) http.Handler {
	t.Helper()
	mw, err := httpfence.Middleware(httpfence.Config{
		Store:    store,
		Resource: func(r *http.Request) string { return r.PathValue("resource") },
		OnError:  func(_ *http.Request, err error) { b.errs <- err },
	})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("PUT /r/{resource...}", mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.calls.Add(1)
		tok, err := httpfence.TokenOf(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		_, _ = fmt.Fprintf(w, "written with token %d\n", tok)
	})))
	return mux
}

// put sends PUT /r/resource with the given Fencing-Token headers (none
// when tokens is empty) and returns the recorded response.
func (b *testBundle) put(t *testing.T, resource string, accept string, tokens ...string) *http.Response {
	t.Helper()
	segments := strings.Split(resource, "/")
	for i, s := range segments {
		segments[i] = url.PathEscape(s)
	}
	req := httptest.NewRequestWithContext(t.Context(), http.MethodPut, "/r/"+strings.Join(segments, "/"), strings.NewReader("data"))
	for _, tok := range tokens {
		req.Header.Add(httpfence.Header, tok)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	rec := httptest.NewRecorder()
	b.handler.ServeHTTP(rec, req)
	resp := rec.Result()
	resp.Request = req
	t.Cleanup(func() { _ = resp.Body.Close() }) // A recorder's body is in memory.
	return resp
}

func body(t *testing.T, resp *http.Response) string {
	t.Helper()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(data)
}

func TestMiddleware(t *testing.T) {
	t.Parallel()

	t.Run("EqualAndGreaterPass", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for i, tok := range []string{"5", "5", "6", "1000"} {
			resp := b.put(t, "invoices", "", tok)
			require.Equal(t, http.StatusOK, resp.StatusCode, "request %d with token %s", i, tok)
			require.Equal(t, "written with token "+tok+"\n", body(t, resp))
			require.NoError(t, httpfence.ResponseError(resp))
		}
		require.Equal(t, int64(4), b.calls.Load())
		require.Equal(t, store.Token(1000), b.fences.Recorded("invoices"))
	})

	t.Run("StaleIsConflict", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		require.Equal(t, http.StatusOK, b.put(t, "invoices", "", "7").StatusCode)
		resp := b.put(t, "invoices", "", "5")
		require.Equal(t, http.StatusConflict, resp.StatusCode)
		require.Equal(t, int64(1), b.calls.Load(), "the stale request never reached the handler")
		require.Equal(t, store.Token(7), b.fences.Recorded("invoices"))

		require.Equal(t, "text/plain; charset=utf-8", resp.Header.Get("Content-Type"))
		text := body(t, resp)
		require.Contains(t, text, `resource "invoices"`)
		require.Contains(t, text, "already accepted token 7")
		require.Contains(t, text, "token 5 is stale")
		require.Equal(t, "5", resp.Header.Get(httpfence.Header))
		require.Equal(t, "7", resp.Header.Get(httpfence.RecordedHeader))

		err := httpfence.ResponseError(resp)
		require.ErrorIs(t, err, store.ErrFenced)
		var fe *store.FencedError
		require.ErrorAs(t, err, &fe)
		require.Equal(t, store.FencedError{Resource: "invoices", Offered: 5, Recorded: 7}, *fe)

		require.Equal(t, http.StatusOK, b.put(t, "other", "", "5").StatusCode, "fences are per resource")
	})

	t.Run("StaleAsProblemJSON", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		resource := "reports/2024 ü/\"q\""
		require.Equal(t, http.StatusOK, b.put(t, resource, "", "9").StatusCode)
		resp := b.put(t, resource, "application/json", "3")
		require.Equal(t, http.StatusConflict, resp.StatusCode)
		require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
		var p struct {
			Title    string `json:"title"`
			Status   int    `json:"status"`
			Detail   string `json:"detail"`
			Resource string `json:"resource"`
			Offered  int64  `json:"offered"`
			Recorded int64  `json:"recorded"`
		}
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&p))
		require.Equal(t, "stale fencing token", p.Title)
		require.Equal(t, http.StatusConflict, p.Status)
		require.Equal(t, resource, p.Resource)
		require.Equal(t, int64(3), p.Offered)
		require.Equal(t, int64(9), p.Recorded)
		require.Contains(t, p.Detail, "stop working under this token")

		var fe *store.FencedError
		require.ErrorAs(t, httpfence.ResponseError(resp), &fe)
		require.Equal(t, resource, fe.Resource, "the resource header round-trips")
		require.Equal(t, int64(1), b.calls.Load())
	})

	t.Run("BadHeaderIsBadRequest", func(t *testing.T) {
		t.Parallel()
		for name, tc := range map[string]struct {
			tokens []string
			want   string
		}{
			"Missing":     {nil, "no Fencing-Token header"},
			"Empty":       {[]string{""}, "header is empty"},
			"Letters":     {[]string{"abc"}, "not a positive decimal integer"},
			"Zero":        {[]string{"0"}, "no longer trusted"},
			"Negative":    {[]string{"-5"}, "not a positive decimal integer"},
			"Plus":        {[]string{"+5"}, "not a positive decimal integer"},
			"Fraction":    {[]string{"1.5"}, "not a positive decimal integer"},
			"Hex":         {[]string{"0x10"}, "not a positive decimal integer"},
			"Overflow":    {[]string{"9223372036854775808"}, "beyond the greatest token"},
			"LeadingZero": {[]string{"05"}, "leading zero"},
			"TooLong":     {[]string{"00000000000000000005"}, "at most 19 digits"},
			"InnerSpace":  {[]string{"1 2"}, "not a positive decimal integer"},
			"CommaList":   {[]string{"5, 6"}, "not a positive decimal integer"},
			"TwoHeaders":  {[]string{"5", "6"}, "2 Fencing-Token headers"},
			"UnicodeFive": {[]string{"５"}, "not a positive decimal integer"},
		} {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				b := setup(t)
				resp := b.put(t, "invoices", "", tc.tokens...)
				require.Equal(t, http.StatusBadRequest, resp.StatusCode)
				text := body(t, resp)
				require.Contains(t, text, tc.want)
				require.True(t, strings.HasPrefix(text, "httpfence: "), text)
				require.Zero(t, b.calls.Load(), "the handler was not called")
				require.Zero(t, b.fences.Recorded("invoices"), "nothing was recorded")
				require.NoError(t, httpfence.ResponseError(resp), "a 400 is not a fencing refusal")
			})
		}
	})

	t.Run("NoResourceIsBadRequest", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		resp := b.put(t, "", "", "5")
		require.Equal(t, http.StatusBadRequest, resp.StatusCode)
		require.Contains(t, body(t, resp), "names no fenced resource")
		require.Zero(t, b.calls.Load())
	})

	t.Run("ResourceRefusedByStore", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		resp := b.put(t, strings.Repeat("r", store.MaxNameLen+1), "", "5")
		require.Equal(t, http.StatusBadRequest, resp.StatusCode)
		require.Contains(t, body(t, resp), "the maximum is 255")
		require.Zero(t, b.calls.Load())
	})

	t.Run("StoreErrors", func(t *testing.T) {
		t.Parallel()
		for name, tc := range map[string]struct {
			err    error
			status int
			want   string
		}{
			"Unavailable": {fmt.Errorf("fence store: %w: connection refused", store.ErrUnavailable), http.StatusServiceUnavailable, "unavailable; retry later"},
			"Other":       {errors.New("fence store: secret internals"), http.StatusInternalServerError, "the fence check failed"},
			"NotMigrated": {fmt.Errorf("fence store: %w", store.ErrNotMigrated), http.StatusInternalServerError, "the fence check failed"},
		} {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				b := &testBundle{errs: make(chan error, 1)}
				b.handler = b.wrap(t, httpfence.FenceFunc(func(context.Context, string, store.Token) error { return tc.err }))
				resp := b.put(t, "invoices", "", "5")
				require.Equal(t, tc.status, resp.StatusCode)
				text := body(t, resp)
				require.Contains(t, text, tc.want)
				require.NotContains(t, text, "internals", "the store's error stays on the server")
				require.Zero(t, b.calls.Load())
				require.Same(t, tc.err, <-b.errs, "OnError saw the store's error")
			})
		}
	})

	t.Run("FencedFromFenceFunc", func(t *testing.T) {
		t.Parallel()
		b := &testBundle{errs: make(chan error, 1)}
		b.handler = b.wrap(t, httpfence.FenceFunc(func(_ context.Context, resource string, tok store.Token) error {
			return fmt.Errorf("redis: %w", &store.FencedError{Resource: resource, Offered: tok, Recorded: tok + 1})
		}))
		resp := b.put(t, "k", "", "5")
		require.Equal(t, http.StatusConflict, resp.StatusCode)
		require.Equal(t, "6", resp.Header.Get(httpfence.RecordedHeader))
		require.Empty(t, b.errs, "a refusal is not an error of the store")
	})

	t.Run("Config", func(t *testing.T) {
		t.Parallel()
		_, err := httpfence.Middleware(httpfence.Config{Resource: func(*http.Request) string { return "r" }})
		require.ErrorIs(t, err, store.ErrInvalid)
		require.ErrorContains(t, err, "Config.Store is nil")
		_, err = httpfence.Middleware(httpfence.Config{Store: httpfence.NewMemory()})
		require.ErrorIs(t, err, store.ErrInvalid)
		require.ErrorContains(t, err, "Config.Resource is nil")
	})
}

func TestWriteError(t *testing.T) {
	t.Parallel()
	req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/", nil)
	rec := httptest.NewRecorder()
	httpfence.WriteError(rec, req, fmt.Errorf("pgfence: fence: %w", &store.FencedError{Resource: "a/b c", Offered: 2, Recorded: 3}))
	resp := rec.Result()
	t.Cleanup(func() { _ = resp.Body.Close() }) // A recorder's body is in memory.
	require.Equal(t, http.StatusConflict, resp.StatusCode)
	require.Equal(t, "a%2Fb%20c", resp.Header.Get(httpfence.ResourceHeader))
	var fe *store.FencedError
	require.ErrorAs(t, httpfence.ResponseError(resp), &fe)
	require.Equal(t, store.FencedError{Resource: "a/b c", Offered: 2, Recorded: 3}, *fe)
}

func TestResponseError(t *testing.T) {
	t.Parallel()
	resp := func(status int, headers ...string) *http.Response {
		r := &http.Response{StatusCode: status, Header: make(http.Header)}
		for i := 0; i+1 < len(headers); i += 2 {
			r.Header.Set(headers[i], headers[i+1])
		}
		return r
	}
	require.NoError(t, httpfence.ResponseError(nil))
	require.NoError(t, httpfence.ResponseError(resp(http.StatusOK)))
	require.NoError(t, httpfence.ResponseError(resp(http.StatusConflict)), "the handler's own 409")
	require.NoError(t, httpfence.ResponseError(resp(http.StatusOK, httpfence.RecordedHeader, "3")))
	err := httpfence.ResponseError(resp(http.StatusConflict, httpfence.RecordedHeader, "3"))
	require.ErrorIs(t, err, store.ErrFenced)
}

func TestParseToken(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]store.Token{
		"1":                   1,
		"42":                  42,
		"9223372036854775807": 9223372036854775807,
	} {
		got, err := httpfence.ParseToken(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for in, why := range map[string]string{
		"":                        "empty",
		"0":                       "is 0",
		"00":                      "leading zero",
		"007":                     "leading zero",
		"01":                      "leading zero",
		"-1":                      "not a positive decimal",
		"+1":                      "not a positive decimal",
		" 1":                      "not a positive decimal",
		"1 ":                      "not a positive decimal",
		"1e3":                     "not a positive decimal",
		"1.0":                     "not a positive decimal",
		"0x10":                    "not a positive decimal",
		"١":                       "not a positive decimal",
		"9223372036854775808":     "beyond the greatest token",
		"9999999999999999999":     "beyond the greatest token",
		"00000000000000000001":    "characters",
		"99999999999999999999999": "characters",
	} {
		_, err := httpfence.ParseToken(in)
		require.ErrorIs(t, err, store.ErrInvalid, "%q", in)
		require.ErrorContains(t, err, why, "%q", in)
	}
}

// FuzzParseToken: whatever parses is positive and formats back to the
// same number; every positive token round-trips.
func FuzzParseToken(f *testing.F) {
	for _, s := range []string{"1", "0", "-1", "+1", "007", "9223372036854775807", "9223372036854775808", "1.0", " 1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := httpfence.ParseToken(s)
		if err != nil {
			if !errors.Is(err, store.ErrInvalid) {
				t.Fatalf("ParseToken(%q): %v does not match ErrInvalid", s, err)
			}
			return
		}
		if tok <= 0 {
			t.Fatalf("ParseToken(%q) = %d, not positive", s, tok)
		}
		back, err := httpfence.ParseToken(tok.String())
		if err != nil || back != tok {
			t.Fatalf("token %d from %q does not round-trip: %d, %v", tok, s, back, err)
		}
		if s != tok.String() {
			t.Fatalf("ParseToken(%q) = %d", s, tok)
		}
	})
}

func TestMemory(t *testing.T) {
	t.Parallel()
	m := httpfence.NewMemory()
	ctx := t.Context()
	require.NoError(t, m.Fence(ctx, "r", 3))
	require.NoError(t, m.Fence(ctx, "r", 3))
	err := m.Fence(ctx, "r", 2)
	require.ErrorIs(t, err, store.ErrFenced)
	var fe *store.FencedError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, store.FencedError{Resource: "r", Offered: 2, Recorded: 3}, *fe)
	require.Equal(t, store.Token(3), m.Recorded("r"))

	for name, call := range map[string]func() error{
		"EmptyResource": func() error { return m.Fence(ctx, "", 1) },
		"LongResource":  func() error { return m.Fence(ctx, strings.Repeat("r", store.MaxNameLen+1), 1) },
		"BadUTF8":       func() error { return m.Fence(ctx, "\xff", 1) },
		"ZeroToken":     func() error { return m.Fence(ctx, "r", 0) },
		"NegativeToken": func() error { return m.Fence(ctx, "r", -4) },
	} {
		require.ErrorIs(t, call(), store.ErrInvalid, name)
	}
	var zero httpfence.Memory
	require.NoError(t, zero.Fence(ctx, "r", 1), "the zero Memory is ready to use")
	require.ErrorIs(t, httpfence.FenceFunc(nil).Fence(ctx, "r", 1), store.ErrInvalid)
	require.ErrorIs(t, (&httpfence.Postgres{}).Fence(ctx, "r", 1), store.ErrInvalid)

	done, cancel := context.WithCancel(ctx)
	cancel()
	require.ErrorIs(t, m.Fence(done, "r", 9), store.ErrUnavailable)
	require.Equal(t, store.Token(3), m.Recorded("r"), "refused calls record nothing")
}

func TestClientSide(t *testing.T) {
	t.Parallel()

	t.Run("SetToken", func(t *testing.T) {
		t.Parallel()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPut, "http://example.invalid/", nil)
		require.NoError(t, err)
		require.NoError(t, httpfence.SetToken(req, 12))
		require.Equal(t, []string{"12"}, req.Header.Values(httpfence.Header))
		require.NoError(t, httpfence.SetToken(req, 13), "replaces")
		require.Equal(t, []string{"13"}, req.Header.Values(httpfence.Header))

		err = httpfence.SetToken(req, 0)
		require.ErrorIs(t, err, store.ErrInvalid)
		require.ErrorContains(t, err, "no longer trusted")
		require.ErrorIs(t, httpfence.SetToken(req, -1), store.ErrInvalid)
		require.Equal(t, []string{"13"}, req.Header.Values(httpfence.Header), "a refused token leaves the request alone")
		require.ErrorIs(t, httpfence.SetToken(nil, 1), store.ErrInvalid)
		bare := &http.Request{}
		require.NoError(t, httpfence.SetToken(bare, 1))
		require.Equal(t, "1", bare.Header.Get(httpfence.Header))
	})

	t.Run("TransportThroughServer", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		srv := httptest.NewServer(b.handler)
		t.Cleanup(srv.Close)
		var tok atomic.Int64
		tok.Store(4)
		client := &http.Client{Transport: &httpfence.Transport{
			Base:  srv.Client().Transport,
			Token: func() store.Token { return store.Token(tok.Load()) },
		}}
		t.Cleanup(client.CloseIdleConnections)
		send := func(withHeader string) (*http.Response, error) {
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPut, srv.URL+"/r/invoices", strings.NewReader("x"))
			require.NoError(t, err)
			if withHeader != "" {
				req.Header.Set(httpfence.Header, withHeader)
			}
			before := req.Header.Values(httpfence.Header)
			resp, err := client.Do(req)
			require.Equal(t, before, req.Header.Values(httpfence.Header), "the caller's request was not modified")
			if err == nil {
				t.Cleanup(func() { _ = resp.Body.Close() }) // Read or not, the body is closed at the end.
			}
			return resp, err
		}

		resp, err := send("")
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Equal(t, "written with token 4\n", body(t, resp))

		tok.Store(6)
		resp, err = send("")
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode)

		// A header of the caller's own is checked against the lease's
		// token, never forwarded unchecked.
		resp, err = send("6")
		require.NoError(t, err, "the lease's own token may be set by the caller")
		require.Equal(t, http.StatusOK, resp.StatusCode)
		for given, why := range map[string]string{
			"5":                   "but the lease's token is 6", // stale
			"9223372036854775807": "but the lease's token is 6", // never issued: would brick the resource
			"06":                  "leading zero",               // not canonical
			"6 ":                  "not a positive decimal",     // not canonical
		} {
			_, err = send(given)
			require.ErrorIs(t, err, store.ErrInvalid, given)
			require.ErrorContains(t, err, why, given)
		}
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPut, srv.URL+"/r/invoices", nil)
		require.NoError(t, err)
		req.Header.Add(httpfence.Header, "6")
		req.Header.Add(httpfence.Header, "6")
		_, err = client.Do(req)
		require.ErrorIs(t, err, store.ErrInvalid)
		require.ErrorContains(t, err, "2 Fencing-Token headers")

		tok.Store(0)
		_, err = send("")
		require.ErrorIs(t, err, store.ErrInvalid)
		require.ErrorContains(t, err, "no longer trusted")
		_, err = send("6")
		require.ErrorIs(t, err, store.ErrInvalid)
		require.ErrorContains(t, err, "no longer trusted", "a caller's header does not outlive the lease's trust")
		require.Equal(t, int64(3), b.calls.Load(), "the refused and the untrusted requests never reached the handler")
	})

	t.Run("TransportWithoutToken", func(t *testing.T) {
		t.Parallel()
		body := &closeRecorder{Reader: strings.NewReader("x")}
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPut, "http://example.invalid/", body)
		require.NoError(t, err)
		_, err = (&httpfence.Transport{}).RoundTrip(req)
		require.ErrorIs(t, err, store.ErrInvalid)
		require.ErrorContains(t, err, "Transport.Token is nil")
		require.True(t, body.closed, "the body is closed even though nothing was sent")
	})
}

type closeRecorder struct {
	io.Reader
	closed bool
}

func (c *closeRecorder) Close() error {
	c.closed = true
	return nil
}
