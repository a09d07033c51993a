package sim

import (
	"context"
	"time"

	"github.com/tenure-dev/tenure/store"
)

// accept records an accepted write and checks the resource's invariants.
func (w *world) accept(p *proc, token store.Token) {
	if token < w.lastToken {
		w.violation("stale acceptance: token %d accepted after token %d", token, w.lastToken)
	}
	w.lastToken = token
	for _, wr := range w.writers[token] {
		if wr.p != p && !inherited(p, wr.p, wr.last) {
			w.violation("two writers for token %d: p%d (last at %s) and p%d", token, wr.p.uid, wr.last, p.uid)
		}
	}
	for i, wr := range w.writers[token] {
		if wr.p == p {
			w.writers[token][i].last = w.now
			return
		}
	}
	w.writers[token] = append(w.writers[token], writer{p: p, last: w.now})
}

// writer is one process that wrote with a token, and when it last did.
type writer struct {
	p    *proc
	last time.Duration
}

// inherited reports whether v's writes up to last are part of p's own
// history: v is an ancestor of p and wrote only before p's line of clones
// branched off it. A clone continues its parent's tenure; after the split,
// at most one of the two may write (promise P6).
func inherited(p, v *proc, last time.Duration) bool {
	for a := p; a.parent != nil; a = a.parent {
		if a.parent == v {
			return last < a.born
		}
	}
	return false
}

// recorder is the store as the checker sees it: every grant, renewal and
// release the store carries out is noted at the moment it happens, whoever
// asked (the shipped glue, or the resource's strict check).
type recorder struct {
	store.Store
	w *world
}

func (r recorder) Acquire(ctx context.Context, p store.AcquireParams) (store.Grant, error) {
	g, err := r.Store.Acquire(ctx, p)
	if err == nil {
		r.w.granted(g.Token, g.Remaining)
	}
	return g, err
}

func (r recorder) Renew(ctx context.Context, ps []store.RenewParams) ([]store.RenewResult, error) {
	res, err := r.Store.Renew(ctx, ps)
	for _, o := range res {
		if o.Renewed {
			r.w.expires[o.Grant.Token] = r.w.now + o.Grant.Remaining
		}
	}
	return res, err
}

func (r recorder) Release(ctx context.Context, p store.ReleaseParams) error {
	err := r.Store.Release(ctx, p)
	if err == nil {
		r.w.released[p.Token] = true
	}
	return err
}

// granted checks a new tenure at the moment the store grants it: its token
// exceeds every token granted before (P2), and the tenure before it had
// ended by the store's clock or by its holder's release (P1).
func (w *world) granted(token store.Token, remaining time.Duration) {
	if prev := w.lastGrant; prev > 0 {
		if token <= prev {
			w.violation("token %d granted after token %d", token, prev)
		}
		if w.expires[prev] > w.now && !w.released[prev] {
			w.violation("token %d granted while token %d was live until %s by the store's clock", token, prev, w.expires[prev])
		}
	}
	w.lastGrant = max(w.lastGrant, token)
	w.expires[token] = w.now + remaining
}

// checkLive checks promises P1 and P3 at the instant p sends a write: p's
// trust must not outlive the store's expiry of its tenure, by the store's
// clock. (A tenure that someone released early, an operator or a clone, may
// still be trusted until its holder's next renewal: that costs the holder
// its next write, never the resource its invariant.) A process paused
// without being able to notice is exempt until a renewal sent after the
// pause succeeds.
func (w *world) checkLive(p *proc, t *tenure_) {
	if p.blind {
		return
	}
	if exp := w.expires[t.token]; exp <= w.now {
		w.violation("p%d trusts token %d, which the store expired at %s", p.uid, t.token, exp)
	}
}
