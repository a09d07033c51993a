package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tenure-dev/tenure/store"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

var _ store.SlotAcquirer = (*Store)(nil)

// slotsPerTxn is how many slots one etcd transaction can try: each slot
// is a transaction nested in the refusal branch of the one before, and
// etcd takes the widest branch of each level (an acquisition's writes)
// from what its enclosing levels leave of [Config.MaxTxnOps]: 18 slots at
// etcd's default of 128.
func (s *Store) slotsPerTxn() int {
	return max(1, s.maxOps/opsPerAcquisition)
}

// AcquireSlot implements [store.SlotAcquirer.AcquireSlot]: one etcd
// transaction of nested transactions, slot k's in the refusal branch of
// slot k−1's, each the transaction of [Store.Acquire], so the first free
// slot is taken in one atomic step. The token is that transaction's
// revision. Beyond [Store.slotsPerTxn] slots (18 at etcd's default
// --max-txn-ops), the slots are tried that many at a time, one
// transaction each, in order: each is atomic, the whole is not (a slot
// freed behind the transaction that tried it waits for the next call).
// The etcd lease is taken as Acquire takes it (a spare, or one more round
// trip). When every slot is held, the time their holders have left costs
// one more round trip per distinct etcd lease of theirs.
func (s *Store) AcquireSlot(ctx context.Context, p store.SlotParams) (store.SlotGrant, error) {
	if err := s.begin("acquire"); err != nil {
		return store.SlotGrant{}, err
	}
	if err := p.Validate(); err != nil {
		return store.SlotGrant{}, fmt.Errorf("etcdstore: acquire slot: %w", err)
	}
	secs, err := ttlSeconds(p.Name, p.TTL)
	if err != nil {
		return store.SlotGrant{}, fmt.Errorf("etcdstore: acquire slot: %w", err)
	}
	op := fmt.Sprintf("acquire a slot of %q", p.Name)
	lease, wasSpare, err := s.leaseFor(ctx, op, secs)
	if err != nil {
		return store.SlotGrant{}, err
	}
	var age time.Duration
	if wasSpare {
		age = lease.age()
	}
	for range acquireAttempts {
		g, all, err := s.trySlots(ctx, op, p, lease.lease)
		switch {
		case err != nil:
			s.unused(ctx, secs, lease, wasSpare)
			return store.SlotGrant{}, err
		case all == nil:
			s.refill(secs)
			g.Remaining -= age
			return g, nil
		case all.Held != nil:
			s.unused(ctx, secs, lease, wasSpare)
			return store.SlotGrant{}, all
		}
		// A holder's etcd lease expired while the store looked: try again.
	}
	s.unused(ctx, secs, lease, wasSpare)
	return store.SlotGrant{}, fmt.Errorf("etcdstore: %s: %w: a slot was held, then expired, %d times in a row while the store looked; retry",
		op, store.ErrUnavailable, acquireAttempts)
}

// slotRefusal is what the transaction of one held slot read.
type slotRefusal struct {
	sn snapshot
	in *mvccpb.KeyValue
}

// trySlots tries every slot of p, in transactions of slotsPerTxn slots,
// and returns the grant (all nil), or all with every holder (all.Held
// nil when a holder's etcd lease expired before its time left was read).
func (s *Store) trySlots(ctx context.Context, op string, p store.SlotParams, lease *clientv3.LeaseGrantResponse) (store.SlotGrant, *store.SlotsHeldError, error) {
	refusals := make([]slotRefusal, 0, p.Slots)
	per := s.slotsPerTxn()
	for lo := 0; lo < p.Slots; lo += per {
		hi := min(lo+per, p.Slots)
		var inner clientv3.Op
		for k := hi - 1; k >= lo; k-- {
			cmp, then, els := s.acquireTxn(p.Acquire(k), lease)
			if k < hi-1 {
				els = append(els, inner)
			}
			inner = clientv3.OpTxn([]clientv3.Cmp{cmp}, then, els)
		}
		resp, err := s.client.Txn(ctx).Then(inner).Commit()
		if err != nil {
			return store.SlotGrant{}, nil, classify(op, err)
		}
		r := resp.Responses[0].GetResponseTxn()
		for k := lo; k < hi; k++ {
			if r == nil {
				return store.SlotGrant{}, nil, fmt.Errorf("etcdstore: %s: %w: the server's answer has no transaction for slot %d", op, store.ErrUnavailable, k)
			}
			if r.Succeeded {
				return store.SlotGrant{Grant: acquired(p.Acquire(k), lease, resp.Header.Revision), Slot: k}, nil, nil
			}
			sn, in := refusedSnapshot(r.Responses)
			refusals = append(refusals, slotRefusal{sn, in})
			r = nextSlot(r.Responses)
		}
	}
	return s.slotsHeld(ctx, op, p, refusals)
}

// nextSlot is the transaction of the next slot in a refusal's answers,
// nil after the last slot of a transaction.
func nextSlot(rs []*etcdserverpb.ResponseOp) *etcdserverpb.TxnResponse {
	if len(rs) < 4 {
		return nil
	}
	return rs[3].GetResponseTxn()
}

// slotsHeld reports every slot held, as refusals read them.
func (s *Store) slotsHeld(ctx context.Context, op string, p store.SlotParams, refusals []slotRefusal) (store.SlotGrant, *store.SlotsHeldError, error) {
	held := make([]*mvccpb.KeyValue, 0, len(refusals))
	for k, r := range refusals {
		if r.sn.held == nil {
			// The compare saw the key and the read in the same
			// transaction does too; a missing one is a store fault.
			return store.SlotGrant{}, nil, fmt.Errorf("etcdstore: %s: %w: slot %d was refused but its key was not read", op, store.ErrUnavailable, k)
		}
		held = append(held, r.sn.held)
	}
	left, err := s.remaining(ctx, op, held)
	if err != nil {
		return store.SlotGrant{}, nil, err
	}
	all := &store.SlotsHeldError{Name: p.Name}
	for k, r := range refusals {
		remaining, ok := left[clientv3.LeaseID(r.sn.held.Lease)]
		if !ok {
			return store.SlotGrant{}, &store.SlotsHeldError{Name: p.Name}, nil
		}
		err := s.refuse(ctx, p.Acquire(k), r.sn, r.in, remaining)
		var he *store.HeldError
		if !errors.As(err, &he) {
			return store.SlotGrant{}, nil, err
		}
		all.Held = append(all.Held, *he)
	}
	return store.SlotGrant{}, all, nil
}
