package etcdstore

import (
	"bytes"
	"context"
	"fmt"
	"strconv"

	"github.com/tenure-dev/tenure/store"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// strictOps is how many operations of a strict transaction's success
// branch are the store's own: the held/ key and the seq/ key.
const strictOps = 2

// StrictTxn applies ops in one etcd transaction when, in that transaction,
// w's lease is held with exactly w's token, holder and renewal seq, and
// advances the seq by one as a renewal does: it writes the held/ key again
// (its version is the seq; the key keeps its etcd lease) and the seq/ key.
// It is the strict fence for leases kept by this store: of two
// byte-identical clones of one holder (a snapshot restored twice, same
// holder, token and seq) only one can ever pass; the other is refused
// because the chain moved on (promise P6).
//
//	w, err := lease.BeginChainWrite()
//	if err != nil {
//		return err // the tenure ended: stop
//	}
//	resp, err := st.StrictTxn(ctx, w, clientv3.OpPut("jobs/report", report))
//	// errors.Is(err, store.ErrFenced): stop working under this tenure.
//
// StrictTxn ends w, whatever happens: Commit with the new seq when the
// transaction applied, Abort otherwise, so the holder's renewals carry
// the seq the write left and never take its own writes for a clone's. A
// refused or failed write costs nothing. A write whose outcome is unknown
// (an error matching [store.ErrUnavailable]) costs at most the tenure: if
// it applied, the next renewal finds the chain moved and ends the tenure,
// the cheap side.
//
// A refusal matches [store.ErrFenced], and errors.As finds a
// [*store.FencedError] with Resource "lease:" followed by the name,
// Offered w's token and Recorded the lease's current one (that of its last
// tenure when nobody holds it). The message says which: the lease is held
// by another tenure, nobody holds it (released or expired), or the chain
// moved on (a clone of this holder wrote or renewed first). None of ops
// applied.
//
// ops are Get, Put, Delete and nested Txn operations of the caller's, at
// most [Config.MaxTxnOps]−2 of them. The returned response is the
// transaction's, with Responses holding ops' responses only, in order.
// An operation that writes a key under the store's [Config.KeyPrefix]
// could forge or end a lease and is refused, as is any other bad input
// (a nil w, no ops, a w of a tenure no longer trusted, with a zero token),
// with an error matching [store.ErrInvalid] before anything is sent.
//
// The check is etcd's: the held/ key exists while the etcd lease it is
// attached to lives (see the Clock section of the package documentation).
// Keep ops short next to the TTL: the tenure is not renewed while a strict
// write is in flight.
func (s *Store) StrictTxn(ctx context.Context, w store.ChainWrite, ops ...clientv3.Op) (*clientv3.TxnResponse, error) {
	if w == nil { // before the deferred Abort, which a nil w cannot take
		return nil, fmt.Errorf("etcdstore: strict txn: %w", store.ValidateChainWrite(w))
	}
	next := int64(0)
	defer func() {
		if next > 0 {
			w.Commit(next)
		} else {
			w.Abort()
		}
	}()
	name, tok, h, seq := w.Name(), w.Token(), w.Holder(), w.Seq()
	op := fmt.Sprintf("strict txn under lease %q", name)
	if err := s.begin(op); err != nil {
		return nil, err
	}
	if err := s.validateStrict(w, ops); err != nil {
		return nil, fmt.Errorf("etcdstore: %s: %w", op, err)
	}
	k := s.keys(name)
	holder := encodeHolder(h)
	then := make([]clientv3.Op, 0, strictOps+len(ops))
	then = append(then,
		clientv3.OpPut(k.held, holder, clientv3.WithIgnoreLease()),
		clientv3.OpPut(k.seq, strconv.FormatInt(seq+1, 10)),
	)
	then = append(then, ops...)
	resp, err := s.client.Txn(ctx).
		If(
			clientv3.Compare(clientv3.CreateRevision(k.held), "=", int64(tok)),
			clientv3.Compare(clientv3.Version(k.held), "=", seq),
			clientv3.Compare(clientv3.Value(k.held), "=", holder),
		).
		Then(then...).
		Else(clientv3.OpGet(k.held), clientv3.OpGet(k.start), clientv3.OpGet(k.seq)).
		Commit()
	if err != nil {
		return nil, classify(op, err)
	}
	if resp.Succeeded {
		next = seq + 1
		resp.Responses = resp.Responses[strictOps:]
		return resp, nil
	}
	rs := resp.Responses
	sn := snapshot{
		held:  first(rs[0].GetResponseRange().Kvs),
		start: first(rs[1].GetResponseRange().Kvs),
		seq:   first(rs[2].GetResponseRange().Kvs),
	}
	return nil, refusal(op, name, tok, h, seq, sn)
}

// refusal explains a strict transaction whose comparison failed, from what
// its else branch read.
func refusal(op, name string, tok store.Token, h store.Holder, seq int64, sn snapshot) error {
	fe := &store.FencedError{Resource: "lease:" + name, Offered: tok}
	g, err := sn.grant(name, 0)
	if err != nil {
		return fmt.Errorf("etcdstore: %s: refused with token %d at seq %d (the lease's keys could not be read: %v): %w", op, tok, seq, err, fe)
	}
	fe.Recorded = g.Token
	var why string
	switch {
	case sn.held == nil:
		why = fmt.Sprintf("the lease is not held (released or expired; last token %d)", g.Token)
	case g.Token != tok || g.Holder != h:
		why = fmt.Sprintf("the lease is held by %s with token %d: it was taken over", g.Holder, g.Token)
	default:
		why = fmt.Sprintf("the renewal chain is at seq %d, not %d: a clone of this holder wrote or renewed first", g.Seq, seq)
	}
	return fmt.Errorf("etcdstore: %s: refused with token %d at seq %d: %s; stop working under this tenure: %w", op, tok, seq, why, fe)
}

// validateStrict checks a strict transaction's input.
func (s *Store) validateStrict(w store.ChainWrite, ops []clientv3.Op) error {
	if err := store.ValidateChainWrite(w); err != nil {
		return err
	}
	if len(ops) == 0 {
		return fmt.Errorf("%w: no operations; pass the writes to make under the tenure", store.ErrInvalid)
	}
	if limit := s.maxOps - strictOps; len(ops) > limit {
		return fmt.Errorf("%w: %d operations; a strict transaction carries at most %d (Config.MaxTxnOps less the store's %d)",
			store.ErrInvalid, len(ops), limit, strictOps)
	}
	for i, o := range ops {
		if err := s.validateOp(o); err != nil {
			return fmt.Errorf("operation %d: %w", i, err)
		}
	}
	return nil
}

// validateOp refuses an operation this store cannot send, or one that
// writes under the store's key prefix, where it could forge or end a lease.
func (s *Store) validateOp(o clientv3.Op) error {
	switch {
	case o.IsGet():
		return nil
	case o.IsPut(), o.IsDelete():
		if s.touchesPrefix(o.KeyBytes(), o.RangeBytes()) {
			return fmt.Errorf("%w: a write to %q reaches under the lease store's key prefix %q: it could forge or end a lease; keep data keys outside the prefix",
				store.ErrInvalid, o.KeyBytes(), s.prefix)
		}
		return nil
	case o.IsTxn():
		_, then, els := o.Txn()
		for _, nested := range append(append([]clientv3.Op(nil), then...), els...) {
			if err := s.validateOp(nested); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("%w: not a Get, Put, Delete or Txn operation; build operations with clientv3.OpGet, OpPut, OpDelete or OpTxn", store.ErrInvalid)
}

// touchesPrefix reports whether the key range [key, end) (the single key
// when end is empty, every key from key on when end is "\x00", as etcd
// reads ranges) meets the keys under the store's prefix.
func (s *Store) touchesPrefix(key, end []byte) bool {
	lo := []byte(s.prefix)
	hi := []byte(clientv3.GetPrefixRangeEnd(s.prefix)) // "\x00": no upper bound
	unbounded := func(b []byte) bool { return len(b) == 1 && b[0] == 0 }
	if len(end) == 0 {
		return bytes.HasPrefix(key, lo)
	}
	startsBelowHi := unbounded(hi) || bytes.Compare(key, hi) < 0
	endsAboveLo := unbounded(end) || bytes.Compare(end, lo) > 0
	return startsBelowHi && endsAboveLo
}
