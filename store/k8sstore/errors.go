package k8sstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/tenure-dev/tenure/store"
)

// classify is the one place where errors from client-go become the
// store's: every call that talks to the API server passes its error
// through it. Transport failures, timeouts and the server's "try again"
// answers (429, 500, 503, 504) match [store.ErrUnavailable] (the call
// may have been applied); a refusal of the credentials says which
// permissions the store needs; anything else is returned with its cause
// wrapped.
func classify(op string, err error) error {
	switch {
	case err == nil:
		return nil
	case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err):
		return fmt.Errorf("k8sstore: %s: the API server refused the store's credentials; they need get, list, watch, create, update and patch on leases.coordination.k8s.io in the namespace (k8sstore.Role prints a Role that grants them): %w", op, err)
	case unavailable(err):
		return fmt.Errorf("k8sstore: %s: %w (the call may have been applied): %w", op, store.ErrUnavailable, err)
	}
	return fmt.Errorf("k8sstore: %s: %w", op, err)
}

// unavailable reports whether err means the API server could not be
// reached, did not answer in time, or asked to be asked again later.
func unavailable(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) {
		return true
	}
	if apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) ||
		apierrors.IsServiceUnavailable(err) || apierrors.IsInternalError(err) || apierrors.IsUnexpectedServerError(err) {
		return true
	}
	// client-go's rate limiter refuses to wait past the call's deadline,
	// as it does between retries of a connection the server reset, with
	// an error of x/time/rate that wraps no sentinel: the deadline, met
	// early.
	if strings.Contains(err.Error(), "would exceed context deadline") {
		return true
	}
	var netErr net.Error
	return errors.As(err, &netErr)
}
