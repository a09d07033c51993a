// Package httpfence fences your own HTTP services: middleware that checks
// the Fencing-Token header of each request against the highest token the
// addressed resource has accepted, and answers 409 Conflict when it is
// stale, before the handler runs (promise P4: the resource decides). The
// client side sets the header.
//
// # Server
//
//	fences, err := httpfence.NewPostgres(pool, pgstore.Config{}) // or httpfence.NewMemory()
//	mw, err := httpfence.Middleware(httpfence.Config{
//		Store:    fences,
//		Resource: func(r *http.Request) string { return "reports/" + r.PathValue("id") },
//	})
//	mux.Handle("PUT /reports/{id}", mw(putReport))
//
// Wrap only the handlers that write. For each request the middleware:
//
//   - answers 400 Bad Request when [Config.Resource] returns "" or the
//     request carries no [Header], more than one, or one that is not a
//     positive token in canonical decimal ([ParseToken]: digits only, no
//     sign, no leading zero, at most 2^63 - 1);
//   - records the token for the resource in the [FenceStore]; when a
//     greater token was recorded before, answers 409 Conflict without
//     calling the handler, naming the resource, the offered and the
//     recorded token in the body (plain text, or RFC 9457 problem details
//     when the request accepts JSON) and in the headers [Header],
//     [RecordedHeader] and [ResourceHeader];
//   - answers 503 Service Unavailable when the fence store cannot be
//     reached, 500 on its other errors (reported to [Config.OnError]);
//   - otherwise calls the handler.
//
// An equal token passes: one holder sends many requests with its token.
//
// # What it promises, and what it cannot
//
// Once a request with token y was accepted for a resource, every later
// request with a token x < y is refused: a paused holder that wakes up
// after its successor wrote cannot write again. But the check and the
// handler's write are two steps. A request from the old holder that passed
// the check just before its successor's first request can still be inside
// its handler, and its write can land after the successor's. The
// middleware narrows the window to the length of one handler; it cannot
// close it, because it does not own the write.
//
// Where the write can share a transaction with the fence, close it: for a
// PostgreSQL resource, skip the middleware and call
// [github.com/tenure-dev/tenure/fence/pgfence.Fence] in the handler's own
// transaction, before the write, so the check and the write commit
// together; read the token with [TokenOf] and answer a refusal with
// [WriteError], so clients see the same 409. Use the middleware for
// resources that cannot share a transaction with a fence (files, devices,
// in-memory state, a downstream service), and where the gap matters make
// the handler's write conditional on the token itself.
//
// # Fence stores
//
// A [FenceStore] keeps the highest token per resource:
//
//   - [NewPostgres]: the fence table and function that pgstore's migration
//     installs (tenure_fence by default), through
//     [github.com/tenure-dev/tenure/fence/pgfence], one autocommit
//     statement per request. Any number of service instances share it.
//   - [NewMemory]: a map in this process, for tests, examples and a single
//     instance; forgotten on restart, after which old tokens pass again.
//   - [FenceFunc]: any function, such as a Redis fence script; for example
//     httpfence.FenceFunc(func(ctx context.Context, resource string, tok
//     store.Token) error { ... }).
//
// # Client
//
// [SetToken] puts a token on one request; a [Transport] puts the current
// token of a lease on every request an [net/http.Client] sends and refuses
// to send once the lease is no longer trusted (its Token is 0). A request
// that already carries the header is not forwarded unchecked: the
// Transport sends it only when it carries exactly one canonical value equal
// to the lease's current token, so a stale token, a token no lease handed
// out (which would shut every writer out of the resource) or a header set
// after the lease stopped being trusted never leaves the process.
// [ResponseError] turns the middleware's 409 into a [*store.FencedError],
// so that the caller cannot mistake it for an ordinary failure (promise P9):
// stop working under that token.
//
//	client := &http.Client{Transport: &httpfence.Transport{Token: lease.Token}}
//	resp, err := client.Do(req)
//	if err != nil {
//		return err
//	}
//	defer resp.Body.Close()
//	if err := httpfence.ResponseError(resp); err != nil {
//		return err // errors.Is(err, store.ErrFenced): superseded; stop
//	}
package httpfence
