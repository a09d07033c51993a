package tenure

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/tenure-dev/tenure/internal/engine"
)

// Lease is one tenure: a lease name held by this client with one token,
// from the grant until Done closes. A new acquisition of the same name is a
// new Lease with a greater token.
type Lease struct {
	client *Client
	name   string
	holder Holder
	token  Token
	done   chan struct{}
	err    error // set before done is closed
	// guarded marks a tenure of [Client.Do]: shutdown waits for its work
	// (see [runner.shutdown]). Set before the Lease is handed out.
	guarded bool

	trust    atomic.Pointer[engine.Window]
	seq      atomic.Int64
	ended    atomic.Bool  // Token returns 0 from now on
	progress atomic.Int64 // monotonic nanoseconds of the last Progress call

	chainWaiters []chan chainGrant // belongs to the holder of the loop's turn
}

// chainGrant answers BeginChainWrite: the seq to present, or why not.
type chainGrant struct {
	seq int64
	err error
}

// Name returns the lease name.
func (l *Lease) Name() string { return l.name }

// LogValue makes a Lease log with [log/slog] as what a person reading the
// log needs: the lease's name, the token it was granted and its holder.
// The token is the one granted, also after the tenure ended (a log line
// about an ended tenure must still say which one), and never the trust
// window's raw clock readings, which mean nothing outside this process.
func (l *Lease) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("name", l.name),
		slog.Int64("token", int64(l.token)),
		slog.String("holder", l.holder.String()),
	)
}

// Payload returns what this tenure published with the lease
// ([Config.Payload]): what followers see in [Observation.Payload], in a
// [HeldError] and in `tenure status`.
func (l *Lease) Payload() string { return l.client.cfg.Payload }

// Holder returns the identity this tenure was granted to.
func (l *Lease) Holder() Holder { return l.holder }

// Token returns the fencing token while the tenure is trusted, and 0 from
// the moment it is not: after Done closed, after the local deadline, or when
// the wall and monotonic clocks disagree since the last seen renewal (the
// process was suspended). Once it has returned 0 it never returns anything
// else. It costs one reading of the clocks and no allocation; pass its
// result with every write to a fenced resource.
func (l *Lease) Token() Token {
	if _, ok := l.trusted(); ok {
		return l.token
	}
	return 0
}

// Remaining returns how long the tenure stays trusted without another
// renewal seen to succeed: the time to its local deadline on the monotonic
// clock, and 0 once [Lease.Token] returns 0. A supervisor that must stop
// the work before the store can hand the lease on (as `tenure run` does)
// stops it by then plus Config.Grace at the latest.
func (l *Lease) Remaining() time.Duration {
	left, _ := l.trusted()
	return left
}

// trusted reads the clocks once and returns the time left to the local
// deadline while the tenure is trusted; once it is not, it drops the
// tenure and reports false, for good.
func (l *Lease) trusted() (time.Duration, bool) {
	if l.ended.Load() {
		return 0, false
	}
	wall, mono := l.client.cfg.Clock.Now()
	w := l.trust.Load()
	if r := w.Check(engine.Instant{Mono: mono, Wall: wall}, l.client.cfg.SuspendTolerance); r != 0 {
		l.drop(r)
		return 0, false
	}
	return w.Deadline - mono, true
}

func (l *Lease) drop(r engine.Reason) {
	if l.ended.CompareAndSwap(false, true) {
		l.client.enqueue(request{event: engine.Drop{Name: l.name, Token: l.token, Reason: r}})
	}
}

// Done is closed when the tenure ends, for whatever reason; Err says which.
func (l *Lease) Done() <-chan struct{} { return l.done }

// WithContext returns a copy of parent that is cancelled the moment the
// tenure ends, with the tenure's [*LostError] as its cause
// ([context.Cause]). Call the returned function when the work is done.
func (l *Lease) WithContext(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	stop := context.AfterFunc(tenureContext{l}, func() { cancel(l.Err()) })
	return ctx, func() {
		stop()
		cancel(context.Canceled)
	}
}

// tenureContext is done when the tenure ends; it only serves WithContext.
type tenureContext struct{ l *Lease }

func (c tenureContext) Deadline() (time.Time, bool) { return time.Time{}, false }
func (c tenureContext) Done() <-chan struct{}       { return c.l.done }
func (c tenureContext) Err() error {
	if c.l.Err() != nil {
		return context.Canceled
	}
	return nil
}
func (c tenureContext) Value(any) any { return nil }

// Err returns nil while the tenure lasts and a [*LostError] after Done is
// closed.
func (l *Lease) Err() error {
	select {
	case <-l.done:
		return l.err
	default:
		return nil
	}
}

// Progress tells the progress gate that the work under this tenure is
// alive. It is needed only when Config.ProgressTimeout is set, and is cheap
// enough to call in a loop.
func (l *Lease) Progress() {
	_, mono := l.client.cfg.Clock.Now()
	l.progress.Store(int64(mono))
}

// Seq returns the renewal seq this client last saw for the tenure.
func (l *Lease) Seq() int64 { return l.seq.Load() }

// ChainWrite is one fenced write that advances the tenure's renewal chain,
// such as pgfence's strict check: of two clones of one process, only one
// can ever make such a write (promise P6). Begin it with
// [Lease.BeginChainWrite] before the write's transaction starts and end it
// with [ChainWrite.Commit] or [ChainWrite.Abort] once its outcome is known.
//
// Chain writes and the tenure's renewals never overlap, so a renewal that
// finds the chain moved on has met a clone. A write whose commit outcome is
// unknown must Abort: if it did commit, the next renewal ends the tenure,
// the cheap side (promise P9). Keep chain writes short next to the TTL: the
// tenure is not renewed while one is in flight.
type ChainWrite struct {
	lease *Lease
	seq   int64
	ended atomic.Bool
}

// BeginChainWrite starts a chain write. It waits while a renewal of the
// tenure is in flight or overdue, or another chain write of it has not
// ended (they take turns, each presenting the seq the last one committed;
// at most until the tenure's local deadline), and fails with the tenure's [*LostError] once it has ended,
// or [ErrClosed] once the client's Run has returned.
func (l *Lease) BeginChainWrite() (*ChainWrite, error) {
	reply := make(chan chainGrant, 1)
	l.client.submit(request{event: engine.ChainWriteBegin{Name: l.name, Token: l.token}, chain: reply})
	select {
	case g := <-reply:
		if g.err != nil {
			return nil, g.err
		}
		return &ChainWrite{lease: l, seq: g.seq}, nil
	case <-l.client.stopped:
		return nil, fmt.Errorf("%w: the client's Run has returned", ErrClosed)
	}
}

// Lease returns the tenure the write belongs to.
func (w *ChainWrite) Lease() *Lease { return w.lease }

// Name returns the lease name.
func (w *ChainWrite) Name() string { return w.lease.name }

// Holder returns the identity the tenure was granted to.
func (w *ChainWrite) Holder() Holder { return w.lease.holder }

// Token returns the tenure's token while it is trusted, 0 after; see
// [Lease.Token].
func (w *ChainWrite) Token() Token { return w.lease.Token() }

// Seq returns the renewal seq the write must present.
func (w *ChainWrite) Seq() int64 { return w.seq }

// Commit reports that the write's transaction committed and left the chain
// at seq; the tenure's next renewal carries it. Only the first Commit or
// Abort counts.
func (w *ChainWrite) Commit(seq int64) {
	if w.ended.CompareAndSwap(false, true) {
		l := w.lease
		for cur := l.seq.Load(); seq > cur && !l.seq.CompareAndSwap(cur, seq); cur = l.seq.Load() {
		}
		l.client.submit(request{event: engine.ChainWriteEnd{Name: l.name, Token: l.token, Seq: seq}})
	}
}

// Abort reports that the write did not commit, or that nobody knows
// whether it did. Only the first Commit or Abort counts.
func (w *ChainWrite) Abort() {
	if w.ended.CompareAndSwap(false, true) {
		w.lease.client.submit(request{event: engine.ChainWriteEnd{Name: w.lease.name, Token: w.lease.token}})
	}
}

// Release ends the tenure now and expires the lease at the store, keeping
// its token counter, so the next holder takes over at once with a greater
// token. After a loss, call it once the work under the tenure has stopped:
// the lease may still be this holder's at the store, and releasing it lets
// the next holder in before the TTL runs out.
//
// A tenure that ended because this process may be a copy of another (a
// moved renewal chain, a detected suspension, [Client.Revoke]) is not
// released: the other copy may be the one that holds it, and the lease
// expires by its TTL instead. Neither is one that the store already gave to
// someone else.
//
// It returns the tenure's [*LostError] if it had already ended for another
// reason, the store's error if the store could not be told (the lease then
// expires by its TTL), and [ErrClosed] if the client's Run has returned
// (Run released every tenure it held, but for a tenure of [Client.Do] whose
// work outlived its trusted time, which expires by its TTL).
func (l *Lease) Release(ctx context.Context) error {
	l.ended.Store(true)
	if lost, ok := l.Err().(*LostError); ok && !lost.Reason.releasable() {
		return lost
	}
	reply := make(chan error, 1)
	l.client.submit(request{event: engine.Release{Name: l.name, Holder: l.holder, Token: l.token}, released: reply})
	var err error
	select {
	case err = <-reply:
	case <-l.client.stopped:
		err = fmt.Errorf("%w: the client's Run has returned", ErrClosed)
	case <-ctx.Done():
		return ctx.Err()
	}
	var lost *LostError
	if errors.As(l.Err(), &lost) && lost.Reason != LossReleased && lost.Reason != LossClosed {
		return l.err
	}
	if errors.Is(err, ErrNotHeld) {
		return nil
	}
	return err
}

func (l *Lease) end(err *LostError) {
	l.ended.Store(true)
	l.err = err
	close(l.done)
}
