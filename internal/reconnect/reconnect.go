// Package reconnect keeps a long-lived connection (a LISTEN, a
// subscription, a watch) going: it runs one attempt after another until the
// context is done, waiting a jittered, doubling backoff between attempts,
// so a server that keeps refusing is never hammered.
package reconnect

import (
	"context"
	"math/rand/v2"
	"time"
)

// Loop calls once until ctx is done. Between calls it waits a random time
// in [backoff/2, backoff], where backoff starts at lo and doubles up to hi;
// a call that reports it worked and lasted longer than hi (a connection
// that served for a while) resets backoff to lo.
func Loop(ctx context.Context, lo, hi time.Duration, once func(ctx context.Context) (worked bool)) {
	backoff := lo
	for {
		start := time.Now()
		worked := once(ctx)
		if ctx.Err() != nil {
			return
		}
		if worked && time.Since(start) > hi {
			backoff = lo
		}
		wait := backoff/2 + rand.N(backoff/2+1)
		backoff = min(2*backoff, hi)
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
	}
}
