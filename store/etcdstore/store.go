package etcdstore

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tenure-dev/tenure/internal/storekit"
	"github.com/tenure-dev/tenure/store"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

var (
	_ store.Store    = (*Store)(nil)
	_ store.Notifier = (*Store)(nil)
	_ store.Lister   = (*Store)(nil)
	_ store.TTLFloor = (*Store)(nil)
)

// acquireAttempts bounds how often Acquire retries when the lease it found
// held expired before the store could ask how long it had left.
const acquireAttempts = 3

// lessorSweep is how often etcd's lessor looks for expired etcd leases
// before it deletes their keys. A refusal reports the holder's remaining
// time plus this: the longest the held/ key may still exist, so that a
// follower that hears no announcement of the expiry does not come back
// before the key is gone.
const lessorSweep = 500 * time.Millisecond

// Store is a [store.Store] on etcd; docs/STORES.md lists the optional
// interfaces of package store it implements. Its methods are safe for
// concurrent use. Create it with [New].
type Store struct {
	client *clientv3.Client
	prefix string
	maxOps int // Config.MaxTxnOps
	gate   *storekit.Gate
	spares *spares
}

// New returns a store that keeps its leases in etcd through client, under
// cfg.KeyPrefix. It checks cfg but does not contact the server. The caller
// keeps ownership of client: [Store.Close] does not close it.
func New(client *clientv3.Client, cfg Config) (*Store, error) {
	if client == nil {
		return nil, fmt.Errorf("etcdstore: %w: client is nil; pass a *clientv3.Client from clientv3.New", store.ErrInvalid)
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Store{
		client: client,
		prefix: cfg.KeyPrefix,
		maxOps: cfg.MaxTxnOps,
		gate:   storekit.NewGate("etcdstore", "etcdstore.New"),
		spares: newSpares(),
	}, nil
}

// Acquire implements [store.Store.Acquire] in one round trip, or two: it
// takes the store's spare etcd lease of p.TTL rounded up to whole seconds
// (see [spares]), or grants one, then creates the held/ key on it (and
// the claim/ key a release deletes) in a transaction that requires the
// key to be absent, takes the caller out of the line and announces the
// new tenure. The token is that transaction's revision; the remaining
// time is the etcd lease's TTL less the spare's age. A store has a spare
// of a TTL once it acquired a lease with it: each acquisition grants the
// next in the background. When the lease is held, Acquire asks the server
// how long the holder's etcd lease has left and keeps the etcd lease it
// took as the spare: one more round trip, and two more to take or keep a
// place in line when p.Wait asks for one (see [Store.wait]).
//
// A TTL below [MinTTL] or above [MaxTTL] is refused with an error matching
// [store.ErrInvalid].
func (s *Store) Acquire(ctx context.Context, p store.AcquireParams) (store.Grant, error) {
	if err := s.begin("acquire"); err != nil {
		return store.Grant{}, err
	}
	if err := p.Validate(); err != nil {
		return store.Grant{}, fmt.Errorf("etcdstore: acquire: %w", err)
	}
	secs, err := ttlSeconds(p.Name, p.TTL)
	if err != nil {
		return store.Grant{}, fmt.Errorf("etcdstore: acquire: %w", err)
	}
	op := fmt.Sprintf("acquire %q", p.Name)
	lease, wasSpare, err := s.leaseFor(ctx, op, secs)
	if err != nil {
		return store.Grant{}, err
	}
	// A lease granted now was granted after the acquisition was sent,
	// which is where the caller counts the tenure from (promise P3).
	var age time.Duration
	if wasSpare {
		age = lease.age()
	}
	for range acquireAttempts {
		cmp, then, els := s.acquireTxn(p, lease.lease)
		resp, err := s.client.Txn(ctx).If(cmp).Then(then...).Else(els...).Commit()
		if err != nil {
			return store.Grant{}, classify(op, err)
		}
		if resp.Succeeded {
			s.refill(secs)
			g := acquired(p, lease.lease, resp.Header.Revision)
			g.Remaining -= age
			return g, nil
		}
		sn, in := refusedSnapshot(resp.Responses)
		if sn.held == nil {
			continue // the compare saw the key, so the read in the same transaction does too
		}
		left, err := s.remaining(ctx, op, []*mvccpb.KeyValue{sn.held})
		if err != nil {
			return store.Grant{}, err
		}
		remaining, held := left[clientv3.LeaseID(sn.held.Lease)]
		if !held {
			// The holder's etcd lease expired between the two calls.
			continue
		}
		s.unused(ctx, secs, lease, wasSpare)
		return store.Grant{}, s.refuse(ctx, p, sn, in, remaining)
	}
	s.unused(ctx, secs, lease, wasSpare)
	return store.Grant{}, fmt.Errorf("etcdstore: acquire %q: %w: the lease was held, then expired, %d times in a row while the store looked; retry",
		p.Name, store.ErrUnavailable, acquireAttempts)
}

// wait puts p.Holder in the line of lease p.Name, or keeps its place there,
// and returns its place (1: next). in is the caller's wait/ key as the
// refusal read it (nil when it was not in line); remaining is the time
// the holder has left. Two round trips: it grants an etcd lease that ends
// twice p.TTL after that expiry, then moves the key onto it (creating it
// at the end of the line when it is not there) and counts the keys ahead
// of it in the same transaction. The etcd lease the key had before
// expires by itself.
func (s *Store) wait(ctx context.Context, p store.AcquireParams, in *mvccpb.KeyValue, remaining time.Duration) (int, error) {
	op := fmt.Sprintf("acquire %q: wait in line", p.Name)
	forget := min(remaining+2*p.TTL, MaxTTL)
	lease, err := s.client.Grant(ctx, int64((forget+time.Second-1)/time.Second))
	if err != nil {
		return 0, classify(op+": grant etcd lease", err)
	}
	k := s.keys(p.Name)
	key := k.waiter(p.Holder)
	put := clientv3.OpPut(key, encodeHolder(p.Holder), clientv3.WithLease(lease.ID))
	// A new key is the last in line: every key there is ahead of it.
	last := []clientv3.Op{put, clientv3.OpGet(k.line, clientv3.WithPrefix(), clientv3.WithCountOnly())}
	txn := s.client.Txn(ctx)
	if in != nil {
		// A key kept is where it was: ahead of it are the keys created
		// no later. Unless etcd forgot it meanwhile, and it is new.
		txn = txn.If(clientv3.Compare(clientv3.CreateRevision(key), "=", in.CreateRevision)).
			Then(put, clientv3.OpGet(k.line, clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithMaxCreateRev(in.CreateRevision))).
			Else(last...)
	} else {
		txn = txn.Then(last...)
	}
	resp, err := txn.Commit()
	if err != nil {
		return 0, classify(op, err)
	}
	ahead := resp.Responses[1].GetResponseRange()
	if in != nil && resp.Succeeded {
		return len(ahead.Kvs), nil
	}
	return int(ahead.Count), nil
}

// Renew implements [store.Store.Renew]. It grants one new etcd lease per
// distinct TTL in ps (one round trip, for a [tenure.Client] always one),
// then moves every lease that matches onto it with a compare-and-set on its
// token, seq and holder: one nested transaction per lease, in etcd
// transactions of up to about ([Config.MaxTxnOps]−3)²/4 of them (3,906 at
// etcd's default; see [Store.nested]), sent concurrently (one more round
// trip): 1,000 leases cost a grant and one transaction. Leases that are not
// in ps stay on the etcd leases they had, and expire when those do.
// Entries that do not match cost a further round trip per distinct etcd
// lease of their current holders, to report the time they have left.
func (s *Store) Renew(ctx context.Context, ps []store.RenewParams) ([]store.RenewResult, error) {
	if err := s.begin("renew"); err != nil {
		return nil, err
	}
	if err := store.ValidateRenewBatch(ps); err != nil {
		return nil, fmt.Errorf("etcdstore: renew: %w", err)
	}
	secs, err := batchSeconds("renew", ps, func(p store.RenewParams) (string, time.Duration) { return p.Name, p.TTL })
	if err != nil {
		return nil, err
	}
	if len(ps) == 0 {
		return []store.RenewResult{}, nil
	}

	leases, err := s.grants(ctx, "renew", secs)
	if err != nil {
		return nil, err
	}

	ops := make([]clientv3.Op, len(ps))
	for i, p := range ps {
		ops[i] = s.renewOp(p, leases[secs[i]].ID)
	}
	outcomes, _, err := s.nested(ctx, ops, s.maxOps-opsPerRenewal)
	if err != nil {
		return nil, classify(fmt.Sprintf("renew batch of %d", len(ps)), err)
	}

	results := make([]store.RenewResult, len(ps))
	snaps := make([]snapshot, len(ps))
	var others []*mvccpb.KeyValue
	used := make(map[int64]bool)
	for i, p := range ps {
		if outcomes[i].Succeeded {
			used[secs[i]] = true
			results[i] = store.RenewResult{Renewed: true, Grant: store.Grant{
				Name:      p.Name,
				Holder:    p.Holder,
				Token:     p.Token,
				Seq:       p.Seq + 1,
				Remaining: time.Duration(leases[secs[i]].TTL) * time.Second,
			}}
			continue
		}
		rs := outcomes[i].Responses
		snaps[i] = snapshot{
			held:  first(rs[0].GetResponseRange().Kvs),
			start: first(rs[1].GetResponseRange().Kvs),
			seq:   first(rs[2].GetResponseRange().Kvs),
		}
		if snaps[i].held != nil {
			others = append(others, snaps[i].held)
		}
	}
	s.revokeUnused(ctx, leases, used)
	left, err := s.remaining(ctx, "renew", others)
	if err != nil {
		return nil, err
	}
	for i, p := range ps {
		if results[i].Renewed {
			continue
		}
		sn := snaps[i]
		remaining, held := time.Duration(0), false
		if sn.held != nil {
			if remaining, held = left[clientv3.LeaseID(sn.held.Lease)]; !held {
				sn.held = nil
			}
		}
		g, err := sn.grant(p.Name, remaining)
		if err != nil {
			return nil, err
		}
		results[i] = store.RenewResult{Grant: g}
	}
	return results, nil
}

// renewOp is the nested transaction that renews one lease onto the etcd
// lease id, or reads it as it is.
func (s *Store) renewOp(p store.RenewParams, id clientv3.LeaseID) clientv3.Op {
	k := s.keys(p.Name)
	holder := encodeHolder(p.Holder)
	return clientv3.OpTxn(
		[]clientv3.Cmp{
			clientv3.Compare(clientv3.CreateRevision(k.held), "=", int64(p.Token)),
			clientv3.Compare(clientv3.Version(k.held), "=", p.Seq),
			clientv3.Compare(clientv3.Value(k.held), "=", holder),
		},
		[]clientv3.Op{
			clientv3.OpPut(k.held, holder, clientv3.WithLease(id)),
			clientv3.OpPut(k.seq, strconv.FormatInt(p.Seq+1, 10)),
		},
		[]clientv3.Op{clientv3.OpGet(k.held), clientv3.OpGet(k.start), clientv3.OpGet(k.seq)},
	)
}

// Release implements [store.Store.Release] in one round trip when nobody
// waits in line: it deletes the held/ key if its create revision is
// p.Token and its value p.Holder, deletes the claim/ key with it (so that
// listeners do not take the release for an expiry), marks the lease
// released and announces the release, all in a transaction that also
// requires the line to be empty. When someone waits, that transaction
// reads the head of the line instead, and a second one releases and
// announces the release naming the head ([store.Notice].Next). The lease
// is free at once: this store keeps no released lease for the head (see
// the package doc, The line). The etcd lease stays (it may carry other
// leases of the same renewal) and expires by itself.
func (s *Store) Release(ctx context.Context, p store.ReleaseParams) error {
	if err := s.begin("release"); err != nil {
		return err
	}
	if err := p.Validate(); err != nil {
		return fmt.Errorf("etcdstore: release: %w", err)
	}
	resp, err := s.client.Txn(ctx).Then(s.releaseOp(p)).Commit()
	if err != nil {
		return classify(fmt.Sprintf("release %q", p.Name), err)
	}
	return s.released(ctx, p, (*clientv3.TxnResponse)(resp.Responses[0].GetResponseTxn()))
}

// Get implements [store.Store.Get]: one read of the lease's keys, and for
// a held lease one more round trip for its remaining time.
func (s *Store) Get(ctx context.Context, name string) (store.Record, error) {
	if err := s.begin("get"); err != nil {
		return store.Record{}, err
	}
	if err := store.ValidateName(name); err != nil {
		return store.Record{}, fmt.Errorf("etcdstore: get: %w", err)
	}
	k := s.keys(name)
	resp, err := s.client.Txn(ctx).
		Then(clientv3.OpGet(k.held), clientv3.OpGet(k.start), clientv3.OpGet(k.seq), clientv3.OpGet(k.released)).
		Commit()
	if err != nil {
		return store.Record{}, classify(fmt.Sprintf("get %q", name), err)
	}
	rs := resp.Responses
	sn := snapshot{
		held:     first(rs[0].GetResponseRange().Kvs),
		start:    first(rs[1].GetResponseRange().Kvs),
		seq:      first(rs[2].GetResponseRange().Kvs),
		released: first(rs[3].GetResponseRange().Kvs),
	}
	if sn.start == nil {
		return store.Record{}, fmt.Errorf("etcdstore: lease %q: %w", name, store.ErrNotFound)
	}
	records, err := s.records(ctx, fmt.Sprintf("get %q", name), []string{name}, []snapshot{sn})
	if err != nil {
		return store.Record{}, err
	}
	return records[0], nil
}

// List implements [store.Lister.List]: one read of every key under the
// prefix, and one round trip per distinct etcd lease of the held leases.
func (s *Store) List(ctx context.Context) ([]store.Record, error) {
	if err := s.begin("list"); err != nil {
		return nil, err
	}
	dirs := []string{heldDir, startDir, seqDir, releasedDir}
	ops := make([]clientv3.Op, len(dirs))
	for i, dir := range dirs {
		ops[i] = clientv3.OpGet(s.prefix+dir, clientv3.WithPrefix())
	}
	resp, err := s.client.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return nil, classify("list", err)
	}
	byName := make(map[string]*snapshot)
	for i, dir := range dirs {
		for _, kv := range resp.Responses[i].GetResponseRange().Kvs {
			name := strings.TrimPrefix(string(kv.Key), s.prefix+dir)
			sn := byName[name]
			if sn == nil {
				sn = &snapshot{}
				byName[name] = sn
			}
			switch dir {
			case heldDir:
				sn.held = kv
			case startDir:
				sn.start = kv
			case seqDir:
				sn.seq = kv
			case releasedDir:
				sn.released = kv
			}
		}
	}
	names := make([]string, 0, len(byName))
	for name, sn := range byName {
		// Keys of a name without a start/ key were not written by
		// Acquire: leftovers of an interrupted cleanup, not leases.
		if sn.start != nil {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	snaps := make([]snapshot, len(names))
	for i, name := range names {
		snaps[i] = *byName[name]
	}
	return s.records(ctx, "list", names, snaps)
}

// records reports snapshots as records, asking the server for the
// remaining time of those that are held.
func (s *Store) records(ctx context.Context, op string, names []string, snaps []snapshot) ([]store.Record, error) {
	var held []*mvccpb.KeyValue
	for _, sn := range snaps {
		if sn.held != nil {
			held = append(held, sn.held)
		}
	}
	left, err := s.remaining(ctx, op, held)
	if err != nil {
		return nil, err
	}
	records := make([]store.Record, len(snaps))
	for i, sn := range snaps {
		var remaining time.Duration
		if sn.held != nil {
			var ok bool
			if remaining, ok = left[clientv3.LeaseID(sn.held.Lease)]; !ok {
				sn.held = nil // its etcd lease expired since the read
			}
		}
		if records[i], err = sn.record(names[i], remaining); err != nil {
			return nil, err
		}
	}
	return records, nil
}

// remaining asks the server how long the etcd leases of held keys have
// left, one round trip per distinct lease. A lease that is gone is missing
// from the result.
//
// etcd answers in whole seconds rounded down and promises expiry within
// that plus one second; remaining reports that upper bound, capped at the
// lease's granted TTL, so that a follower told to come back after it does
// not come back too early. A holder never relies on it: its own deadline
// comes from the TTL granted by Acquire and Renew.
func (s *Store) remaining(ctx context.Context, op string, held []*mvccpb.KeyValue) (map[clientv3.LeaseID]time.Duration, error) {
	left := make(map[clientv3.LeaseID]time.Duration)
	asked := make(map[clientv3.LeaseID]bool)
	for _, kv := range held {
		id := clientv3.LeaseID(kv.Lease)
		if asked[id] {
			continue
		}
		asked[id] = true
		if id == clientv3.NoLease {
			return nil, fmt.Errorf("etcdstore: %s: key %q has no etcd lease, so this store did not write it; delete it or use another KeyPrefix", op, kv.Key)
		}
		resp, err := s.client.TimeToLive(ctx, id)
		if err != nil {
			return nil, classify(op+": ask remaining time of etcd lease", err)
		}
		if resp.TTL < 0 {
			continue
		}
		left[id] = time.Duration(min(resp.TTL+1, max(resp.GrantedTTL, 1))) * time.Second
	}
	return left, nil
}

// revoke gives back an etcd lease that carries no key, best effort: if it
// fails, the lease expires by itself after its TTL.
func (s *Store) revoke(ctx context.Context, id clientv3.LeaseID) {
	_, _ = s.client.Revoke(ctx, id)
}

// IsOwner returns a comparison that holds, inside any etcd transaction,
// exactly while the tenure of lease name with token is the current one: its
// held/ key exists and was created at revision token. Put it in the If of
// the transaction that makes the protected write, so that the write and
// the check commit together (the etcd IsOwner pattern):
//
//	resp, err := client.Txn(ctx).
//		If(store.IsOwner(lease.Name(), lease.Token())).
//		Then(clientv3.OpPut("jobs/report", report)).
//		Commit()
//	// !resp.Succeeded: the tenure ended (released, expired or taken
//	// over); do not retry the write, treat it as store.ErrFenced.
//
// A token of 0 or less (a [tenure.Lease] no longer trusted reports 0) gives
// a comparison that never holds.
func (s *Store) IsOwner(name string, token store.Token) clientv3.Cmp {
	key := s.keys(name).held
	if token <= 0 {
		return clientv3.Compare(clientv3.CreateRevision(key), "<", 0)
	}
	return clientv3.Compare(clientv3.CreateRevision(key), "=", int64(token))
}

// Close implements [store.Store.Close]: later calls fail with
// [store.ErrClosed] and every [Store.Listen] returns. It does not close
// the etcd client, and leaves every lease as it is. Closing twice is
// harmless.
func (s *Store) Close() error {
	s.gate.Close()
	s.spares.close()
	return nil
}

// MinTTL implements [store.TTLFloor]: etcd refuses leases shorter than
// [MinTTL], so a client refuses them when it is made.
func (s *Store) MinTTL() time.Duration { return MinTTL }

// begin refuses calls on a closed store.
func (s *Store) begin(op string) error { return s.gate.Check(op) }
