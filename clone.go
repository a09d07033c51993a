package tenure

import (
	"context"
	"fmt"
	"time"

	"github.com/tenure-dev/tenure/internal/engine"
)

// TenureState is what a snapshot of a holder process contains about one
// tenure: its lease, identity, token and renewal seq, and how long the
// holder still trusts it.
type TenureState struct {
	Name      string
	Holder    Holder
	Token     Token
	Seq       int64
	Remaining time.Duration
}

// State returns the tenure as a snapshot of this process would contain it.
func (l *Lease) State() TenureState {
	_, mono := l.client.cfg.Clock.Now()
	remaining := max(l.trust.Load().Deadline-mono, 0)
	if l.Token() == 0 {
		remaining = 0
	}
	return TenureState{Name: l.name, Holder: l.holder, Token: l.token, Seq: l.seq.Load(), Remaining: remaining}
}

// AdoptClone makes this client believe it holds st exactly as another
// process does, identity included: what a virtual machine snapshot
// restored a second time, or a fork, would believe. It exists for fault
// injection, to show that clones cannot both write (promise P6): the
// renewal chain and the strict fence end one of them. Never use it to
// share leadership. The client must not already have st.Name.
func (c *Client) AdoptClone(ctx context.Context, st TenureState) (*Lease, error) {
	if err := ValidateName(st.Name); err != nil {
		return nil, err
	}
	if err := st.Holder.Validate(); err != nil {
		return nil, err
	}
	if st.Token <= 0 || st.Seq <= 0 || st.Remaining <= 0 {
		return nil, fmt.Errorf("%w: a clone needs a live tenure: token %d, seq %d, remaining %s", ErrInvalid, st.Token, st.Seq, st.Remaining)
	}
	reply := make(chan acquireResult, 1)
	c.enqueue(request{event: engine.Adopt{Name: st.Name, Holder: toEngine(st.Holder), Token: int64(st.Token), Seq: st.Seq, Remaining: st.Remaining}, reply: reply})
	select {
	case r := <-reply:
		return r.lease, r.err
	case <-c.stopped:
		return nil, fmt.Errorf("%w: the client's Run has returned", ErrClosed)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
