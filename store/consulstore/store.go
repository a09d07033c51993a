package consulstore

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tenure-dev/tenure/internal/storekit"
	"github.com/tenure-dev/tenure/store"

	"github.com/hashicorp/consul/api"
)

var (
	_ store.Store         = (*Store)(nil)
	_ store.Notifier      = (*Store)(nil)
	_ store.Lister        = (*Store)(nil)
	_ store.TTLFloor      = (*Store)(nil)
	_ store.BatchAcquirer = (*Store)(nil)
	_ store.BatchReleaser = (*Store)(nil)
)

const (
	// maxTxnOps is the most operations Consul (1.14 and later) accepts in
	// one transaction.
	maxTxnOps = 128
	// renewOps is how many operations one lease's renewal takes.
	renewOps = 4
	// maxAttempts bounds, per lease, the read-then-write loop of
	// acquisitions and releases ([Store.write]) when a concurrent change
	// to the lease invalidates what it read.
	maxAttempts = 8
	// maxRaces bounds the same loop when only the announcement key
	// changed (another lease under the prefix changed hands meanwhile).
	maxRaces = 32
	// cleanupTimeout bounds each best-effort destruction of a session that
	// holds nothing, and how long Close waits for those still queued.
	cleanupTimeout = 2 * time.Second
)

// Store is a [store.Store] on Consul's KV store and sessions;
// docs/STORES.md lists the optional interfaces of package store it
// implements. Its methods are safe for concurrent use. Create it with
// [New].
type Store struct {
	client *api.Client
	cfg    Config

	gate  *storekit.Gate
	memo  *memo
	heads *heads // the places at the head of a line, watched by Listen
	busy  *busy  // leases last seen held, for [Store.speculate]

	// The sessions waiting to be destroyed, and the goroutine that
	// destroys them (see [Store.reap]).
	reapMu     sync.Mutex
	reapIDs    []string
	reaping    bool
	reapers    sync.WaitGroup
	reapCtx    context.Context
	reapCancel context.CancelFunc
}

// New returns a store that keeps its leases in the Consul cluster client
// talks to, under cfg.KeyPrefix. It validates cfg and contacts nothing.
// Close does not close client.
func New(client *api.Client, cfg Config) (*Store, error) {
	if client == nil {
		return nil, fmt.Errorf("consulstore: %w: client is nil", store.ErrInvalid)
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Store{client: client, cfg: cfg, gate: storekit.NewGate("consulstore", "consulstore.New"), memo: newMemo()}
	s.heads = newHeads(s)
	s.busy = newBusy()
	s.reapCtx, s.reapCancel = context.WithCancel(context.Background())
	return s, nil
}

// Config returns the configuration in force, defaults filled in.
func (s *Store) Config() Config { return s.cfg }

// MinTTL implements [store.TTLFloor]: [Config.MinSessionTTL], the servers'
// session_ttl_min. A shorter lease would be held with a session of that
// TTL and outlive a crashed holder by more than asked, so a client refuses
// a TTL below it when it is made.
func (s *Store) MinTTL() time.Duration { return s.cfg.MinSessionTTL }

// Acquire implements [store.Store.Acquire]. A lease that is free costs
// three requests (read, session create, transaction), the first two at
// once unless the store expects the lease held, so two round trips' time;
// a held one, one,
// and when p.Wait asks for a place in line one more to keep it or two more
// to take it (see [Store.wait]). The acquirer leaves the line in the
// transaction that grants it the lease.
// During Consul's lock-delay after an expiry (see [Config.LockDelay]) the
// lease is reported held by its last holder, with the configured delay as
// its remaining time. The transaction that grants the lease also announces
// it (see [Store.Listen]). It is [Store.AcquireBatch] of one entry.
func (s *Store) Acquire(ctx context.Context, p store.AcquireParams) (store.Grant, error) {
	op := fmt.Sprintf("acquire lease %q", p.Name)
	if err := s.begin(ctx, op); err != nil {
		return store.Grant{}, err
	}
	if err := p.Validate(); err != nil {
		return store.Grant{}, interpret(op, err)
	}
	ttl, err := s.cfg.sessionTTL(p.TTL)
	if err != nil {
		return store.Grant{}, interpret(op, err)
	}
	res, err := s.acquire(ctx, []store.AcquireParams{p}, []time.Duration{ttl})
	if err != nil {
		return store.Grant{}, interpret(op, err)
	}
	return res[0].Grant, res[0].Err
}

// Renew implements [store.Store.Renew]. A batch that is exactly the
// leases this store put into one session (a holder renewing what it holds)
// renews that session and then, in ⌈n/64⌉ transactions, compares and
// advances each lease: two round trips up to 64 leases. Otherwise each
// renewed lease moves to a session created for this call, so a lease left
// out of the batch keeps its old session and expires on time: a session
// creation and ⌈n/32⌉ transactions, plus ⌈n/128⌉ consistent reads for
// leases the store has no matching write of (acquired through another
// store, or advanced by [Store.StrictTxn]). See "Sessions and round trips"
// in the package documentation. An error matching [store.ErrUnavailable]
// may come after some leases were renewed.
//
// The sessions that moved leases left are destroyed in the background
// once none of the leases this store put into them is there any more.
func (s *Store) Renew(ctx context.Context, ps []store.RenewParams) ([]store.RenewResult, error) {
	const op = "renew"
	if err := s.begin(ctx, op); err != nil {
		return nil, err
	}
	if err := store.ValidateRenewBatch(ps); err != nil {
		return nil, interpret(op, err)
	}
	ttls, err := sessionTTLs(s.cfg, ps, func(p store.RenewParams) (string, time.Duration) { return p.Name, p.TTL })
	if err != nil {
		return nil, interpret(op, err)
	}
	if len(ps) == 0 {
		return []store.RenewResult{}, nil
	}
	leases := make([]lease, len(ps))
	hinted := make([]bool, len(ps))
	var unread []int
	for i, p := range ps {
		if w, ok := s.memo.hint(p); ok {
			leases[i], hinted[i] = w.lease(p.Name), true
		} else {
			unread = append(unread, i)
		}
	}
	if err := s.readInto(ctx, ps, leases, unread); err != nil {
		return nil, interpret(op, err)
	}
	r := &renewal{s: s, ps: ps, ttls: ttls, leases: leases, hinted: hinted, results: make([]store.RenewResult, len(ps)), sessions: newBatchSessions(s)}
	defer r.sessions.done()
	all := make([]int, len(ps))
	for i := range ps {
		all[i] = i
	}
	lost, err := r.renew(ctx, all)
	if err != nil {
		return nil, interpret(op, err)
	}
	if len(lost) > 0 {
		// Read what failed. A lease renewed on a remembered write that
		// turns out stale gets one more try on what was read.
		if err := s.readInto(ctx, ps, leases, lost); err != nil {
			return nil, interpret(op, err)
		}
		var again []int
		for _, i := range lost {
			if hinted[i] {
				again = append(again, i)
				hinted[i] = false
			}
		}
		failed, err := r.renew(ctx, again)
		if err != nil {
			return nil, interpret(op, err)
		}
		if err := s.readInto(ctx, ps, leases, failed); err != nil {
			return nil, interpret(op, err)
		}
	}
	for i, res := range r.results {
		if !res.Renewed {
			r.results[i] = store.RenewResult{Grant: leases[i].grant()}
			s.reap(s.memo.lost(ps[i].Name, leases[i].session))
		}
	}
	return r.results, nil
}

// readInto reads the leases ps[i] for i in idx into leases[i].
func (s *Store) readInto(ctx context.Context, ps []store.RenewParams, leases []lease, idx []int) error {
	if len(idx) == 0 {
		return nil
	}
	names := make([]string, len(idx))
	for j, i := range idx {
		names[j] = ps[i].Name
	}
	read, _, err := s.read(ctx, names, false)
	if err != nil {
		return err
	}
	for j, i := range idx {
		leases[i] = read[j]
	}
	return nil
}

// renewal is one [Store.Renew] call: its params, what it knows of each
// lease, its results, and the sessions it created, one per TTL.
type renewal struct {
	s        *Store
	ps       []store.RenewParams
	ttls     []time.Duration
	leases   []lease
	hinted   []bool // the lease is known from the store's own last write
	results  []store.RenewResult
	sessions *batchSessions
}

// batchSessions are the sessions one call creates for a batch of leases
// (a renewal moving them, or acquisitions), one per session TTL, each
// when first needed or, for acquisitions, started before the read (see
// [batchSessions.start]).
type batchSessions struct {
	s  *Store
	by map[time.Duration]*batchSession
}

// batchSession is a session a call created and how many leases it put
// into it.
type batchSession struct {
	made chan struct{} // closed once id or err is set
	id   string
	err  error
	put  int
}

func newBatchSessions(s *Store) *batchSessions {
	return &batchSessions{s: s, by: make(map[time.Duration]*batchSession)}
}

// start begins creating the session of ttl for holder on a goroutine of
// its own, unless the call has one, so that its round trip overlaps the
// call's read; [batchSessions.get] waits for it. The request ends with
// ctx.
func (bs *batchSessions) start(ctx context.Context, holder store.Holder, ttl time.Duration) {
	if bs.by[ttl] != nil {
		return
	}
	b := &batchSession{made: make(chan struct{})}
	bs.by[ttl] = b
	go func() {
		defer close(b.made)
		b.id, b.err = bs.s.createSession(ctx, holder, ttl)
	}()
}

// get returns the session of ttl, once created; it creates it for holder
// if the call has none yet.
func (bs *batchSessions) get(ctx context.Context, holder store.Holder, ttl time.Duration) (*batchSession, error) {
	b := bs.by[ttl]
	if b == nil {
		id, err := bs.s.createSession(ctx, holder, ttl)
		if err != nil {
			return nil, err
		}
		b = &batchSession{made: createdNow, id: id}
		bs.by[ttl] = b
	}
	<-b.made
	if b.err != nil {
		return nil, b.err
	}
	return b, nil
}

// createdNow is the made channel of a session created on the caller's
// path.
var createdNow = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// done waits for the creations the call started and destroys, in the
// background, the sessions nothing was put into.
func (bs *batchSessions) done() {
	bs.reap(func(b *batchSession) bool { return b.put == 0 })
}

// abandon waits for the creations the call started and destroys, in the
// background, every session of the call, with whatever it holds.
func (bs *batchSessions) abandon() {
	bs.reap(func(*batchSession) bool { return true })
}

func (bs *batchSessions) reap(which func(*batchSession) bool) {
	for _, b := range bs.by {
		<-b.made
		if b.err == nil && which(b) {
			bs.s.reap(b.id)
		}
	}
}

// renew renews the leases idx whose lease, as known, matches their params,
// grouped by TTL. It returns the matching leases whose compare-and-set
// failed.
func (r *renewal) renew(ctx context.Context, idx []int) ([]int, error) {
	groups := make(map[time.Duration][]int)
	for _, i := range idx {
		p, l := r.ps[i], r.leases[i]
		if l.held() && l.val.holder() == p.Holder && l.token == p.Token && l.val.Seq == p.Seq {
			groups[r.ttls[i]] = append(groups[r.ttls[i]], i)
		}
	}
	var lost []int
	for _, ttl := range slices.Sorted(maps.Keys(groups)) {
		idx := groups[ttl]
		if id, ok := r.inPlace(idx, ttl); ok {
			entry, _, err := r.s.client.Session().Renew(id, (&api.WriteOptions{}).WithContext(ctx))
			if err != nil {
				return nil, fmt.Errorf("renew session: %w", err)
			}
			if entry == nil {
				// The session is gone, and its leases with it: the
				// caller reads and reports them.
				lost = append(lost, idx...)
				continue
			}
			failed, err := r.group(ctx, idx, ttl, id, false)
			if err != nil {
				return nil, err
			}
			lost = append(lost, failed...)
			continue
		}
		bs, err := r.sessions.get(ctx, r.ps[idx[0]].Holder, ttl)
		if err != nil {
			return nil, err
		}
		failed, err := r.group(ctx, idx, ttl, bs.id, true)
		if err != nil {
			bs.put += len(idx) // some may be in it: it is not destroyed
			return nil, err
		}
		bs.put += len(idx) - len(failed)
		lost = append(lost, failed...)
	}
	return lost, nil
}

// inPlace returns the session the leases idx may be renewed in: the one
// every one of them is in, as the store last wrote them, when no other
// lease the store put into it is there (see [memo.reusable]).
func (r *renewal) inPlace(idx []int, ttl time.Duration) (string, bool) {
	names := make([]string, len(idx))
	for j, i := range idx {
		if !r.hinted[i] {
			return "", false
		}
		names[j] = r.ps[i].Name
	}
	return r.s.memo.reusable(names, ttl)
}

// group renews the leases idx (of one session TTL) into session target,
// advancing their seq, and fills in their results. With move it moves
// them there from their sessions (an unlock and a lock); without, they are
// in target already, renewed just before, and a compare-and-set of the
// record keeps its lock. Either way the record's ModifyIndex and the
// counter's (the token) are checked. It returns the leases whose
// compare-and-set failed. After an error, target may hold leases the
// store does not know of, so it is never renewed in place.
func (r *renewal) group(ctx context.Context, idx []int, ttl time.Duration, target string, move bool) ([]int, error) {
	per := 2
	if move {
		per = renewOps
	}
	var failed []int
	for chunk := range slices.Chunk(idx, maxTxnOps/per) {
		pending := slices.Clone(chunk)
		for len(pending) > 0 {
			ops := make(api.TxnOps, 0, per*len(pending))
			vals := make([]value, len(pending))
			for j, i := range pending {
				l := r.leases[i]
				k := r.s.keys(l.name)
				v := l.val
				v.Seq++
				v.TTLMillis = ttl.Milliseconds()
				body, err := v.encode()
				if err != nil {
					return nil, err
				}
				vals[j] = v
				counter := &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVCheckIndex, Key: k.counter, Index: uint64(l.token)}}
				if move {
					ops = append(ops,
						&api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVCheckIndex, Key: k.lease, Index: l.index}},
						counter,
						&api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVUnlock, Key: k.lease, Session: l.session, Value: body}},
						&api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVLock, Key: k.lease, Session: target, Value: body}},
					)
				} else {
					ops = append(ops,
						// A compare-and-set keeps the record's lock.
						&api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVCAS, Key: k.lease, Index: l.index, Value: body}},
						counter,
					)
				}
			}
			ok, resp, err := r.s.txn(ctx, ops, false)
			if err != nil {
				if move {
					r.s.memo.taint(target)
				}
				return nil, err
			}
			if ok {
				index := txnIndex(resp)
				ends := time.Now().Add(2 * ttl)
				for j, i := range pending {
					l := r.leases[i]
					r.results[i] = store.RenewResult{Renewed: true, Grant: store.Grant{
						Name: l.name, Holder: l.val.holder(), Token: l.token, Seq: vals[j].Seq, Remaining: ttl,
					}}
					r.s.reap(r.s.memo.wrote(l.name, written{token: l.token, val: vals[j], index: index, session: target, ends: ends}, !move))
				}
				break
			}
			// The transaction was rolled back: drop the leases whose
			// operations failed and try the rest again.
			drop := make(map[int]bool)
			for _, e := range resp.Errors {
				if e.OpIndex >= 0 && e.OpIndex < len(ops) {
					drop[e.OpIndex/per] = true
				}
			}
			if len(drop) == 0 {
				// Nothing to blame: give up on the whole chunk.
				failed = append(failed, pending...)
				break
			}
			var keep []int
			for j, i := range pending {
				if drop[j] {
					failed = append(failed, i)
				} else {
					keep = append(keep, i)
				}
			}
			pending = keep
		}
	}
	return failed, nil
}

// txnIndex returns the Raft index of an applied write transaction: the
// ModifyIndex of every key it wrote, the greatest one among its results.
func txnIndex(resp *api.TxnResponse) uint64 {
	var index uint64
	for _, e := range kvPairs(resp) {
		index = max(index, e.ModifyIndex)
	}
	return index
}

// Release implements [store.Store.Release]: it marks the lease record
// released, unlocks it and announces the release, naming the head of the
// line as the read found it, in one transaction (two round trips with the
// read). The lease is free at once: this store keeps no released lease
// for the head (see The line in the package documentation). The counter is kept, and a clean release
// sets off no lock-delay. When the session that held the lease holds none
// of the other leases this store put into it, it is destroyed in the
// background; otherwise it is left to expire with them. It is
// [Store.ReleaseBatch] of one entry.
func (s *Store) Release(ctx context.Context, p store.ReleaseParams) error {
	op := fmt.Sprintf("release lease %q", p.Name)
	if err := s.begin(ctx, op); err != nil {
		return err
	}
	if err := p.Validate(); err != nil {
		return interpret(op, err)
	}
	errs, err := s.release(ctx, []store.ReleaseParams{p})
	if err != nil {
		return interpret(op, err)
	}
	return errs[0]
}

// Get implements [store.Store.Get], with one consistent read. The
// remaining time of a held lease is its session's TTL: Consul does not say
// when the session was last renewed, so it is an estimate (see the package
// documentation).
func (s *Store) Get(ctx context.Context, name string) (store.Record, error) {
	op := fmt.Sprintf("get lease %q", name)
	if err := s.begin(ctx, op); err != nil {
		return store.Record{}, err
	}
	if err := store.ValidateName(name); err != nil {
		return store.Record{}, interpret(op, err)
	}
	l, err := s.readOne(ctx, name)
	if err != nil {
		return store.Record{}, interpret(op, err)
	}
	if !l.exists {
		return store.Record{}, fmt.Errorf("consulstore: lease %q: %w", name, store.ErrNotFound)
	}
	return l.record(), nil
}

// List implements [store.Lister.List] with one consistent read of the
// whole key prefix.
func (s *Store) List(ctx context.Context) ([]store.Record, error) {
	const op = "list leases"
	if err := s.begin(ctx, op); err != nil {
		return nil, err
	}
	_, resp, err := s.txn(ctx, api.TxnOps{{KV: &api.KVTxnOp{Verb: api.KVGetTree, Key: s.cfg.KeyPrefix}}}, true)
	if err != nil {
		return nil, interpret(op, err)
	}
	leases, err := s.parseTree(kvPairs(resp))
	if err != nil {
		return nil, interpret(op, err)
	}
	records := make([]store.Record, 0, len(leases))
	for _, l := range leases {
		if l.exists {
			records = append(records, l.record())
		}
	}
	slices.SortFunc(records, func(a, b store.Record) int { return strings.Compare(a.Name, b.Name) })
	return records, nil
}

// Close implements [store.Store.Close]: later calls fail with
// [store.ErrClosed] and every [Store.Listen] returns. It destroys no
// session that holds a lease, so leases stay held until they expire or are
// released; it waits up to two seconds for the destruction of sessions
// already found empty, and leaves the rest to expire. Closing twice is
// harmless.
func (s *Store) Close() error {
	// Shut the gate under reapMu: a reap before it has queued, one after
	// it queues nothing, so no goroutine starts once Wait has begun.
	s.reapMu.Lock()
	s.gate.Close()
	s.reapMu.Unlock()
	stop := time.AfterFunc(cleanupTimeout, s.reapCancel)
	s.reapers.Wait()
	stop.Stop()
	s.reapCancel()
	return nil
}

// begin refuses a call on a closed store or with a context already done,
// before anything is attempted.
func (s *Store) begin(ctx context.Context, op string) error { return s.gate.Begin(ctx, op) }

// announceKey is the key of the announcements (see [Store.Listen]).
func (s *Store) announceKey() string { return s.cfg.KeyPrefix + announceKeyName }

// readOne reads one lease with a consistent read.
func (s *Store) readOne(ctx context.Context, name string) (lease, error) {
	ls, _, err := s.read(ctx, []string{name}, false)
	if err != nil {
		return lease{}, err
	}
	return ls[0], nil
}

// read reads the leases names, in order, each with its line, in
// consistent read-only transactions of up to [maxTxnOps] get-tree
// operations each. With announcements, for a write that changes hands, the
// first transaction also reads the announcement key.
func (s *Store) read(ctx context.Context, names []string, announcements bool) ([]lease, board, error) {
	ops := make(api.TxnOps, 0, len(names)+1)
	if announcements {
		ops = append(ops, &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVGetOrEmpty, Key: s.announceKey()}})
	}
	dirs := make(map[string]int, len(names)) // a lease's directory → its index in names
	for i, name := range names {
		dir := s.keys(name).dir
		dirs[dir] = i
		ops = append(ops, &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVGetTree, Key: dir}})
	}
	var b board
	entries := make([][]*api.KVPair, len(names))
	for chunk := range slices.Chunk(ops, maxTxnOps) {
		_, resp, err := s.txn(ctx, chunk, true)
		if err != nil {
			return nil, board{}, err
		}
		for _, e := range kvPairs(resp) {
			if e.Key == s.announceKey() {
				if b, err = parseBoard(e); err != nil {
					return nil, board{}, err
				}
				continue
			}
			seg, _, _ := strings.Cut(strings.TrimPrefix(e.Key, s.cfg.KeyPrefix), "/")
			if i, ok := dirs[s.cfg.KeyPrefix+seg+"/"]; ok {
				entries[i] = append(entries[i], e)
			}
		}
	}
	leases := make([]lease, len(names))
	for i, name := range names {
		l, err := parseLease(name, s.keys(name), entries[i])
		if err != nil {
			return nil, board{}, err
		}
		leases[i] = l
	}
	return leases, b, nil
}

// parseTree builds the leases found among entries read under the key
// prefix, ignoring keys that are not a lease's.
func (s *Store) parseTree(entries []*api.KVPair) (map[string]lease, error) {
	byName := make(map[string][]*api.KVPair)
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Key, s.cfg.KeyPrefix)
		if !ok {
			continue
		}
		seg, _, ok := strings.Cut(rest, "/")
		if !ok {
			continue
		}
		if name, ok := unescapeName(seg); ok {
			byName[name] = append(byName[name], e)
		}
	}
	leases := make(map[string]lease, len(byName))
	for name, es := range byName {
		l, err := parseLease(name, s.keys(name), es)
		if err != nil {
			return nil, err
		}
		leases[name] = l
	}
	return leases, nil
}

// kvPairs returns the KV entries of a transaction's results.
func kvPairs(resp *api.TxnResponse) []*api.KVPair {
	if resp == nil {
		return nil
	}
	out := make([]*api.KVPair, 0, len(resp.Results))
	for _, r := range resp.Results {
		if r != nil && r.KV != nil {
			out = append(out, r.KV)
		}
	}
	return out
}

// txn runs one transaction. A read-only one (read set) is a consistent read
// and must succeed; a write reports in ok whether it was applied, and in
// resp why not.
func (s *Store) txn(ctx context.Context, ops api.TxnOps, read bool) (bool, *api.TxnResponse, error) {
	q := &api.QueryOptions{RequireConsistent: read}
	ok, resp, _, err := s.client.Txn().Txn(ops, q.WithContext(ctx))
	if err != nil {
		return false, nil, err
	}
	if read && !ok {
		return false, nil, fmt.Errorf("a read-only transaction failed: %s", txnErrors(resp))
	}
	return ok, resp, nil
}

func txnErrors(resp *api.TxnResponse) string {
	if resp == nil || len(resp.Errors) == 0 {
		return "no reason given"
	}
	parts := make([]string, len(resp.Errors))
	for i, e := range resp.Errors {
		parts[i] = fmt.Sprintf("operation %d: %s", e.OpIndex, e.What)
	}
	return strings.Join(parts, "; ")
}

// sessionRequest is the body of PUT /v1/session/create. The API client's
// own Create leaves out a zero lock-delay and empty check lists, and the
// agent then applies its defaults (15 s, the node's serfHealth check); this
// body states both.
type sessionRequest struct {
	Name       string
	TTL        string
	LockDelay  string
	Behavior   string
	Checks     []string
	NodeChecks []string
}

// createSession creates a session with ttl for holder: bound to the agent's
// node but to no health check, so only its TTL (or an operator) ends it,
// with the configured lock-delay, releasing its locks when it ends.
func (s *Store) createSession(ctx context.Context, holder store.Holder, ttl time.Duration) (string, error) {
	req := sessionRequest{
		Name:       "tenure " + holder.String(),
		TTL:        ttl.String(),
		LockDelay:  s.cfg.LockDelay.String(),
		Behavior:   api.SessionBehaviorRelease,
		Checks:     []string{},
		NodeChecks: []string{},
	}
	return s.newSession(ctx, req)
}

// newSession creates the session req describes and returns its id.
func (s *Store) newSession(ctx context.Context, req sessionRequest) (string, error) {
	var out struct{ ID string }
	if _, err := s.client.Raw().Write("/v1/session/create", req, &out, (&api.WriteOptions{}).WithContext(ctx)); err != nil {
		return "", fmt.Errorf("create session: %w", err)
	}
	if out.ID == "" {
		return "", fmt.Errorf("create session: the agent answered without a session id")
	}
	return out.ID, nil
}
