package consulstore

import (
	"context"
	"fmt"

	"github.com/tenure-dev/tenure/fence"
	"github.com/tenure-dev/tenure/store"

	"github.com/hashicorp/consul/api"
)

// FenceOps returns the comparison that makes a Consul transaction of your
// own apply only while token is still the newest token handed out for the
// lease name, the Consul form of etcd's Mutex.IsOwner: a check-index on
// the lease's counter key, whose ModifyIndex is the token. Put the
// operations at the start of your transaction, before your writes:
//
//	fence, err := store.FenceOps(lease.Name(), lease.Token())
//	ops := append(fence, &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVSet, Key: "app/state", Value: v}})
//	ok, resp, _, err := client.Txn().Txn(ops, nil)
//	if err == nil && !ok {
//		err = store.FenceError(ctx, lease.Name(), lease.Token(), resp)
//	}
//
// The check costs no round trip and does not change when the holder
// renews. It fails once a newer tenure has begun (a takeover, or any
// acquisition after a release), which is the fencing promise: no write
// with an older token after one with a newer token. Unlike etcd's check it
// still passes after the lease expired while nobody has taken it yet; a
// holder stops trusting its lease before that by its own deadline.
// Deleting the counter key makes every check of the name fail until the
// next acquisition.
func (s *Store) FenceOps(name string, token store.Token) ([]*api.TxnOp, error) {
	if err := fence.ValidateWrite(name, token); err != nil {
		return nil, fmt.Errorf("consulstore: fence of lease %q: %w", name, err)
	}
	return []*api.TxnOp{{KV: &api.KVTxnOp{Verb: api.KVCheckIndex, Key: s.keys(name).counter, Index: uint64(token)}}}, nil
}

// FenceError interprets a transaction that Consul rolled back (ok false)
// and that began with the operations of FenceOps(name, token). When the
// fence failed it returns a [*store.FencedError] naming the lease's
// current token, read from Consul for the message (or, if that read fails,
// a plain error); both match [store.ErrFenced]. When something else
// failed it returns nil, and resp says what. Never ignore a fenced write
// (promise P9).
func (s *Store) FenceError(ctx context.Context, name string, token store.Token, resp *api.TxnResponse) error {
	if resp == nil {
		return nil
	}
	fenced := false
	for _, e := range resp.Errors {
		if e.OpIndex == 0 {
			fenced = true
		}
	}
	if !fenced {
		return nil
	}
	fe := &store.FencedError{Resource: name, Offered: token}
	err := s.begin(ctx, "read the current token")
	if err == nil {
		var l lease
		if l, err = s.readOne(ctx, name); err == nil {
			fe.Recorded = l.token
			return fe
		}
	}
	// The write was fenced whatever the read says; report that, with the
	// read's failure as text only.
	return fmt.Errorf("consulstore: token %d of lease %q is stale (the current token could not be read: %v): %w",
		token, name, err, store.ErrFenced)
}
