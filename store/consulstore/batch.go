package consulstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tenure-dev/tenure/store"

	"github.com/hashicorp/consul/api"
)

// How many operations one lease takes in a transaction that changes hands
// (see [Store.write]), besides the transaction's one announcement.
const (
	// acquireOps: the guard on the record, the counter, the lock, and the
	// deletion of the acquirer's place in line.
	acquireOps = 4
	// releaseOps: the check of the record and its unlock.
	releaseOps = 2
)

// AcquireBatch implements [store.BatchAcquirer]: it attempts each
// acquisition as [Store.Acquire] does, with the same grants and the same
// refusals, but reads and writes the leases together. For n entries of
// which f are free it costs ⌈(n+1)/128⌉ consistent reads (the leases,
// their lines and the announcement key), one session creation per
// distinct TTL among the free ones, and ⌈f/31⌉ transactions: three round
// trips up to 31 free leases of one TTL (as one Acquire), 42 for 1,000.
// A transaction rolled back because a lease or the announcement key
// changed since the read costs a read of what changed and a transaction
// more. A refused entry that waits in line costs what that costs Acquire,
// each: a session renewal to keep its place, or a session creation and a
// transaction to take one.
//
// The leases granted share one session per TTL, created for the batch: a
// holder that renews exactly them renews that session in place, and one
// that renews some of them, or releases some, leaves the others to expire
// on time (see Sessions and round trips in the package documentation).
// The leases granted by one transaction share its index as their token.
//
// An error for the whole call (a request that failed) destroys, in the
// background, the sessions the call created, and so ends every tenure it
// granted: the caller learns none of them.
func (s *Store) AcquireBatch(ctx context.Context, ps []store.AcquireParams) ([]store.AcquireResult, error) {
	op := fmt.Sprintf("acquire batch of %d leases", len(ps))
	if err := s.begin(ctx, op); err != nil {
		return nil, err
	}
	if err := store.ValidateAcquireBatch(ps); err != nil {
		return nil, interpret(op, err)
	}
	ttls, err := sessionTTLs(s.cfg, ps, func(p store.AcquireParams) (string, time.Duration) { return p.Name, p.TTL })
	if err != nil {
		return nil, interpret(op, err)
	}
	res, err := s.acquire(ctx, ps, ttls)
	if err != nil {
		return nil, interpret(op, err)
	}
	return res, nil
}

// ReleaseBatch implements [store.BatchReleaser]: it releases each tenure
// as [Store.Release] does, in ⌈(n+1)/128⌉ consistent reads (which also
// find the heads of the lines) and ⌈r/63⌉ transactions for the r tenures
// found held as given: two round trips up to 63 leases. A transaction
// rolled back because a lease or the announcement key changed since the
// read costs a read of what changed and a transaction more. Sessions left
// holding none of the leases this store put into them are destroyed in
// the background.
func (s *Store) ReleaseBatch(ctx context.Context, ps []store.ReleaseParams) ([]error, error) {
	op := fmt.Sprintf("release batch of %d leases", len(ps))
	if err := s.begin(ctx, op); err != nil {
		return nil, err
	}
	if err := store.ValidateReleaseBatch(ps); err != nil {
		return nil, interpret(op, err)
	}
	errs, err := s.release(ctx, ps)
	if err != nil {
		return nil, interpret(op, err)
	}
	return errs, nil
}

// sessionTTLs returns the session TTL of each entry of a batch (see
// [Config.sessionTTL]), or an error naming the first entry that has none.
func sessionTTLs[P any](cfg Config, ps []P, entry func(P) (name string, ttl time.Duration)) ([]time.Duration, error) {
	ttls := make([]time.Duration, len(ps))
	for i, p := range ps {
		name, ttl := entry(p)
		var err error
		if ttls[i], err = cfg.sessionTTL(ttl); err != nil {
			return nil, fmt.Errorf("lease %q: %w", name, err)
		}
	}
	return ttls, nil
}

// acquire attempts the acquisitions ps, whose session TTLs are ttls (see
// [Store.write]). After an error it forgets what it granted and destroys
// the sessions it created.
func (s *Store) acquire(ctx context.Context, ps []store.AcquireParams, ttls []time.Duration) ([]store.AcquireResult, error) {
	a := &acquisitions{s: s, ps: ps, ttls: ttls, sessions: newBatchSessions(s), vals: make([]value, len(ps)), results: make([]store.AcquireResult, len(ps))}
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = p.Name
		if s.speculate(p.Name, p.Holder) {
			a.sessions.start(ctx, p.Holder, ttls[i])
		}
	}
	if err := s.write(ctx, names, acquireOps, a); err != nil {
		for i, r := range a.results {
			if r.Grant.Token > 0 {
				s.memo.left(ps[i].Name)
			}
		}
		a.sessions.abandon()
		return nil, err
	}
	a.sessions.done()
	return a.results, nil
}

// release releases the tenures ps (see [Store.write]).
func (s *Store) release(ctx context.Context, ps []store.ReleaseParams) ([]error, error) {
	r := &releases{s: s, ps: ps, errs: make([]error, len(ps))}
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = p.Name
	}
	if err := s.write(ctx, names, releaseOps, r); err != nil {
		return nil, err
	}
	return r.errs, nil
}

// handover is a batch of changes of hands that [Store.write] writes,
// acquisitions or releases, one entry per lease. Its methods answer the
// entries, by index.
type handover interface {
	// ready reports whether entry i can be written on its lease l as just
	// read; when it cannot, it answers the entry (a refusal).
	ready(ctx context.Context, i int, l lease) bool
	// ops returns the operations that write entry i, provided its lease
	// did not change since l was read, and the notice that announces it.
	ops(ctx context.Context, i int, l lease) (api.TxnOps, store.Notice, error)
	// applied answers entry i, which the transaction of index applied.
	applied(i int, l lease, index uint64)
	// rolledBack answers entry i when the errors its operations failed
	// with settle it, and reports whether they did.
	rolledBack(ctx context.Context, i int, l lease, errs []string) bool
	// stuck answers entry i, whose lease kept changing.
	stuck(i int)
}

// write writes the batch h of changes of hands, entry i on lease names[i],
// each entry taking per operations.
//
// It reads the leases, their lines and the announcement key, and writes
// the entries h finds ready in transactions of up to ⌊127/per⌋ entries
// and one operation that announces them all. A transaction is all or
// nothing; one rolled back because leases changed since they were read,
// or because only the announcement key did (another lease under the
// prefix changed hands), is sent again, after reading the leases that
// failed and the key, at most [maxAttempts] times per entry for a change
// and [maxRaces] for a race, as [Store.Acquire] and [Store.Release]
// always tried; h answers an entry that kept changing. write returns an
// error when a request failed; transactions applied by then stay applied.
//
// Each transaction announces all it does with one compare-and-set of the
// announcement key, as that many announcements. The key keeps the latest
// [announceKept]: a listener that did not look while a transaction of
// more went by hears the empty notice, "look at everything again", which
// [store.Notifier] allows. One operation per transaction, because a
// second compare-and-set of the key would fail on the first's write; the
// key's length kept, because every listener reads all of it at every
// announcement, for every lease under the prefix.
func (s *Store) write(ctx context.Context, names []string, per int, h handover) error {
	leases := make([]lease, len(names))
	changes, races := make([]int, len(names)), make([]int, len(names))
	queue := make([]int, len(names)) // the entries still to write, in order
	for i := range queue {
		queue[i] = i
	}
	stale := queue // the entries of queue to read before writing them
	for len(queue) > 0 {
		read := make([]string, len(stale))
		for j, i := range stale {
			read[j] = names[i]
		}
		ls, b, err := s.read(ctx, read, true)
		if err != nil {
			return err
		}
		refused := make(map[int]bool)
		for j, i := range stale {
			leases[i] = ls[j]
			refused[i] = !h.ready(ctx, i, ls[j])
		}
		ready := make([]int, 0, len(queue))
		for _, i := range queue {
			if !refused[i] {
				ready = append(ready, i)
			}
		}
		queue, stale = ready, nil
		// Send transactions until one is rolled back.
		for len(queue) > 0 {
			chunk := queue[:min(len(queue), (maxTxnOps-1)/per)]
			ops := make(api.TxnOps, 1, 1+per*len(chunk))
			notices := make([]announced, len(chunk))
			for j, i := range chunk {
				entry, n, err := h.ops(ctx, i, leases[i])
				if err != nil {
					return err
				}
				ops, notices[j] = append(ops, entry...), newAnnounced(n)
			}
			if ops[0], err = b.op(s.announceKey(), notices...); err != nil {
				return err
			}
			ok, resp, err := s.txn(ctx, ops, false)
			if err != nil {
				return err
			}
			if ok {
				index := txnIndex(resp)
				if index == 0 {
					return fmt.Errorf("the transaction that changed hands did not report its index; read the leases with Get")
				}
				for _, i := range chunk {
					h.applied(i, leases[i], index)
				}
				if b, err = boardWritten(ops[0], index); err != nil {
					return err
				}
				queue = queue[len(chunk):]
				continue
			}
			errs, raced := blame(resp, per, len(chunk))
			var again []int
			for j, i := range chunk {
				switch {
				case len(errs[j]) > 0 && h.rolledBack(ctx, i, leases[i], errs[j]):
					continue
				case len(errs[j]) > 0:
					changes[i]++
				case raced:
					races[i]++
				}
				if changes[i] >= maxAttempts || races[i] >= maxRaces {
					h.stuck(i)
					continue
				}
				if len(errs[j]) > 0 {
					stale = append(stale, i)
				}
				again = append(again, i)
			}
			queue = append(again, queue[len(chunk):]...)
			break
		}
	}
	return nil
}

// blame sorts the errors of a rolled-back transaction of entries entries
// of per operations each, after the announcement: the errors of each
// entry's operations, and whether the announcement failed (the key
// changed since it was read). When no operation is to blame, every entry
// is.
func blame(resp *api.TxnResponse, per, entries int) ([][]string, bool) {
	errs := make([][]string, entries)
	raced, blamed := false, false
	if resp == nil {
		resp = &api.TxnResponse{}
	}
	for _, e := range resp.Errors {
		switch j := (e.OpIndex - 1) / per; {
		case e.OpIndex == 0:
			raced, blamed = true, true
		case e.OpIndex > 0 && j < entries:
			errs[j] = append(errs[j], e.What)
			blamed = true
		}
	}
	if !blamed {
		for j := range errs {
			errs[j] = []string{txnErrors(resp)}
		}
	}
	return errs, raced
}

// keptChanging is the answer to an entry of op whose lease changed at
// every attempt.
func keptChanging(op string) error {
	return fmt.Errorf("consulstore: %s: %w: the lease kept changing under repeated attempts; retry", op, store.ErrUnavailable)
}

// acquisitions is a batch of acquisitions (see [Store.acquire]). It puts
// the leases it grants into sessions created for the batch, one per
// session TTL.
type acquisitions struct {
	s        *Store
	ps       []store.AcquireParams
	ttls     []time.Duration
	sessions *batchSessions
	vals     []value // the lease record each entry's last transaction wrote
	results  []store.AcquireResult
}

func (a *acquisitions) op(i int) string { return fmt.Sprintf("acquire lease %q", a.ps[i].Name) }

// ready refuses entry i when its lease is held, after putting the
// acquirer in line or keeping its place there if it asks to wait.
func (a *acquisitions) ready(ctx context.Context, i int, l lease) bool {
	if !l.held() {
		return true
	}
	held := l.heldError()
	a.s.busy.held(l.name, 2*held.Remaining, store.Holder{})
	a.results[i].Err = a.s.refuse(ctx, a.op(i), a.ps[i], a.ttls[i], l, held)
	return false
}

// ops bumps the counter (a compare-and-set that also creates it), locks
// the lease record with the batch's session of the entry's TTL, and takes
// the acquirer out of the line, if it was in it, provided the record is
// as read.
func (a *acquisitions) ops(ctx context.Context, i int, l lease) (api.TxnOps, store.Notice, error) {
	p, ttl := a.ps[i], a.ttls[i]
	session, err := a.sessions.get(ctx, p.Holder, ttl)
	if err != nil {
		return nil, store.Notice{}, err
	}
	a.vals[i] = value{
		Label:      p.Holder.Label,
		Instance:   p.Holder.Instance,
		Seq:        1,
		TTLMillis:  ttl.Milliseconds(),
		AcquiredAt: time.Now().UTC(),
		Payload:    p.Payload,
	}
	body, err := a.vals[i].encode()
	if err != nil {
		return nil, store.Notice{}, err
	}
	k := a.s.keys(p.Name)
	guard := &api.KVTxnOp{Verb: api.KVCheckNotExists, Key: k.lease}
	if l.exists {
		guard = &api.KVTxnOp{Verb: api.KVCheckIndex, Key: k.lease, Index: l.index}
	}
	return api.TxnOps{
		{KV: guard},
		// A ModifyIndex of 0 creates the counter only if it is absent.
		{KV: &api.KVTxnOp{Verb: api.KVCAS, Key: k.counter, Index: uint64(l.token), Value: []byte(strconv.FormatUint(l.tenures+1, 10))}},
		{KV: &api.KVTxnOp{Verb: api.KVLock, Key: k.lease, Session: session.id, Value: body}},
		{KV: &api.KVTxnOp{Verb: api.KVDelete, Key: k.waiter(p.Holder)}},
	}, store.Notice{Name: p.Name, Kind: store.NoticeAcquired, Holder: p.Holder, Remaining: ttl}, nil
}

// applied grants entry i and remembers the write.
func (a *acquisitions) applied(i int, l lease, index uint64) {
	p, ttl := a.ps[i], a.ttls[i]
	session := a.sessions.by[ttl]
	session.put++
	// The session that kept the new holder's place in line keeps nothing
	// now.
	if _, waited := l.place(p.Holder); waited != "" {
		a.s.reap(waited)
	}
	a.s.heads.acquired(p.Name, p.Holder)
	a.s.busy.free(p.Name)
	// The transaction wrote the counter and the record: their ModifyIndex
	// is its index, and the counter's is the token.
	token := store.Token(index)
	a.s.reap(a.s.memo.wrote(p.Name, written{token: token, val: a.vals[i], index: index, session: session.id, ends: time.Now().Add(2 * ttl)}, false))
	a.results[i].Grant = store.Grant{Name: p.Name, Holder: p.Holder, Token: token, Seq: 1, Remaining: ttl, Payload: p.Payload}
}

// rolledBack refuses entry i when Consul's lock-delay kept the record from
// being locked: the lease is reported held by its last holder, for the
// configured delay (at least a second).
func (a *acquisitions) rolledBack(ctx context.Context, i int, l lease, errs []string) bool {
	for _, e := range errs {
		if strings.HasSuffix(e, "due to lock delay") {
			held := l.heldError()
			held.Remaining = max(a.s.cfg.LockDelay, time.Second)
			a.s.busy.held(l.name, held.Remaining, store.Holder{})
			a.results[i].Err = a.s.refuse(ctx, a.op(i), a.ps[i], a.ttls[i], l, held)
			return true
		}
	}
	return false
}

func (a *acquisitions) stuck(i int) { a.results[i].Err = keptChanging(a.op(i)) }

// releases is a batch of releases (see [Store.release]).
type releases struct {
	s    *Store
	ps   []store.ReleaseParams
	errs []error
}

// ready refuses entry i unless its lease is held by its holder with its
// token.
func (r *releases) ready(_ context.Context, i int, l lease) bool {
	p := r.ps[i]
	if l.held() && l.val.holder() == p.Holder && l.token == p.Token {
		return true
	}
	r.errs[i] = fmt.Errorf("consulstore: release of lease %q by %s with token %d refused: %w",
		p.Name, p.Holder, p.Token, store.ErrNotHeld)
	return false
}

// ops marks the lease record released and unlocks it, provided it is as
// read; the release names the head of the line as read.
func (r *releases) ops(_ context.Context, _ int, l lease) (api.TxnOps, store.Notice, error) {
	v := l.val
	v.Released = true
	body, err := v.encode()
	if err != nil {
		return nil, store.Notice{}, err
	}
	k := r.s.keys(l.name)
	return api.TxnOps{
		{KV: &api.KVTxnOp{Verb: api.KVCheckIndex, Key: k.lease, Index: l.index}},
		{KV: &api.KVTxnOp{Verb: api.KVUnlock, Key: k.lease, Session: l.session, Value: body}},
	}, store.Notice{Name: l.name, Kind: store.NoticeReleased, Next: l.head()}, nil
}

// applied forgets the lease, and destroys its session when none of the
// leases this store put into it is there any more. A lease released to a
// follower waiting is the head's to take next; one nobody waits for is
// free.
func (r *releases) applied(i int, l lease, _ uint64) {
	if next := l.head(); next != (store.Holder{}) {
		r.s.busy.held(l.name, store.Handoff, next)
	} else {
		r.s.busy.free(l.name)
	}
	r.s.reap(r.s.memo.left(r.ps[i].Name))
}

func (r *releases) rolledBack(context.Context, int, lease, []string) bool { return false }

func (r *releases) stuck(i int) {
	r.errs[i] = keptChanging(fmt.Sprintf("release lease %q", r.ps[i].Name))
}
