package s3fence

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/tenure-dev/tenure/store"
)

// kind is what an error of the S3 client means to the fence.
type kind int

const (
	other    kind = iota
	notFound      // HEAD: there is no object (a missing bucket looks the same)
	conflict      // PUT: the object changed after it was read; read again
)

// classify says what err of a HEAD (put false) or a PUT (put true) means.
// A conditional PUT is refused with 412 Precondition Failed when the
// object changed, 409 ConditionalRequestConflict (AWS) when another write
// to it was under way, and 404 NoSuchKey when an If-Match write finds the
// object deleted: each means read again.
func classify(err error, put bool) kind {
	switch status, code := answer(err); {
	case !put && status == http.StatusNotFound:
		return notFound
	case put && status == http.StatusPreconditionFailed,
		put && status == http.StatusConflict && code == "ConditionalRequestConflict",
		put && status == http.StatusNotFound && code == "NoSuchKey":
		return conflict
	}
	return other
}

// interpretError is the one place where errors of the S3 client become
// tenure's errors. Errors without an HTTP answer (transport errors,
// timeouts, a cancelled ctx), 5xx answers, 429 and the answers S3 gives
// when it wants a client to slow down or retry match
// [store.ErrUnavailable]: after a PUT (put true) the write may or may not
// have been made. Other answers (403 AccessDenied, 404 NoSuchBucket) come
// back wrapped.
func interpretError(op string, put bool, err error) error {
	outcome := "nothing was written"
	if put {
		outcome = "the write may have been made"
	}
	status, code := answer(err)
	switch {
	case status == 0, status >= 500, status == http.StatusTooManyRequests,
		code == "SlowDown", code == "RequestTimeout", code == "ServiceUnavailable":
		return fmt.Errorf("s3fence: %s: %w (%s): %w", op, store.ErrUnavailable, outcome, err)
	}
	return fmt.Errorf("s3fence: %s: %w", op, err)
}

// answer returns the HTTP status and the S3 error code of the answer err
// reports: status 0 when there was no answer (the SDK reports a request
// that failed on its way with an empty response), code "" when the answer
// had none (a HEAD's has no body).
func answer(err error) (status int, code string) {
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) && re.Response != nil && re.Response.Response != nil {
		status = re.Response.StatusCode
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		code = ae.ErrorCode()
	}
	return status, code
}
