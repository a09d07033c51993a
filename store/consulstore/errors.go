package consulstore

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/tenure-dev/tenure/store"

	"github.com/hashicorp/consul/api"
)

// sentinels are the errors that pass through [interpret] unchanged but for
// the operation's name.
var sentinels = []error{
	store.ErrInvalid, store.ErrNotHeld, store.ErrNotFound, store.ErrHeld,
	store.ErrFenced, store.ErrUnavailable, store.ErrClosed,
}

// interpret is the one place where errors of the Consul client, the agent
// and the context become tenure's errors. op names the call for the
// message ("acquire lease \"x\"").
//
//   - Errors already matching a tenure sentinel keep it, prefixed with op.
//   - A refused session TTL matches [store.ErrInvalid]: the servers'
//     session_ttl_min is above [Config.MinSessionTTL].
//   - A 400 answer (a request the agent cannot parse) matches
//     [store.ErrInvalid].
//   - ACL refusals (403, "Permission denied", "ACL not found") are returned
//     as they are, with what the token needs: retrying cannot help.
//   - Everything else, from transport errors and context deadlines to 5xx
//     answers ("No cluster leader", rate limits, RPC errors between agent
//     and servers), matches [store.ErrUnavailable]: the call may have been
//     applied.
func interpret(op string, err error) error {
	if err == nil {
		return nil
	}
	for _, sentinel := range sentinels {
		if errors.Is(err, sentinel) {
			return fmt.Errorf("consulstore: %s: %w", op, err)
		}
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("consulstore: %s: %w: the call's context ended before Consul answered; it may have been applied: %w",
			op, store.ErrUnavailable, err)
	}
	msg := err.Error()
	var status api.StatusError
	code := 0
	if errors.As(err, &status) {
		code = status.Code
	}
	switch {
	case strings.Contains(msg, "Invalid Session TTL"):
		return fmt.Errorf("consulstore: %s: %w: the Consul servers refuse the session TTL; set Config.MinSessionTTL to at least their session_ttl_min (10s unless configured): %w",
			op, store.ErrInvalid, err)
	case code == http.StatusForbidden || strings.Contains(msg, "Permission denied") || strings.Contains(msg, "ACL not found"):
		return fmt.Errorf("consulstore: %s: refused by Consul's ACLs; the client's token needs key write on the key prefix and session write on the agent's node: %w",
			op, err)
	case code == http.StatusBadRequest:
		return fmt.Errorf("consulstore: %s: %w: the Consul agent refused the request as malformed: %w", op, store.ErrInvalid, err)
	}
	return fmt.Errorf("consulstore: %s: %w (it may have been applied): %w", op, store.ErrUnavailable, err)
}
