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

// MaxTokenDigits is the most digits a [Header] value may have: 2^63 - 1,
// the greatest token, has 19.
const MaxTokenDigits = 19

// ParseToken parses a [Header] value strictly: the canonical decimal form
// of a positive token, ASCII digits only, no sign, no space, no leading
// zero, no exponent, at most [MaxTokenDigits] digits and at most 2^63 - 1.
// Anything else fails with an error matching [store.ErrInvalid] that says
// what is wrong: one token has one spelling, so "007" and "7" cannot be
// told apart by a proxy or a log yet mean the same.
func ParseToken(s string) (store.Token, error) {
	if s == "" {
		return 0, fmt.Errorf("httpfence: %w: the %s header is empty; send the token of the lease this write is made under", store.ErrInvalid, Header)
	}
	if len(s) > MaxTokenDigits {
		return 0, fmt.Errorf("httpfence: %w: the %s header %.40q has %d characters; a token has at most %d digits", store.ErrInvalid, Header, s, len(s), MaxTokenDigits)
	}
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("httpfence: %w: the %s header %q is not a positive decimal integer (digits only, no sign, no space, no exponent)", store.ErrInvalid, Header, s)
		}
	}
	if s == "0" {
		return 0, fmt.Errorf("httpfence: %w: the %s header is 0; a lease whose token is 0 is no longer trusted and must not write", store.ErrInvalid, Header)
	}
	if s[0] == '0' {
		return 0, fmt.Errorf("httpfence: %w: the %s header %q has a leading zero; send the token in canonical decimal (%s)", store.ErrInvalid, Header, s, strings.TrimLeft(s, "0"))
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("httpfence: %w: the %s header %q is beyond the greatest token (2^63 - 1)", store.ErrInvalid, Header, s)
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
// Token method. When Token returns 0 or less (the lease is no longer
// trusted), nothing is sent and RoundTrip fails with an error matching
// [store.ErrInvalid].
//
// A request that already carries the header is checked, not trusted: it
// must carry exactly one value, in canonical form ([ParseToken]), equal to
// the token Token returns at that moment; otherwise nothing is sent and
// RoundTrip fails with an error matching [store.ErrInvalid] that says
// which. A caller-supplied token is thus never a way around the lease: not
// a stale one (the lease moved on), not a greater one that no lease handed
// out (which would shut every legitimate writer out of the resource), and
// not one sent after the lease stopped being trusted.
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
	if vals := req.Header.Values(Header); len(vals) > 0 {
		if len(vals) > 1 {
			return fail(fmt.Errorf("httpfence: %w: the request already carries %d %s headers; send none (the Transport sets it) or exactly one", store.ErrInvalid, len(vals), Header))
		}
		given, err := ParseToken(vals[0])
		if err != nil {
			return fail(fmt.Errorf("httpfence: the request's own %s header is refused: %w", Header, err))
		}
		if given != tok {
			return fail(fmt.Errorf("httpfence: %w: the request carries %s %d, but the lease's token is %d; a request under this Transport may only carry its lease's current token (remove the header and let the Transport set it)",
				store.ErrInvalid, Header, given, tok))
		}
		return base.RoundTrip(req)
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
