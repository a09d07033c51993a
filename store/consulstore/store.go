package consulstore

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tenure-dev/tenure/internal/storekit"
	"github.com/tenure-dev/tenure/store"

	"github.com/hashicorp/consul/api"
)

var (
	_ store.Store    = (*Store)(nil)
	_ store.Notifier = (*Store)(nil)
	_ store.Lister   = (*Store)(nil)
	_ store.TTLFloor = (*Store)(nil)
)

const (
	// maxTxnOps is the most operations Consul (1.14 and later) accepts in
	// one transaction.
	maxTxnOps = 128
	// renewOps is how many operations one lease's renewal takes.
	renewOps = 3
	// maxAttempts bounds the read-then-write loops of Acquire and Release
	// when a concurrent change invalidates what they read.
	maxAttempts = 8
	// cleanupTimeout bounds the best-effort destruction of a session that
	// ended up holding nothing.
	cleanupTimeout = 2 * time.Second
)

// Store is a [store.Store] on Consul's KV store and sessions. It also
// implements [store.Notifier] and [store.Lister]. Its methods are safe for
// concurrent use. Create it with [New].
type Store struct {
	client *api.Client
	cfg    Config

	gate *storekit.Gate
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
	return &Store{client: client, cfg: cfg, gate: storekit.NewGate("consulstore", "consulstore.New")}, nil
}

// Config returns the configuration in force, defaults filled in.
func (s *Store) Config() Config { return s.cfg }

// MinTTL implements [store.TTLFloor]: [Config.MinSessionTTL], the servers'
// session_ttl_min. A shorter lease would be held with a session of that
// TTL and outlive a crashed holder by more than asked, so a client refuses
// a TTL below it when it is made.
func (s *Store) MinTTL() time.Duration { return s.cfg.MinSessionTTL }

// Acquire implements [store.Store.Acquire]. A lease that is free costs
// three round trips (read, session create, transaction); a held one, one.
// During Consul's lock-delay after an expiry (see [Config.LockDelay]) the
// lease is reported held by its last holder, with the configured delay as
// its remaining time.
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
	k := s.keys(p.Name)
	for range maxAttempts {
		l, err := s.readOne(ctx, p.Name)
		if err != nil {
			return store.Grant{}, interpret(op, err)
		}
		if l.held() {
			return store.Grant{}, l.heldError()
		}
		g, outcome, err := s.tryAcquire(ctx, p, ttl, k, l)
		switch {
		case err != nil:
			return store.Grant{}, interpret(op, err)
		case outcome == outcomeAcquired:
			return g, nil
		case outcome == outcomeLockDelayed:
			held := l.heldError()
			held.Remaining = max(s.cfg.LockDelay, time.Second)
			return store.Grant{}, held
		}
		// The lease changed between the read and the transaction: read
		// it again.
	}
	return store.Grant{}, fmt.Errorf("consulstore: %s: %w: the lease kept changing under %d attempts; retry", op, store.ErrUnavailable, maxAttempts)
}

type acquireOutcome int

const (
	outcomeAcquired acquireOutcome = iota + 1
	outcomeChanged
	outcomeLockDelayed
)

// tryAcquire creates a session and, in one transaction, bumps the counter
// and locks the lease record, provided neither changed since l was read.
func (s *Store) tryAcquire(ctx context.Context, p store.AcquireParams, ttl time.Duration, k keys, l lease) (store.Grant, acquireOutcome, error) {
	session, err := s.createSession(ctx, p.Holder, ttl)
	if err != nil {
		return store.Grant{}, 0, err
	}
	v := value{
		Label:      p.Holder.Label,
		Instance:   p.Holder.Instance,
		Seq:        1,
		TTLMillis:  ttl.Milliseconds(),
		AcquiredAt: time.Now().UTC(),
		Payload:    p.Payload,
	}
	body, err := v.encode()
	if err != nil {
		return store.Grant{}, 0, err
	}
	guard := &api.KVTxnOp{Verb: api.KVCheckNotExists, Key: k.lease}
	if l.exists {
		guard = &api.KVTxnOp{Verb: api.KVCheckIndex, Key: k.lease, Index: l.index}
	}
	ops := api.TxnOps{
		{KV: guard},
		// A ModifyIndex of 0 creates the counter only if it is absent.
		{KV: &api.KVTxnOp{Verb: api.KVCAS, Key: k.counter, Index: uint64(l.token), Value: []byte(strconv.FormatUint(l.tenures+1, 10))}},
		{KV: &api.KVTxnOp{Verb: api.KVLock, Key: k.lease, Session: session, Value: body}},
	}
	ok, resp, err := s.txn(ctx, ops, false)
	if err != nil {
		s.destroySession(ctx, session)
		return store.Grant{}, 0, err
	}
	if !ok {
		s.destroySession(ctx, session)
		for _, e := range resp.Errors {
			if strings.HasSuffix(e.What, "due to lock delay") {
				return store.Grant{}, outcomeLockDelayed, nil
			}
		}
		return store.Grant{}, outcomeChanged, nil
	}
	var token store.Token
	for _, r := range resp.Results {
		if r.KV != nil && r.KV.Key == k.counter {
			token = store.Token(r.KV.ModifyIndex)
		}
	}
	if token <= 0 {
		return store.Grant{}, 0, fmt.Errorf("the transaction that acquired the lease did not report the counter's index; read the lease with Get")
	}
	return store.Grant{Name: p.Name, Holder: p.Holder, Token: token, Seq: 1, Remaining: ttl, Payload: p.Payload}, outcomeAcquired, nil
}

// Renew implements [store.Store.Renew]. Each renewed lease moves to a
// session created for this call, so a lease left out of the batch keeps its
// old session and expires on time. A batch of n leases with one TTL costs
// ⌈n/128⌉ reads, one session creation and ⌈n/42⌉ transactions: three
// round trips up to 42 leases. An error matching [store.ErrUnavailable]
// may come after some leases were renewed.
func (s *Store) Renew(ctx context.Context, ps []store.RenewParams) ([]store.RenewResult, error) {
	const op = "renew"
	if err := s.begin(ctx, op); err != nil {
		return nil, err
	}
	if err := store.ValidateRenewBatch(ps); err != nil {
		return nil, interpret(op, err)
	}
	ttls := make([]time.Duration, len(ps))
	for i, p := range ps {
		ttl, err := s.cfg.sessionTTL(p.TTL)
		if err != nil {
			return nil, interpret(fmt.Sprintf("renew lease %q", p.Name), err)
		}
		ttls[i] = ttl
	}
	if len(ps) == 0 {
		return []store.RenewResult{}, nil
	}
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = p.Name
	}
	leases, err := s.read(ctx, names)
	if err != nil {
		return nil, interpret(op, err)
	}
	results := make([]store.RenewResult, len(ps))
	// groups holds, per session TTL, the indexes of the leases to renew.
	groups := make(map[time.Duration][]int)
	for i, p := range ps {
		l := leases[i]
		results[i] = store.RenewResult{Grant: l.grant()}
		if l.held() && l.val.holder() == p.Holder && l.token == p.Token && l.val.Seq == p.Seq {
			groups[ttls[i]] = append(groups[ttls[i]], i)
		}
	}
	var lost []int // matched when read, changed before the transaction
	for _, ttl := range slices.Sorted(maps.Keys(groups)) {
		failed, err := s.renewGroup(ctx, ps, leases, groups[ttl], ttl, results)
		if err != nil {
			return nil, interpret(op, err)
		}
		lost = append(lost, failed...)
	}
	if len(lost) > 0 {
		again := make([]string, len(lost))
		for j, i := range lost {
			again[j] = ps[i].Name
		}
		now, err := s.read(ctx, again)
		if err != nil {
			return nil, interpret(op, err)
		}
		for j, i := range lost {
			results[i] = store.RenewResult{Grant: now[j].grant()}
		}
	}
	return results, nil
}

// renewGroup moves the leases idx (of one session TTL) to a new session,
// advancing their seq, and fills in their results. It returns the leases
// whose compare-and-set failed.
func (s *Store) renewGroup(ctx context.Context, ps []store.RenewParams, leases []lease, idx []int, ttl time.Duration, results []store.RenewResult) ([]int, error) {
	session, err := s.createSession(ctx, ps[idx[0]].Holder, ttl)
	if err != nil {
		return nil, err
	}
	var failed []int
	moved := 0
	for chunk := range slices.Chunk(idx, maxTxnOps/renewOps) {
		pending := slices.Clone(chunk)
		for len(pending) > 0 {
			ops := make(api.TxnOps, 0, renewOps*len(pending))
			for _, i := range pending {
				l := leases[i]
				k := s.keys(l.name)
				v := l.val
				v.Seq++
				v.TTLMillis = ttl.Milliseconds()
				body, err := v.encode()
				if err != nil {
					return nil, err
				}
				ops = append(ops,
					&api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVCheckIndex, Key: k.lease, Index: l.index}},
					&api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVUnlock, Key: k.lease, Session: l.session, Value: body}},
					&api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVLock, Key: k.lease, Session: session, Value: body}},
				)
			}
			ok, resp, err := s.txn(ctx, ops, false)
			if err != nil {
				return nil, err
			}
			if ok {
				for _, i := range pending {
					l := leases[i]
					results[i] = store.RenewResult{Renewed: true, Grant: store.Grant{
						Name: l.name, Holder: l.val.holder(), Token: l.token, Seq: l.val.Seq + 1, Remaining: ttl,
					}}
				}
				moved += len(pending)
				break
			}
			// The transaction was rolled back: drop the leases whose
			// operations failed and try the rest again.
			drop := make(map[int]bool)
			for _, e := range resp.Errors {
				if e.OpIndex >= 0 && e.OpIndex < len(ops) {
					drop[e.OpIndex/renewOps] = true
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
	if moved == 0 {
		s.destroySession(ctx, session)
	}
	return failed, nil
}

// Release implements [store.Store.Release]: it marks the lease record
// released and unlocks it in one transaction (two round trips with the
// read). The counter is kept, and a clean release sets off no lock-delay.
// The session that held the lease is left to expire, as it may hold other
// leases of the same holder.
func (s *Store) Release(ctx context.Context, p store.ReleaseParams) error {
	op := fmt.Sprintf("release lease %q", p.Name)
	if err := s.begin(ctx, op); err != nil {
		return err
	}
	if err := p.Validate(); err != nil {
		return interpret(op, err)
	}
	k := s.keys(p.Name)
	for range maxAttempts {
		l, err := s.readOne(ctx, p.Name)
		if err != nil {
			return interpret(op, err)
		}
		if !l.held() || l.val.holder() != p.Holder || l.token != p.Token {
			return fmt.Errorf("consulstore: release of lease %q by %s with token %d refused: %w",
				p.Name, p.Holder, p.Token, store.ErrNotHeld)
		}
		v := l.val
		v.Released = true
		body, err := v.encode()
		if err != nil {
			return interpret(op, err)
		}
		ok, _, err := s.txn(ctx, api.TxnOps{
			{KV: &api.KVTxnOp{Verb: api.KVCheckIndex, Key: k.lease, Index: l.index}},
			{KV: &api.KVTxnOp{Verb: api.KVUnlock, Key: k.lease, Session: l.session, Value: body}},
		}, false)
		if err != nil {
			return interpret(op, err)
		}
		if ok {
			return nil
		}
		// Renewed or lost since the read: look again.
	}
	return fmt.Errorf("consulstore: %s: %w: the lease kept changing under %d attempts; retry", op, store.ErrUnavailable, maxAttempts)
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
// session, so leases stay held until they expire or are released. Closing
// twice is harmless.
func (s *Store) Close() error {
	s.gate.Close()
	return nil
}

// begin refuses a call on a closed store or with a context already done,
// before anything is attempted.
func (s *Store) begin(ctx context.Context, op string) error { return s.gate.Begin(ctx, op) }

// readOne reads one lease with a consistent read.
func (s *Store) readOne(ctx context.Context, name string) (lease, error) {
	ls, err := s.read(ctx, []string{name})
	if err != nil {
		return lease{}, err
	}
	return ls[0], nil
}

// read reads the leases names, in order, with consistent read-only
// transactions of up to [maxTxnOps] get-tree operations each.
func (s *Store) read(ctx context.Context, names []string) ([]lease, error) {
	out := make([]lease, 0, len(names))
	for chunk := range slices.Chunk(names, maxTxnOps) {
		ops := make(api.TxnOps, len(chunk))
		for i, name := range chunk {
			ops[i] = &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVGetTree, Key: s.keys(name).dir}}
		}
		_, resp, err := s.txn(ctx, ops, true)
		if err != nil {
			return nil, err
		}
		byKey := make(map[string]*api.KVPair)
		for _, e := range kvPairs(resp) {
			byKey[e.Key] = e
		}
		for _, name := range chunk {
			k := s.keys(name)
			var mine []*api.KVPair
			for _, key := range []string{k.lease, k.counter} {
				if e := byKey[key]; e != nil {
					mine = append(mine, e)
				}
			}
			l, err := parseLease(name, k, mine)
			if err != nil {
				return nil, err
			}
			out = append(out, l)
		}
	}
	return out, nil
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
	var out struct{ ID string }
	if _, err := s.client.Raw().Write("/v1/session/create", req, &out, (&api.WriteOptions{}).WithContext(ctx)); err != nil {
		return "", fmt.Errorf("create session: %w", err)
	}
	if out.ID == "" {
		return "", fmt.Errorf("create session: the agent answered without a session id")
	}
	return out.ID, nil
}

// destroySession destroys a session that holds nothing, best effort: it
// would expire by itself within twice its TTL.
func (s *Store) destroySession(ctx context.Context, id string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	_, _ = s.client.Session().Destroy(id, (&api.WriteOptions{}).WithContext(ctx))
}
