package httpfence

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/tenure-dev/tenure/fence"
	"github.com/tenure-dev/tenure/store"
)

const (
	// Header carries the fencing token of a request, as a positive decimal
	// integer. A 409 response repeats the offered token in it.
	Header = "Fencing-Token"
	// RecordedHeader carries, on a 409 response, the token the resource
	// had already accepted.
	RecordedHeader = "Fencing-Token-Recorded"
	// ResourceHeader carries, on a 409 response, the resource that refused
	// the request, percent-encoded as a URL path segment.
	ResourceHeader = "Fencing-Resource"
)

// FenceStore keeps the highest token each resource accepted.
type FenceStore interface {
	// Fence records tok for resource when it is equal to or greater than
	// every token recorded for resource before, and fails with a
	// [*store.FencedError] (matching [store.ErrFenced]) when a greater
	// one was. Bad input fails with an error matching [store.ErrInvalid];
	// an unreachable store with one matching [store.ErrUnavailable].
	Fence(ctx context.Context, resource string, tok store.Token) error
}

// FenceFunc is a function used as a [FenceStore].
type FenceFunc func(ctx context.Context, resource string, tok store.Token) error

// Fence calls f; a nil f fails with an error matching [store.ErrInvalid].
func (f FenceFunc) Fence(ctx context.Context, resource string, tok store.Token) error {
	if f == nil {
		return fmt.Errorf("httpfence: %w: the FenceFunc is nil", store.ErrInvalid)
	}
	return f(ctx, resource, tok)
}

// Config configures [Middleware].
type Config struct {
	// Store records and checks the tokens. Required.
	Store FenceStore

	// Resource names the resource a request writes to; its fence is
	// checked. Required. Returning "" answers the request with 400.
	Resource func(r *http.Request) string

	// OnError, when set, is called with each error of the fence store that
	// answered a request with 500 or 503, for logging. Default: none.
	OnError func(r *http.Request, err error)
}

// Middleware returns middleware that fences every request it wraps, as the
// package documentation describes. It fails with an error matching
// [store.ErrInvalid] when a required field of cfg is missing.
func Middleware(cfg Config) (func(http.Handler) http.Handler, error) {
	switch {
	case cfg.Store == nil:
		return nil, fmt.Errorf("httpfence: %w: Config.Store is nil; use NewPostgres, NewMemory or a FenceFunc", store.ErrInvalid)
	case cfg.Resource == nil:
		return nil, fmt.Errorf("httpfence: %w: Config.Resource is nil; give a function naming the resource each request writes to", store.ErrInvalid)
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			resource := cfg.Resource(r)
			if resource == "" {
				writeProblem(w, r, http.StatusBadRequest,
					fmt.Sprintf("httpfence: %s %s names no fenced resource", r.Method, r.URL.Path), nil)
				return
			}
			tok, err := TokenOf(r)
			if err != nil {
				WriteError(w, r, err)
				return
			}
			if err := cfg.Store.Fence(r.Context(), resource, tok); err != nil {
				if cfg.OnError != nil && statusOf(err) >= 500 {
					cfg.OnError(r, err)
				}
				WriteError(w, r, err)
				return
			}
			next.ServeHTTP(w, r)
		})
	}, nil
}

// ParseToken parses a [Header] value: a positive decimal integer of ASCII
// digits only, no sign, no space. Anything else fails with an error
// matching [store.ErrInvalid].
func ParseToken(s string) (store.Token, error) {
	if s == "" {
		return 0, fmt.Errorf("httpfence: %w: the %s header is empty; send the token of the lease this write is made under", store.ErrInvalid, Header)
	}
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("httpfence: %w: the %s header %q is not a positive decimal integer", store.ErrInvalid, Header, s)
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	switch {
	case err != nil:
		return 0, fmt.Errorf("httpfence: %w: the %s header %q is out of range", store.ErrInvalid, Header, s)
	case v == 0:
		return 0, fmt.Errorf("httpfence: %w: the %s header is 0; a lease whose token is 0 is no longer trusted and must not write", store.ErrInvalid, Header)
	}
	return store.Token(v), nil
}

// TokenOf returns the token of r's [Header]. A request without the header,
// with more than one, or with a malformed one fails with an error matching
// [store.ErrInvalid].
func TokenOf(r *http.Request) (store.Token, error) {
	vals := r.Header.Values(Header)
	switch len(vals) {
	case 0:
		return 0, fmt.Errorf("httpfence: %w: the request has no %s header; send the token of the lease this write is made under (httpfence.SetToken or httpfence.Transport)", store.ErrInvalid, Header)
	case 1:
		return ParseToken(vals[0])
	}
	return 0, fmt.Errorf("httpfence: %w: the request has %d %s headers; send exactly one", store.ErrInvalid, len(vals), Header)
}

// SetToken sets r's [Header] to tok. tok must be positive: a lease whose
// Token is 0 is no longer trusted and must not write, so SetToken refuses
// it with an error matching [store.ErrInvalid] and leaves r unchanged.
func SetToken(r *http.Request, tok store.Token) error {
	if err := checkToken(tok); err != nil {
		return err
	}
	if r == nil {
		return fmt.Errorf("httpfence: %w: request is nil", store.ErrInvalid)
	}
	if r.Header == nil {
		r.Header = make(http.Header)
	}
	r.Header.Set(Header, tok.String())
	return nil
}

// Transport is an [http.RoundTripper] that sets [Header] on every request
// it sends to the token Token returns at that moment, typically a lease's
// Token method. A request that already carries the header is sent as it
// is. When Token returns 0 or less (the lease is no longer trusted),
// nothing is sent and RoundTrip fails with an error matching
// [store.ErrInvalid].
type Transport struct {
	// Base sends the requests. Default (nil): [http.DefaultTransport].
	Base http.RoundTripper
	// Token returns the current token. Required.
	Token func() store.Token
}

// RoundTrip implements [http.RoundTripper]. It does not modify req.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	if len(req.Header.Values(Header)) > 0 {
		return base.RoundTrip(req)
	}
	fail := func(err error) (*http.Response, error) {
		if req.Body != nil {
			_ = req.Body.Close() // A RoundTripper closes the body even when it sends nothing.
		}
		return nil, err
	}
	if t.Token == nil {
		return fail(fmt.Errorf("httpfence: %w: Transport.Token is nil; set it to the lease's Token method", store.ErrInvalid))
	}
	tok := t.Token()
	if err := checkToken(tok); err != nil {
		return fail(err)
	}
	out := req.Clone(req.Context())
	out.Header.Set(Header, tok.String())
	return base.RoundTrip(out)
}

// ResponseError returns a [*store.FencedError] when resp is the
// middleware's (or [WriteError]'s) answer to a stale token, and nil for
// every other response, including a 409 the handler itself wrote. It reads
// only the status and headers, never the body.
func ResponseError(resp *http.Response) error {
	if resp == nil || resp.StatusCode != http.StatusConflict {
		return nil
	}
	recorded, err := strconv.ParseInt(resp.Header.Get(RecordedHeader), 10, 64)
	if err != nil {
		return nil
	}
	fe := &store.FencedError{Recorded: store.Token(recorded)}
	if offered, err := strconv.ParseInt(resp.Header.Get(Header), 10, 64); err == nil {
		fe.Offered = store.Token(offered)
	}
	if res, err := url.PathUnescape(resp.Header.Get(ResourceHeader)); err == nil {
		fe.Resource = res
	}
	return fmt.Errorf("httpfence: %w", fe)
}

// WriteError answers r with the response the middleware gives for err: 409
// Conflict for a [*store.FencedError] (with the fencing headers, so
// [ResponseError] recognises it), 400 for [store.ErrInvalid], 503 for
// [store.ErrUnavailable] and 500 for anything else. Handlers that run
// their own fence check (pgfence in their transaction) use it to answer as
// the middleware would. The body of a 5xx does not include err.
func WriteError(w http.ResponseWriter, r *http.Request, err error) {
	var fe *store.FencedError
	status := statusOf(err)
	switch {
	case errors.As(err, &fe):
		h := w.Header()
		h.Set(Header, fe.Offered.String())
		h.Set(RecordedHeader, fe.Recorded.String())
		h.Set(ResourceHeader, url.PathEscape(fe.Resource))
		writeProblem(w, r, status, fe.Error()+"; stop working under this token", fe)
	case status == http.StatusBadRequest:
		writeProblem(w, r, status, err.Error(), nil)
	case status == http.StatusServiceUnavailable:
		writeProblem(w, r, status, "httpfence: the fence store is unavailable; retry later", nil)
	default:
		writeProblem(w, r, status, "httpfence: the fence check failed", nil)
	}
}

func statusOf(err error) int {
	switch {
	case errors.Is(err, store.ErrFenced):
		return http.StatusConflict
	case errors.Is(err, store.ErrInvalid):
		return http.StatusBadRequest
	case errors.Is(err, store.ErrUnavailable):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// problem is an RFC 9457 problem details object, with the fence's fields
// as extension members.
type problem struct {
	Title    string `json:"title"`
	Status   int    `json:"status"`
	Detail   string `json:"detail"`
	Resource string `json:"resource,omitempty"`
	Offered  int64  `json:"offered,omitempty"`
	Recorded int64  `json:"recorded,omitempty"`
}

// writeProblem writes status with detail as plain text, or as problem
// details when r accepts JSON.
func writeProblem(w http.ResponseWriter, r *http.Request, status int, detail string, fe *store.FencedError) {
	h := w.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	if !strings.Contains(strings.ToLower(strings.Join(r.Header.Values("Accept"), ",")), "json") {
		h.Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(status)
		_, _ = fmt.Fprintln(w, detail) // A client that went away gets nothing either way.
		return
	}
	p := problem{Title: http.StatusText(status), Status: status, Detail: detail}
	if fe != nil {
		p.Title = "stale fencing token"
		p.Resource, p.Offered, p.Recorded = fe.Resource, int64(fe.Offered), int64(fe.Recorded)
	}
	h.Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(p) // A client that went away gets nothing either way.
}

// checkToken checks the token a client is about to send
// ([fence.ValidateToken]).
func checkToken(tok store.Token) error {
	if err := fence.ValidateToken(tok); err != nil {
		return fmt.Errorf("httpfence: %w", err)
	}
	return nil
}

// validate checks what every fence store gets ([fence.ValidateWrite], the
// rule every fence applies).
func validate(resource string, tok store.Token) error {
	if err := fence.ValidateWrite(resource, tok); err != nil {
		return fmt.Errorf("httpfence: %w", err)
	}
	return nil
}
