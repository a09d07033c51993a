package tenure

import (
	"context"
	"fmt"

	"github.com/tenure-dev/tenure/internal/engine"
	"github.com/tenure-dev/tenure/internal/snapshot"
	"github.com/tenure-dev/tenure/store"
)

// The clone hooks of fault injection live in an internal package, out of
// the exported API; see package snapshot.
func init() {
	snapshot.Take = func(l any) snapshot.Tenure { return l.(*Lease).snapshot() }
	snapshot.Adopt = func(ctx context.Context, c any, t snapshot.Tenure) (any, error) {
		l, err := c.(*Client).adopt(ctx, t)
		if err != nil {
			return nil, err
		}
		return l, nil
	}
}

func (l *Lease) snapshot() snapshot.Tenure {
	return snapshot.Tenure{Name: l.name, Holder: l.holder, Token: l.token, Seq: l.seq.Load(), Remaining: l.Remaining()}
}

func (c *Client) adopt(ctx context.Context, t snapshot.Tenure) (*Lease, error) {
	if err := store.ValidateName(t.Name); err != nil {
		return nil, err
	}
	if err := t.Holder.Validate(); err != nil {
		return nil, err
	}
	if t.Token <= 0 || t.Seq <= 0 || t.Remaining <= 0 {
		return nil, fmt.Errorf("%w: a clone needs a live tenure: token %d, seq %d, remaining %s", ErrInvalid, t.Token, t.Seq, t.Remaining)
	}
	reply := make(chan acquireResult, 1)
	c.submit(request{event: engine.Adopt{Name: t.Name, Holder: t.Holder, Token: t.Token, Seq: t.Seq, Remaining: t.Remaining}, reply: reply})
	select {
	case r := <-reply:
		return r.lease, r.err
	case <-c.stopped:
		return nil, fmt.Errorf("%w: the client's Run has returned", ErrClosed)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
