package etcdstore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/tenure-dev/tenure/internal/storekit"
	"github.com/tenure-dev/tenure/store"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

var (
	_ store.BatchAcquirer = (*Store)(nil)
	_ store.BatchReleaser = (*Store)(nil)
)

// What the nested transaction of one batch entry costs of a
// transaction's [Config.MaxTxnOps], beyond the entry itself: etcd counts
// the widest branch of each transaction against what its enclosing ones
// leave.
const (
	// opsPerAcquisition: the seven writes of an acquisition.
	opsPerAcquisition = 7
	// opsPerRelease: the two compares of the release, and the four
	// writes of its inner transaction, which checks the line.
	opsPerRelease = 6
)

// AcquireBatch implements [store.BatchAcquirer]. It grants one etcd lease
// per distinct TTL in ps (one round trip), then attempts every acquisition
// as [Store.Acquire] does, one nested transaction each, in etcd
// transactions of up to about ([Config.MaxTxnOps]−7)²/4 of them (3,660 at
// etcd's default; see [Store.nested]), sent concurrently (one more round
// trip). The leases taken in one transaction
// share its revision as their token. Entries found held cost what a
// refusal of Acquire costs beyond its transaction: one round trip per
// distinct etcd lease of their holders for the time they have left, and
// two more for each entry that waits in line. An entry whose holder's
// etcd lease expired meanwhile is attempted again with Acquire. The etcd
// leases that carry no new tenure are revoked.
func (s *Store) AcquireBatch(ctx context.Context, ps []store.AcquireParams) ([]store.AcquireResult, error) {
	if err := s.begin("acquire batch"); err != nil {
		return nil, err
	}
	if err := store.ValidateAcquireBatch(ps); err != nil {
		return nil, fmt.Errorf("etcdstore: acquire batch: %w", err)
	}
	secs, err := batchSeconds("acquire batch", ps, func(p store.AcquireParams) (string, time.Duration) { return p.Name, p.TTL })
	if err != nil {
		return nil, err
	}
	if len(ps) == 0 {
		return []store.AcquireResult{}, nil
	}
	leases, err := s.grants(ctx, "acquire batch", secs)
	if err != nil {
		return nil, err
	}
	ops := make([]clientv3.Op, len(ps))
	for i, p := range ps {
		cmp, then, els := s.acquireTxn(p, leases[secs[i]])
		ops[i] = clientv3.OpTxn([]clientv3.Cmp{cmp}, then, els)
	}
	outcomes, revs, err := s.nested(ctx, ops, s.maxOps-opsPerAcquisition)
	if err != nil {
		return nil, classify(fmt.Sprintf("acquire batch of %d", len(ps)), err)
	}

	results := make([]store.AcquireResult, len(ps))
	used := make(map[int64]bool)
	var refused []int
	var held []*mvccpb.KeyValue
	for i, p := range ps {
		if outcomes[i].Succeeded {
			used[secs[i]] = true
			results[i].Grant = acquired(p, leases[secs[i]], revs[i])
			continue
		}
		refused = append(refused, i)
		if sn, _ := refusedSnapshot(outcomes[i].Responses); sn.held != nil {
			held = append(held, sn.held)
		}
	}
	s.revokeUnused(ctx, leases, used)
	left, err := s.remaining(ctx, "acquire batch", held)
	if err != nil {
		return nil, err
	}
	for _, i := range refused {
		p := ps[i]
		sn, in := refusedSnapshot(outcomes[i].Responses)
		remaining, ok := time.Duration(0), false
		if sn.held != nil {
			remaining, ok = left[clientv3.LeaseID(sn.held.Lease)]
		}
		if !ok {
			// The holder's etcd lease expired since the batch looked.
			g, err := s.Acquire(ctx, p)
			results[i] = store.AcquireResult{Grant: g, Err: err}
			continue
		}
		results[i].Err = s.refuse(ctx, p, sn, in, remaining)
	}
	return results, nil
}

// ReleaseBatch implements [store.BatchReleaser]: every release as
// [Store.Release] does it, one nested transaction each, in etcd
// transactions of up to about ([Config.MaxTxnOps]−6)²/4 of them (3,721
// at etcd's default; see [Store.nested]), sent concurrently (one round
// trip), and one more round trip for each
// lease someone waits for (to release it naming the head of its line).
func (s *Store) ReleaseBatch(ctx context.Context, ps []store.ReleaseParams) ([]error, error) {
	if err := s.begin("release batch"); err != nil {
		return nil, err
	}
	if err := store.ValidateReleaseBatch(ps); err != nil {
		return nil, fmt.Errorf("etcdstore: release batch: %w", err)
	}
	if len(ps) == 0 {
		return []error{}, nil
	}
	ops := make([]clientv3.Op, len(ps))
	for i, p := range ps {
		ops[i] = s.releaseOp(p)
	}
	outcomes, _, err := s.nested(ctx, ops, s.maxOps-opsPerRelease)
	if err != nil {
		return nil, classify(fmt.Sprintf("release batch of %d", len(ps)), err)
	}
	errs := make([]error, len(ps))
	for i, p := range ps {
		errs[i] = s.released(ctx, p, outcomes[i])
	}
	return errs, nil
}

// acquireTxn returns the transaction that gives lease p.Name to p.Holder
// on the etcd lease granted, when it is free (held/ absent): the compare,
// the writes, and the reads that answer a refusal (see
// [refusedSnapshot]).
func (s *Store) acquireTxn(p store.AcquireParams, lease *clientv3.LeaseGrantResponse) (clientv3.Cmp, []clientv3.Op, []clientv3.Op) {
	k := s.keys(p.Name)
	announce := storekit.EncodeNotice(store.Notice{Name: p.Name, Kind: store.NoticeAcquired, Holder: p.Holder, Remaining: granted(lease)})
	return clientv3.Compare(clientv3.CreateRevision(k.held), "=", 0),
		[]clientv3.Op{
			clientv3.OpPut(k.held, encodeHolder(p.Holder), clientv3.WithLease(lease.ID)),
			clientv3.OpPut(k.claim, ""),
			clientv3.OpPut(k.start, encodeStart(p.Holder, time.Now(), p.Payload)),
			clientv3.OpDelete(k.seq),
			clientv3.OpDelete(k.released),
			clientv3.OpDelete(k.waiter(p.Holder)),
			clientv3.OpPut(k.announce, announce),
		},
		[]clientv3.Op{clientv3.OpGet(k.held), clientv3.OpGet(k.start), clientv3.OpGet(k.waiter(p.Holder))}
}

// granted is the time an etcd lease was granted for.
func granted(lease *clientv3.LeaseGrantResponse) time.Duration {
	return time.Duration(lease.TTL) * time.Second
}

// acquired is the grant of p by the transaction of revision rev.
func acquired(p store.AcquireParams, lease *clientv3.LeaseGrantResponse, rev int64) store.Grant {
	return store.Grant{
		Name:      p.Name,
		Holder:    p.Holder,
		Token:     store.Token(rev),
		Seq:       1,
		Remaining: granted(lease),
		Payload:   p.Payload,
	}
}

// refusedSnapshot reads the answers of an acquisition's transaction that
// found the lease held: the lease's keys, and the caller's wait/ key (nil
// when it is not in line).
func refusedSnapshot(rs []*etcdserverpb.ResponseOp) (snapshot, *mvccpb.KeyValue) {
	return snapshot{
		held:  first(rs[0].GetResponseRange().Kvs),
		start: first(rs[1].GetResponseRange().Kvs),
	}, first(rs[2].GetResponseRange().Kvs)
}

// refuse returns the [*store.HeldError] that refuses p, held as sn says
// for remaining more, after putting the caller in line when p.Wait asks
// (in: its wait/ key as the refusal read it).
func (s *Store) refuse(ctx context.Context, p store.AcquireParams, sn snapshot, in *mvccpb.KeyValue, remaining time.Duration) error {
	g, err := sn.grant(p.Name, remaining)
	if err != nil {
		return err
	}
	last, err := sn.last(p.Name)
	if err != nil {
		return err
	}
	he := &store.HeldError{Name: p.Name, Holder: g.Holder, Token: g.Token, Seq: g.Seq, Remaining: g.Remaining + lessorSweep, Payload: last.Payload}
	if p.Wait {
		if he.Position, err = s.wait(ctx, p, in, remaining); err != nil {
			return err
		}
	}
	return he
}

// batchSeconds returns the TTL of each entry of a batch in whole seconds
// (see ttlSeconds), or an error for the call op.
func batchSeconds[P any](op string, ps []P, entry func(P) (name string, ttl time.Duration)) ([]int64, error) {
	secs := make([]int64, len(ps))
	for i, p := range ps {
		var err error
		if secs[i], err = ttlSeconds(entry(p)); err != nil {
			return nil, fmt.Errorf("etcdstore: %s: %w", op, err)
		}
	}
	return secs, nil
}

// revokeUnused revokes the etcd leases of a batch, granted per TTL in
// seconds, that carry no key (used: those that do).
func (s *Store) revokeUnused(ctx context.Context, leases map[int64]*clientv3.LeaseGrantResponse, used map[int64]bool) {
	for sec, lease := range leases {
		if !used[sec] {
			s.revoke(ctx, lease.ID)
		}
	}
}

// grants grants one etcd lease per distinct TTL in secs, one round trip
// each.
func (s *Store) grants(ctx context.Context, op string, secs []int64) (map[int64]*clientv3.LeaseGrantResponse, error) {
	leases := make(map[int64]*clientv3.LeaseGrantResponse)
	for _, sec := range secs {
		if leases[sec] != nil {
			continue
		}
		lease, err := s.client.Grant(ctx, sec)
		if err != nil {
			return nil, classify(op+": grant etcd lease", err)
		}
		leases[sec] = lease
	}
	return leases, nil
}

// maxRequestBytes is the most [Store.nested] puts in one etcd request,
// by its estimate of the operations' sizes ([opSize], a little over
// protobuf's): etcd refuses a request larger than its
// --max-request-bytes, 1.5 MiB by default.
const maxRequestBytes = 1280 << 10

// nested sends ops, each a nested transaction, and returns the answer of
// each op and the revision of the transaction that carried it. per is how
// many of them one transaction may carry (at least one).
//
// etcd counts the widest branch of each transaction against what the
// transactions around it leave, so ops that fit in one transaction go in
// one; more go in groups of per/2, a transaction of up to per−per/2
// groups each: up to per²/4 ops a request (3,906 leases to renew at
// etcd's default --max-txn-ops), while their estimated size stays under
// [maxRequestBytes]. A request is one raft entry, so a batch of any size
// costs the server about the same; a holder of 1,000 leases renews them
// in one request. The requests of one call are sent at once. On an error
// some of them may have been applied.
func (s *Store) nested(ctx context.Context, ops []clientv3.Op, per int) ([]*clientv3.TxnResponse, []int64, error) {
	per = max(per, 1)
	group := len(ops) // ops per group: all of them, when they fit in one transaction
	if len(ops) > per && per > 1 {
		group = per / 2
	}
	perRequest := max(per, group*(per-group))
	outcomes := make([]*clientv3.TxnResponse, len(ops))
	revs := make([]int64, len(ops))
	var (
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
	)
	send := func(lo, hi int) {
		var resp *clientv3.TxnResponse
		var err error
		if hi-lo <= per {
			resp, err = s.client.Txn(ctx).Then(ops[lo:hi]...).Commit()
		} else {
			groups := make([]clientv3.Op, 0, (hi-lo+group-1)/group)
			for g := lo; g < hi; g += group {
				groups = append(groups, clientv3.OpTxn(nil, ops[g:min(g+group, hi)], nil))
			}
			resp, err = s.client.Txn(ctx).Then(groups...).Commit()
		}
		if err != nil {
			mu.Lock()
			if first == nil {
				first = err
			}
			mu.Unlock()
			return
		}
		for j := range hi - lo {
			var r *etcdserverpb.ResponseOp
			if hi-lo <= per {
				r = resp.Responses[j]
			} else {
				r = resp.Responses[j/group].GetResponseTxn().Responses[j%group]
			}
			outcomes[lo+j] = (*clientv3.TxnResponse)(r.GetResponseTxn())
			revs[lo+j] = resp.Header.Revision
		}
	}
	for lo := 0; lo < len(ops); {
		hi, size := lo, 0
		for hi < len(ops) && hi-lo < perRequest {
			n := opSize(ops[hi])
			if hi > lo && size+n > maxRequestBytes {
				break
			}
			size += n
			hi++
		}
		start := lo
		wg.Go(func() { send(start, hi) })
		lo = hi
	}
	wg.Wait()
	if first != nil {
		return nil, nil, first
	}
	return outcomes, revs, nil
}

// opSize estimates the bytes op takes in a request: its keys and values
// and a few bytes of framing for each operation and compare.
func opSize(op clientv3.Op) int {
	const framing = 16
	n := framing + len(op.KeyBytes()) + len(op.RangeBytes()) + len(op.ValueBytes())
	if op.IsTxn() {
		cmps, then, els := op.Txn()
		for _, c := range cmps {
			n += framing + len(c.KeyBytes()) + len(c.GetCompare().RangeEnd) + len(c.ValueBytes())
		}
		for _, o := range then {
			n += opSize(o)
		}
		for _, o := range els {
			n += opSize(o)
		}
	}
	return n
}

// releaseOp is the transaction that releases p's tenure if it is the
// current one: with nobody in line it deletes the held/ key and the
// claim/ key with it (so that listeners do not take the release for an
// expiry), marks the lease released and announces the release; with
// someone in line it reads the head of the line instead (see
// [Store.released]).
func (s *Store) releaseOp(p store.ReleaseParams) clientv3.Op {
	k := s.keys(p.Name)
	return clientv3.OpTxn(s.ours(p),
		[]clientv3.Op{clientv3.OpTxn(
			[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(k.line), "=", 0).WithPrefix()},
			s.releaseWrites(p, store.Holder{}),
			[]clientv3.Op{clientv3.OpGet(k.line, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend), clientv3.WithLimit(1))},
		)},
		nil)
}

// ours holds while p's tenure is the current one.
func (s *Store) ours(p store.ReleaseParams) []clientv3.Cmp {
	k := s.keys(p.Name)
	return []clientv3.Cmp{
		clientv3.Compare(clientv3.CreateRevision(k.held), "=", int64(p.Token)),
		clientv3.Compare(clientv3.Value(k.held), "=", encodeHolder(p.Holder)),
	}
}

// releaseWrites are the writes of a release that names next as the head
// of the line (the zero Holder: nobody waits).
func (s *Store) releaseWrites(p store.ReleaseParams, next store.Holder) []clientv3.Op {
	k := s.keys(p.Name)
	return []clientv3.Op{
		clientv3.OpDelete(k.held),
		clientv3.OpDelete(k.claim),
		clientv3.OpPut(k.released, ""),
		clientv3.OpPut(k.announce, storekit.EncodeNotice(store.Notice{Name: p.Name, Kind: store.NoticeReleased, Next: next})),
	}
}

// released finishes the release of p from the answer of its [releaseOp]:
// when the line was not empty, a second transaction releases the lease
// naming the head of the line, if the tenure is still the current one.
func (s *Store) released(ctx context.Context, p store.ReleaseParams, resp *clientv3.TxnResponse) error {
	if resp.Succeeded {
		inner := resp.Responses[0].GetResponseTxn()
		if inner.Succeeded {
			return nil
		}
		head := first(inner.Responses[0].GetResponseRange().Kvs)
		next, err := decodeHolder(head)
		if err != nil {
			return corrupt(p.Name, head, err)
		}
		if resp, err = s.client.Txn(ctx).If(s.ours(p)...).Then(s.releaseWrites(p, next)...).Commit(); err != nil {
			return classify(fmt.Sprintf("release %q", p.Name), err)
		}
	}
	if !resp.Succeeded {
		return fmt.Errorf("etcdstore: release of lease %q by %s with token %d refused: %w",
			p.Name, p.Holder, p.Token, store.ErrNotHeld)
	}
	return nil
}
