package natsstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tenure-dev/tenure/store"
)

// JetStream API error codes the classification knows.
const (
	jsErrInsufficientResources jetstream.ErrorCode = 10023 // the store is full
	jsErrClusterNotAvail       jetstream.ErrorCode = 10008 // no quorum or leader
	jsErrStreamOffline         jetstream.ErrorCode = 10118
)

// classify is the one place where errors from the NATS client become the
// store's: every call that talks to the server passes its error through
// it. Transport failures, timeouts, a stream without a leader and a full
// store match [store.ErrUnavailable] (the call may have been applied); a
// missing bucket matches [store.ErrNotMigrated]; anything else is
// returned with its cause wrapped.
func classify(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, jetstream.ErrBucketNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("natsstore: %s: %w: the bucket does not exist; create it with `tenure migrate` or natsstore.Migrate: %w", op, store.ErrNotMigrated, err)
	}
	if unavailable(err) {
		return fmt.Errorf("natsstore: %s: %w (the call may have been applied): %w", op, store.ErrUnavailable, err)
	}
	return fmt.Errorf("natsstore: %s: %w", op, err)
}

// unavailable reports whether err means the server could not be reached,
// did not answer in time, or could not serve the request for now.
func unavailable(err error) bool {
	for _, target := range []error{
		context.Canceled, context.DeadlineExceeded,
		nats.ErrTimeout, nats.ErrConnectionClosed, nats.ErrConnectionDraining, nats.ErrNoResponders,
		nats.ErrDisconnected, nats.ErrConnectionReconnecting, nats.ErrNoServers,
		jetstream.ErrNoStreamResponse, jetstream.ErrServerShutdown, jetstream.ErrJetStreamNotEnabled,
	} {
		if errors.Is(err, target) {
			return true
		}
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode {
		case jsErrInsufficientResources, jsErrClusterNotAvail, jsErrStreamOffline:
			return true
		}
		return apiErr.Code == 503 || apiErr.Code == 408
	}
	return false
}

// wrongLastSeq reports whether err is the server's refusal of a write
// whose expected last revision of its key was not the key's.
func wrongLastSeq(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) &&
		(apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
			apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}
