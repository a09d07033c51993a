package consulstore

import (
	"context"
	"fmt"
	"strings"

	"github.com/tenure-dev/tenure/store"

	"github.com/hashicorp/consul/api"
)

// strictOps is how many operations of a strict transaction are the
// store's own: the compare-and-set of the lease record and the check of
// the counter.
const strictOps = 2

// StrictTxn applies ops in one Consul transaction when w's lease is held
// with exactly w's token, holder and renewal seq, and advances the seq by
// one as a renewal does. It is the strict fence for leases kept by this
// store: of two byte-identical clones of one holder (a snapshot restored
// twice, same holder, token and seq) only one can ever pass; the other is
// refused because the chain moved on (promise P6).
//
//	w, err := lease.BeginChainWrite()
//	if err != nil {
//		return err // the tenure ended: stop
//	}
//	resp, err := st.StrictTxn(ctx, w, api.TxnOps{{KV: &api.KVTxnOp{Verb: api.KVSet, Key: "app/state", Value: v}}})
//	// errors.Is(err, store.ErrFenced): stop working under this tenure.
//
// Two round trips: a consistent read of the lease record, checked against
// w, then one transaction of a compare-and-set of the record on the
// ModifyIndex that read returned (writing seq+1 and keeping the record's
// lock, so the session still holds it), a check-index of the counter on
// the token, and ops. Anything that changes the record between the two
// (a renewal, a clone's strict write, a release, Consul invalidating the
// session, an acquisition) fails the compare-and-set, and the whole
// transaction is rolled back.
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
// Offered w's token and Recorded the lease's current token. The message
// says which: the lease is held by another tenure, nobody holds it
// (released or expired), or the chain moved on (a clone of this holder
// wrote or renewed first). A transaction that fails the compare-and-set
// reads the lease once more to say which. None of ops applied.
//
// ops are KV operations of the caller's, at most 126 of them (Consul's
// 128 less the store's two). A transaction rolled back by one of them (a
// check-index of the caller's, say) fails with an error that matches
// neither [store.ErrFenced] nor [store.ErrUnavailable], together with
// Consul's response, whose Errors count OpIndex from the first of ops;
// nothing applied and the chain did not move. On success the response's
// Results are those of ops. An operation that writes a key under the
// store's [Config.KeyPrefix] could forge or end a lease and is refused,
// as is any other bad input (a nil w, no ops, an operation that is not a
// KV one, a w of a tenure no longer trusted, with a zero token), with an
// error matching [store.ErrInvalid] before anything is sent.
//
// Like [Store.FenceOps], the check trusts Consul's sessions: a session
// past its TTL holds the record until Consul invalidates it, up to twice
// its TTL (see the Clock section); a holder stops writing before, at its
// own deadline. Keep ops short next to the TTL: the tenure is not renewed
// while a strict write is in flight.
func (s *Store) StrictTxn(ctx context.Context, w store.ChainWrite, ops api.TxnOps) (*api.TxnResponse, error) {
	if w == nil { // before the deferred Abort, which a nil w cannot take
		return nil, fmt.Errorf("consulstore: strict txn: %w", store.ValidateChainWrite(w))
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
	if err := s.begin(ctx, op); err != nil {
		return nil, err
	}
	if err := s.validateStrict(w, ops); err != nil {
		return nil, interpret(op, err)
	}
	l, err := s.readOne(ctx, name)
	if err != nil {
		return nil, interpret(op, err)
	}
	if why := mismatch(l, tok, h, seq); why != "" {
		return nil, refusal(op, name, tok, seq, l.token, why)
	}
	v := l.val
	v.Seq++
	body, err := v.encode()
	if err != nil {
		return nil, interpret(op, err)
	}
	k := s.keys(name)
	all := make(api.TxnOps, 0, strictOps+len(ops))
	all = append(all,
		// A CAS set keeps the key's lock: the session still holds it.
		&api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVCAS, Key: k.lease, Index: l.index, Value: body}},
		&api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVCheckIndex, Key: k.counter, Index: uint64(tok)}},
	)
	all = append(all, ops...)
	ok, resp, err := s.txn(ctx, all, false)
	if err != nil {
		return nil, interpret(op, err)
	}
	if ok {
		next = v.Seq
		if len(resp.Results) >= strictOps {
			resp.Results = resp.Results[strictOps:]
		}
		return resp, nil
	}
	fenced := false
	var theirs api.TxnErrors
	for _, e := range resp.Errors {
		if e.OpIndex < strictOps {
			fenced = true
			continue
		}
		theirs = append(theirs, &api.TxnError{OpIndex: e.OpIndex - strictOps, What: e.What})
	}
	if !fenced {
		resp.Errors = theirs
		return resp, fmt.Errorf("consulstore: %s: Consul rolled back the transaction (%s, counting from your first operation): nothing was written and the chain did not move",
			op, txnErrors(resp))
	}
	// The record or the counter changed since the read: read it again to
	// say how.
	now, err := s.readOne(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("consulstore: %s: refused with token %d at seq %d: the lease changed since it was read (a renewal or write by a clone of this holder, a release, an expiry or a takeover; it could not be read again to say which: %v); stop working under this tenure: %w",
			op, tok, seq, err, &store.FencedError{Resource: "lease:" + name, Offered: tok, Recorded: tok})
	}
	why := mismatch(now, tok, h, seq)
	if why == "" {
		why = "the lease record changed while the write was made"
	}
	return nil, refusal(op, name, tok, seq, now.token, why)
}

// mismatch says why lease l does not accept a strict write with tok, h and
// seq, or returns "" when it does.
func mismatch(l lease, tok store.Token, h store.Holder, seq int64) string {
	switch {
	case !l.held():
		return fmt.Sprintf("the lease is not held (released or expired; last token %d)", l.token)
	case l.token != tok || l.val.holder() != h:
		return fmt.Sprintf("the lease is held by %s with token %d: it was taken over", l.val.holder(), l.token)
	case l.val.Seq != seq:
		return fmt.Sprintf("the renewal chain is at seq %d, not %d: a clone of this holder wrote or renewed first", l.val.Seq, seq)
	}
	return ""
}

// refusal is the error of a refused strict write.
func refusal(op, name string, tok store.Token, seq int64, recorded store.Token, why string) error {
	return fmt.Errorf("consulstore: %s: refused with token %d at seq %d: %s; stop working under this tenure: %w",
		op, tok, seq, why, &store.FencedError{Resource: "lease:" + name, Offered: tok, Recorded: recorded})
}

// validateStrict checks a strict transaction's input.
func (s *Store) validateStrict(w store.ChainWrite, ops api.TxnOps) error {
	if err := store.ValidateChainWrite(w); err != nil {
		return err
	}
	if len(ops) == 0 {
		return fmt.Errorf("%w: no operations; pass the writes to make under the tenure", store.ErrInvalid)
	}
	if len(ops) > maxTxnOps-strictOps {
		return fmt.Errorf("%w: %d operations; a strict transaction carries at most %d (Consul's %d less the store's %d)",
			store.ErrInvalid, len(ops), maxTxnOps-strictOps, maxTxnOps, strictOps)
	}
	for i, o := range ops {
		if err := s.validateOp(o); err != nil {
			return fmt.Errorf("operation %d: %w", i, err)
		}
	}
	return nil
}

// validateOp refuses an operation that is not a KV one, and one that
// writes under the store's key prefix, where it could forge or end a
// lease.
func (s *Store) validateOp(o *api.TxnOp) error {
	if o == nil || o.KV == nil || o.Node != nil || o.Service != nil || o.Check != nil {
		return fmt.Errorf("%w: not a KV operation; a strict transaction carries KV operations only", store.ErrInvalid)
	}
	prefix := s.cfg.KeyPrefix
	switch o.KV.Verb {
	case api.KVGet, api.KVGetOrEmpty, api.KVGetTree, api.KVCheckIndex, api.KVCheckSession, api.KVCheckNotExists:
		return nil
	case api.KVSet, api.KVCAS, api.KVLock, api.KVUnlock, api.KVDelete, api.KVDeleteCAS:
		if strings.HasPrefix(o.KV.Key, prefix) {
			return fmt.Errorf("%w: %s of %q writes under the lease store's key prefix %q: it could forge or end a lease; keep data keys outside the prefix",
				store.ErrInvalid, o.KV.Verb, o.KV.Key, prefix)
		}
		return nil
	case api.KVDeleteTree:
		if strings.HasPrefix(o.KV.Key, prefix) || strings.HasPrefix(prefix, o.KV.Key) {
			return fmt.Errorf("%w: %s of %q reaches under the lease store's key prefix %q: it could end a lease; keep data keys outside the prefix",
				store.ErrInvalid, o.KV.Verb, o.KV.Key, prefix)
		}
		return nil
	}
	return fmt.Errorf("%w: unknown KV verb %q", store.ErrInvalid, o.KV.Verb)
}
