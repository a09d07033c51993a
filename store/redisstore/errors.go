package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/tenure-dev/tenure/store"

	"github.com/redis/go-redis/v9"
)

// ErrTokenWentBackwards reports that the server granted a new tenure a
// token that was not greater than a token this [Store] had already seen:
// the server lost writes (a restart without appendfsync always, a failover
// to a replica that lacked them, a flushed database) and the clock that
// floors tokens did not cover the loss (it was stepped back, or the counter
// had been raised ahead of it). The grant was refused:
// no lease was handed out, the tenure was given back and the counter raised
// (the message says when that repair failed too). It matches none of tenure's
// sentinels: it is not [store.ErrUnavailable], because retrying blindly
// is not the answer. See the package documentation.
var ErrTokenWentBackwards = errors.New("redisstore: token went backwards")

// unavailablePrefixes are the error codes of replies meaning "not now"
// rather than "never": the server is loading its data set, running a slow
// script, a replica (mid-failover), without a reachable primary, out of
// memory, or out of connections.
var unavailablePrefixes = []string{
	"LOADING", "BUSY", "READONLY", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN",
	"NOREPLICAS", "OOM", "ERR max number of clients",
}

// interpretError is the one place where errors from go-redis become
// tenure's errors. op names the call for the message ("acquire lease
// \"x\"").
//
//   - Transport errors, timeouts, context deadlines and cancellations, an
//     exhausted pool, an empty (nil) reply and server replies meaning "not
//     now" (LOADING, BUSY, READONLY, MASTERDOWN, TRYAGAIN, CLUSTERDOWN,
//     NOREPLICAS, OOM, too many clients) match [store.ErrUnavailable]:
//     the call may have been applied.
//   - A closed go-redis client matches [store.ErrClosed].
//   - Authentication and ACL refusals, and WRONGTYPE (another program's
//     keys under the prefix), are returned wrapped with advice.
//   - Any other server error is returned as it is, wrapped with op.
//
// NOSCRIPT never reaches here: go-redis's Script.Run answers it by sending
// the script's source.
func interpretError(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, redis.ErrClosed) {
		return fmt.Errorf("redisstore: %s: %w: the go-redis client was closed; the store does not own it: %w",
			op, store.ErrClosed, err)
	}
	if errors.Is(err, redis.Nil) {
		return fmt.Errorf("redisstore: %s: %w: the server answered nothing (it may have been applied): %w",
			op, store.ErrUnavailable, err)
	}
	var rerr redis.Error
	if !errors.As(err, &rerr) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("redisstore: %s: %w (it may have been applied): %w", op, store.ErrUnavailable, err)
	}
	msg := rerr.Error()
	for _, p := range unavailablePrefixes {
		if strings.HasPrefix(msg, p) {
			return fmt.Errorf("redisstore: %s: %w (it may have been applied): %w", op, store.ErrUnavailable, err)
		}
	}
	switch {
	case redis.IsAuthError(err) || redis.IsPermissionError(err) || strings.HasPrefix(msg, "WRONGPASS"):
		return fmt.Errorf("redisstore: %s: refused by the server: the client's user needs EVAL, EVALSHA, SCAN, SUBSCRIBE and the commands the scripts call, on the store's keys and channel (see the package documentation): %w",
			op, err)
	case strings.HasPrefix(msg, "WRONGTYPE") || strings.Contains(msg, "WRONGTYPE"):
		return fmt.Errorf("redisstore: %s: a key under the store's prefix holds another type: another program uses this KeyPrefix; choose another: %w",
			op, err)
	}
	return fmt.Errorf("redisstore: %s: %w", op, err)
}

// unexpectedReply reports a script reply of the wrong shape. The call may
// have been applied.
func unexpectedReply(op string, reply any) error {
	return fmt.Errorf("redisstore: %s: %w: unexpected reply %v from the server; do other programs write keys under the store's prefix?",
		op, store.ErrUnavailable, reply)
}
