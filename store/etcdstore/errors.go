package etcdstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/tenure-dev/tenure/store"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// classify is the one place where errors from the etcd client become the
// store's: every call that talks to the server passes its error through it.
// Transport failures, timeouts, a missing or changing leader and an
// overloaded server match [store.ErrUnavailable] (the call may have been
// applied); anything else is returned with its cause wrapped.
func classify(op string, err error) error {
	if err == nil {
		return nil
	}
	if unavailable(err) {
		return fmt.Errorf("etcdstore: %s: %w (the call may have been applied): %w", op, store.ErrUnavailable, err)
	}
	if errors.Is(err, rpctypes.ErrTooManyOps) {
		return fmt.Errorf("etcdstore: %s: the server refused the transaction as too large; set Config.MaxTxnOps to the server's --max-txn-ops (default %d): %w",
			op, DefaultMaxTxnOps, err)
	}
	if errors.Is(err, rpctypes.ErrRequestTooLarge) {
		return fmt.Errorf("etcdstore: %s: the server refused the request as too large; this store sends up to %d KiB a request, so raise the server's --max-request-bytes to at least that (default 1.5 MiB), or renew and acquire in smaller batches: %w",
			op, maxRequestBytes>>10, err)
	}
	return fmt.Errorf("etcdstore: %s: %w", op, err)
}

// unavailable reports whether err means the server could not be reached,
// did not answer in time, or could not serve the request for now.
func unavailable(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, rpctypes.ErrNotLeader) {
		return true
	}
	var code codes.Code
	var etcdErr rpctypes.EtcdError
	if errors.As(err, &etcdErr) {
		code = etcdErr.Code()
	} else if st, ok := status.FromError(err); ok {
		code = st.Code()
	} else {
		return false
	}
	switch code {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled, codes.Aborted, codes.ResourceExhausted:
		return true
	}
	return false
}
