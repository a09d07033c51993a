package redisstore

import (
	"context"
	_ "embed"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/tenure-dev/tenure/internal/storekit"
	"github.com/tenure-dev/tenure/store"

	"github.com/redis/go-redis/v9"
)

var (
	_ store.Store         = (*Store)(nil)
	_ store.Notifier      = (*Store)(nil)
	_ store.Lister        = (*Store)(nil)
	_ store.BatchReleaser = (*Store)(nil)

	_ Client = (*redis.Client)(nil)
	_ Client = redis.UniversalClient(nil)
)

var (
	//go:embed scripts/acquire.lua
	acquireSrc string
	//go:embed scripts/renew.lua
	renewSrc string
	//go:embed scripts/release.lua
	releaseSrc string
	//go:embed scripts/read.lua
	readSrc string
	//go:embed scripts/repair.lua
	repairSrc string

	acquireScript = redis.NewScript(acquireSrc)
	renewScript   = redis.NewScript(renewSrc)
	releaseScript = redis.NewScript(releaseSrc)
	readScript    = redis.NewScript(readSrc)
	repairScript  = redis.NewScript(repairSrc)
)

// CounterRepairMargin is how far above the greatest token it has seen a
// [Store] raises the token counter after it caught the counter going
// backwards (see [ErrTokenWentBackwards]), so that later tenures also
// exceed tokens handed out before the loss that this store never saw, as
// long as fewer than this many were lost.
const CounterRepairMargin = 1 << 20

const (
	// readChunk is how many leases one read script call of [Store.List]
	// reports on.
	readChunk = 1000
	// scanCount is the COUNT hint of each SCAN call of [Store.List].
	scanCount = 1000
	// repairTimeout bounds the repair after a token went backwards.
	repairTimeout = 5 * time.Second
)

// Client is what the store needs of a go-redis client. A *redis.Client
// satisfies it, connected to one server or, through
// redis.NewFailoverClient, to the primary Sentinel names. Redis Cluster
// and Ring clients are refused: a store needs one token counter on one
// primary.
type Client interface {
	redis.Scripter
	Subscribe(ctx context.Context, channels ...string) *redis.PubSub
	Scan(ctx context.Context, cursor uint64, match string, count int64) *redis.ScanCmd
}

// Store is the Redis [store.Store]; docs/STORES.md lists the optional
// interfaces of package store it implements. It is safe for concurrent
// use. Create it with [New].
type Store struct {
	client Client
	keys   Keys

	// highest is the greatest token seen in any reply of the server: the
	// one piece of memory the store keeps, to catch a counter that went
	// backwards. It only grows.
	highest atomic.Int64

	gate *storekit.Gate
	// acquires sends the Acquire calls made at once together (see Acquire).
	acquires *storekit.AcquireGroup
}

// New returns a Store using client, with the keys cfg names. It does not
// touch the server. The store does not own client: [Store.Close] leaves it
// open.
//
// Create the client with ContextTimeoutEnabled set, so that a call ends at
// its context's deadline; without it go-redis waits up to its ReadTimeout
// (3 s by default) whatever the context says.
func New(client Client, cfg Config) (*Store, error) {
	switch c := client.(type) {
	case nil:
		return nil, fmt.Errorf("redisstore: %w: client is nil; create one with redis.NewClient", store.ErrInvalid)
	case *redis.Client:
		if c == nil {
			return nil, fmt.Errorf("redisstore: %w: client is nil; create one with redis.NewClient", store.ErrInvalid)
		}
	case *redis.ClusterClient, *redis.Ring:
		return nil, fmt.Errorf("redisstore: %w: %T spreads keys over several primaries, but a store needs one token counter on one primary; connect a redis.Client to one server or use redis.NewFailoverClient",
			store.ErrInvalid, client)
	}
	keys, err := cfg.Keys()
	if err != nil {
		return nil, err
	}
	s := &Store{client: client, keys: keys, gate: storekit.NewGate("redisstore", "redisstore.New")}
	s.acquires = storekit.NewAcquireGroup("redisstore", s.acquireTogether)
	return s, nil
}

// Keys returns the names of the store's keys and channel.
func (s *Store) Keys() Keys { return s.keys }

// Acquire implements [store.Store.Acquire] with one script call (one round
// trip). A takeover of an expired lease is announced on the store's
// channel. An error matching [store.ErrUnavailable] means it may have been
// applied.
//
// When the server grants a token that is not greater than one this store
// has already seen, Acquire refuses the grant: it gives the tenure back,
// raises the counter above every token the store saw (a second round trip)
// and fails with an error matching [ErrTokenWentBackwards].
//
// Calls made at once, by any callers of the store, share script calls
// (group commit): while fewer than two acquisitions are out, a call goes
// at once, alone; calls made while two are out wait for one to come back
// and then go together, up to 1,000 to a script call (as
// [Store.AcquireBatch] sends them), each lease at most once a call. A
// call whose context ends while it waits for its turn is not attempted;
// one whose context ends while its script call is out returns at once
// and may have been applied; the script call goes on for the others until
// the last of them has left. A script call that fails as a whole fails
// each of its calls with the error its own call would have had.
func (s *Store) Acquire(ctx context.Context, p store.AcquireParams) (store.Grant, error) {
	if err := s.begin(ctx, "acquire"); err != nil {
		return store.Grant{}, err
	}
	if err := p.Validate(); err != nil {
		return store.Grant{}, fmt.Errorf("redisstore: acquire: %w", err)
	}
	return s.acquires.Acquire(ctx, p)
}

// acquireTogether is the round trip of Acquire's group: one script call
// for every lease of ps.
func (s *Store) acquireTogether(ctx context.Context, ps []store.AcquireParams) []store.AcquireResult {
	res, err := s.acquire(ctx, ps)
	if err != nil {
		res = make([]store.AcquireResult, len(ps))
		for i, p := range ps {
			op := fmt.Sprintf("acquire lease %q", p.Name)
			if len(ps) > 1 {
				op += fmt.Sprintf(" (in a batch of %d)", len(ps))
			}
			res[i].Err = interpretError(op, err)
		}
	}
	return res
}

// AcquireBatch implements [store.BatchAcquirer.AcquireBatch]: the acquire
// script over the whole batch, one call and one round trip, each lease
// attempted as [Store.Acquire] attempts it (a grant with a token that went
// backwards is refused and given back the same way, in a round trip of its
// own). An error for the whole call matching [store.ErrUnavailable] means
// some or all of the batch may have been applied.
func (s *Store) AcquireBatch(ctx context.Context, ps []store.AcquireParams) ([]store.AcquireResult, error) {
	if err := s.begin(ctx, "acquire"); err != nil {
		return nil, err
	}
	if err := store.ValidateAcquireBatch(ps); err != nil {
		return nil, fmt.Errorf("redisstore: acquire: %w", err)
	}
	if len(ps) == 0 {
		return []store.AcquireResult{}, nil
	}
	res, err := s.acquire(ctx, ps)
	if err != nil {
		return nil, interpretError(fmt.Sprintf("acquire %d leases", len(ps)), err)
	}
	return res, nil
}

// acquireReply is how many elements acquire.lua returns per lease.
const acquireReply = 11

// acquire runs acquire.lua over ps, which are valid, in one call. An
// error is for the whole call, as go-redis returned it (or a reply of the
// wrong shape): the caller interprets it.
func (s *Store) acquire(ctx context.Context, ps []store.AcquireParams) ([]store.AcquireResult, error) {
	floor := store.Token(s.highest.Load())
	keys := make([]string, 0, 1+3*len(ps))
	keys = append(keys, s.keys.Counter)
	args := make([]any, 0, 1+6*len(ps))
	args = append(args, s.keys.Channel)
	for _, p := range ps {
		keys = append(keys, s.keys.Record(p.Name), s.keys.Held(p.Name), s.keys.Line(p.Name))
		args = append(args, p.Holder.Label, p.Holder.Instance, milliseconds(p.TTL), p.Name, p.Payload, flag(p.Wait))
	}
	reply, err := acquireScript.Run(ctx, s.client, keys, args...).Slice()
	if err != nil {
		return nil, err
	}
	if len(reply) != acquireReply*len(ps) {
		return nil, fmt.Errorf("unexpected reply of %d elements for %d leases from the server; do other programs write keys under the store's prefix?",
			len(reply), len(ps))
	}
	results := make([]store.AcquireResult, len(ps))
	for i, p := range ps {
		g, err := s.acquired(ctx, p, floor, reply[acquireReply*i:acquireReply*(i+1)])
		results[i] = store.AcquireResult{Grant: g, Err: err}
	}
	return results, nil
}

// acquired decodes the reply of acquire.lua for p: the grant, the refusal
// (a [*store.HeldError]), or the refusal of a grant whose token is not
// above floor, the greatest token the store had seen before the call.
func (s *Store) acquired(ctx context.Context, p store.AcquireParams, floor store.Token, reply []any) (store.Grant, error) {
	op := fmt.Sprintf("acquire lease %q", p.Name)
	var (
		acquired, place int64
		g               = store.Grant{Name: p.Name}
		rem, at         int64
		next            store.Holder
	)
	if !scan(reply, &acquired, &g.Holder.Label, &g.Holder.Instance, &g.Token, &g.Seq, &rem, &g.Payload, &at,
		&place, &next.Label, &next.Instance) {
		return store.Grant{}, unexpectedReply(op, reply)
	}
	if at > 0 {
		g.At = time.UnixMicro(at).UTC()
	}
	g.Remaining = time.Duration(rem) * time.Millisecond
	s.observe(g.Token)
	if acquired == 0 {
		return store.Grant{}, &store.HeldError{
			Name: p.Name, Holder: g.Holder, Token: g.Token, Seq: g.Seq, Remaining: g.Remaining, Payload: g.Payload,
			Position: int(place), Next: next,
		}
	}
	if g.Token <= floor {
		return store.Grant{}, s.refuse(ctx, op, p, g.Token, floor)
	}
	return g, nil
}

// refuse gives back a tenure granted with a token that went backwards and
// raises the counter, and returns the error that says so.
func (s *Store) refuse(ctx context.Context, op string, p store.AcquireParams, granted, seen store.Token) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), repairTimeout)
	defer cancel()
	raised := seen + CounterRepairMargin
	counter, err := repairScript.Run(ctx, s.client,
		[]string{s.keys.Record(p.Name), s.keys.Held(p.Name), s.keys.Counter},
		p.Holder.Label, p.Holder.Instance, int64(granted), int64(raised), s.keys.Channel, p.Name,
	).Int64()
	if err != nil {
		return fmt.Errorf("redisstore: %s: the server granted token %d, but this store had already seen token %d: %w (the server lost writes: a restart without appendfsync always, or a failover to a replica); the grant is refused, but giving it back and raising the counter failed (%v): raise %s above %d by hand, as the package documentation describes",
			op, granted, seen, ErrTokenWentBackwards, interpretError("repair", err), s.keys.Counter, raised)
	}
	return fmt.Errorf("redisstore: %s: the server granted token %d, but this store had already seen token %d: %w (the server lost writes: a restart without appendfsync always, or a failover to a replica); the grant was refused and given back, and the counter raised to %d; check the server's persistence and the package documentation",
		op, granted, seen, ErrTokenWentBackwards, counter)
}

// Renew implements [store.Store.Renew]: the whole batch (up to
// [store.MaxRenewBatch] leases) is one script call and one round trip. An
// error matching [store.ErrUnavailable] means some or all of the batch may
// have been renewed.
func (s *Store) Renew(ctx context.Context, ps []store.RenewParams) ([]store.RenewResult, error) {
	if err := s.begin(ctx, "renew"); err != nil {
		return nil, err
	}
	if err := store.ValidateRenewBatch(ps); err != nil {
		return nil, fmt.Errorf("redisstore: renew: %w", err)
	}
	if len(ps) == 0 {
		return []store.RenewResult{}, nil
	}
	keys := make([]string, 0, 2*len(ps))
	args := make([]any, 0, 5*len(ps))
	for _, p := range ps {
		keys = append(keys, s.keys.Record(p.Name), s.keys.Held(p.Name))
		args = append(args, p.Holder.Label, p.Holder.Instance, int64(p.Token), p.Seq, milliseconds(p.TTL))
	}
	op := fmt.Sprintf("renew %d leases", len(ps))
	if len(ps) == 1 {
		op = fmt.Sprintf("renew lease %q", ps[0].Name)
	}
	reply, err := renewScript.Run(ctx, s.client, keys, args...).Slice()
	if err != nil {
		return nil, interpretError(op, err)
	}
	results, ok := s.renewResults(ps, reply)
	if !ok {
		return nil, unexpectedReply(op, fmt.Sprintf("of %d elements for %d leases", len(reply), len(ps)))
	}
	return results, nil
}

// renewResults decodes the flat reply of renew.lua (its header describes
// it) and reports whether it had that shape.
func (s *Store) renewResults(ps []store.RenewParams, reply []any) ([]store.RenewResult, bool) {
	results := make([]store.RenewResult, len(ps))
	for i, p := range ps {
		if len(reply) == 0 {
			return nil, false
		}
		kind, ok := integer(reply[0])
		if !ok {
			return nil, false
		}
		g := store.Grant{Name: p.Name}
		var rem int64
		switch kind {
		case 0:
			reply = reply[1:]
		case 1:
			var at int64
			g.Holder, g.Token = p.Holder, p.Token
			if len(reply) < 4 || !scan(reply[1:4], &g.Seq, &rem, &at) {
				return nil, false
			}
			g.At = time.UnixMicro(at).UTC()
			reply = reply[4:]
		case 2:
			if len(reply) < 3 || !scan(reply[1:3], &g.Token, &g.Seq) {
				return nil, false
			}
			reply = reply[3:]
		case 3:
			if len(reply) < 6 || !scan(reply[1:6], &g.Holder.Label, &g.Holder.Instance, &g.Token, &g.Seq, &rem) {
				return nil, false
			}
			if g.Holder.Label == "" || g.Holder.Instance == "" {
				return nil, false // a held lease names its holder
			}
			reply = reply[6:]
		default:
			return nil, false
		}
		g.Remaining = time.Duration(rem) * time.Millisecond
		s.observe(g.Token)
		results[i] = store.RenewResult{Renewed: kind == 1, Grant: g}
	}
	return results, len(reply) == 0
}

// Release implements [store.Store.Release] with one script call: it
// deletes the held key when holder and token match, marks the record
// released, keeps the token counter and announces the release on the
// store's channel. An error matching [store.ErrUnavailable] means it may
// have been applied.
func (s *Store) Release(ctx context.Context, p store.ReleaseParams) error {
	if err := s.begin(ctx, "release"); err != nil {
		return err
	}
	if err := p.Validate(); err != nil {
		return fmt.Errorf("redisstore: release: %w", err)
	}
	errs, err := s.release(ctx, fmt.Sprintf("release lease %q", p.Name), []store.ReleaseParams{p})
	if err != nil {
		return err
	}
	return errs[0]
}

// ReleaseBatch implements [store.BatchReleaser.ReleaseBatch]: the release
// script over the whole batch, one call and one round trip.
func (s *Store) ReleaseBatch(ctx context.Context, ps []store.ReleaseParams) ([]error, error) {
	if err := s.begin(ctx, "release"); err != nil {
		return nil, err
	}
	if err := store.ValidateReleaseBatch(ps); err != nil {
		return nil, fmt.Errorf("redisstore: release: %w", err)
	}
	if len(ps) == 0 {
		return []error{}, nil
	}
	return s.release(ctx, fmt.Sprintf("release %d leases", len(ps)), ps)
}

// release runs release.lua over ps, which are valid.
func (s *Store) release(ctx context.Context, op string, ps []store.ReleaseParams) ([]error, error) {
	keys := make([]string, 0, 3*len(ps))
	args := make([]any, 0, 2+4*len(ps))
	args = append(args, s.keys.Channel, store.Handoff.Microseconds())
	for _, p := range ps {
		keys = append(keys, s.keys.Record(p.Name), s.keys.Held(p.Name), s.keys.Line(p.Name))
		args = append(args, p.Holder.Label, p.Holder.Instance, int64(p.Token), p.Name)
	}
	reply, err := releaseScript.Run(ctx, s.client, keys, args...).Int64Slice()
	if err != nil {
		return nil, interpretError(op, err)
	}
	if len(reply) != len(ps) {
		return nil, unexpectedReply(op, fmt.Sprintf("of %d elements for %d leases", len(reply), len(ps)))
	}
	errs := make([]error, len(ps))
	for i, n := range reply {
		if n != 1 {
			p := ps[i]
			errs[i] = fmt.Errorf("redisstore: release of lease %q by %s with token %d refused: %w",
				p.Name, p.Holder, p.Token, store.ErrNotHeld)
		}
	}
	return errs, nil
}

// Get implements [store.Store.Get] with one script call.
func (s *Store) Get(ctx context.Context, name string) (store.Record, error) {
	if err := s.begin(ctx, "get"); err != nil {
		return store.Record{}, err
	}
	if err := store.ValidateName(name); err != nil {
		return store.Record{}, fmt.Errorf("redisstore: get: %w", err)
	}
	records, err := s.read(ctx, fmt.Sprintf("get lease %q", name), []string{name})
	if err != nil {
		return store.Record{}, err
	}
	if len(records) == 0 {
		return store.Record{}, fmt.Errorf("redisstore: lease %q: %w", name, store.ErrNotFound)
	}
	return records[0], nil
}

// List implements [store.Lister.List], ordered by name in byte order. It
// finds the records with SCAN (one round trip per 1,000 keys or so) and
// reads them 1,000 at a time; it is not one snapshot, so leases that change
// while it runs are reported as they were when their chunk was read.
func (s *Store) List(ctx context.Context) ([]store.Record, error) {
	if err := s.begin(ctx, "list"); err != nil {
		return nil, err
	}
	const op = "list leases"
	skip := len(s.keys.Record(""))
	seen := make(map[string]struct{})
	var names []string
	var cursor uint64
	for {
		keys, next, err := s.client.Scan(ctx, cursor, s.keys.recordPattern(), scanCount).Result()
		if err != nil {
			return nil, interpretError(op, err)
		}
		for _, k := range keys {
			if len(k) < skip {
				continue
			}
			n := k[skip:]
			if _, dup := seen[n]; !dup {
				seen[n] = struct{}{}
				names = append(names, n)
			}
		}
		if next == 0 {
			break
		}
		cursor = next
	}
	slices.Sort(names)
	records := make([]store.Record, 0, len(names))
	for chunk := range slices.Chunk(names, readChunk) {
		rs, err := s.read(ctx, op, chunk)
		if err != nil {
			return nil, err
		}
		records = append(records, rs...)
	}
	return records, nil
}

// read reports the leases names that exist, in the order given.
func (s *Store) read(ctx context.Context, op string, names []string) ([]store.Record, error) {
	keys := make([]string, 0, 2*len(names))
	for _, n := range names {
		keys = append(keys, s.keys.Record(n), s.keys.Held(n))
	}
	reply, err := readScript.Run(ctx, s.client, keys).Slice()
	if err != nil {
		return nil, interpretError(op, err)
	}
	if len(reply) != len(names) {
		return nil, unexpectedReply(op, fmt.Sprintf("of %d results for %d leases", len(reply), len(names)))
	}
	records := make([]store.Record, 0, len(names))
	for i, item := range reply {
		var (
			found, acqS, acqUS, state, rem int64
			r                              = store.Record{Grant: store.Grant{Name: names[i]}}
		)
		if !scan(item, &found, &r.Holder.Label, &r.Holder.Instance, &r.Token, &r.Seq, &acqS, &acqUS, &state, &rem, &r.Payload) {
			return nil, unexpectedReply(op, item)
		}
		if found == 0 {
			continue
		}
		r.State = store.State(state)
		if r.State != store.StateHeld && r.State != store.StateExpired && r.State != store.StateReleased {
			return nil, unexpectedReply(op, item)
		}
		s.observe(r.Token)
		r.AcquiredAt = time.Unix(acqS, acqUS*int64(time.Microsecond))
		r.Remaining = time.Duration(rem) * time.Millisecond
		records = append(records, r)
	}
	return records, nil
}

// Close implements [store.Store.Close]: later calls fail with
// [store.ErrClosed] and every [Store.Listen] returns. It leaves the
// client open. Closing twice is harmless.
func (s *Store) Close() error {
	s.gate.Close()
	return nil
}

// begin refuses a call on a closed store or with a context that is already
// done, before anything is attempted.
func (s *Store) begin(ctx context.Context, op string) error { return s.gate.Begin(ctx, op) }

// observe raises the greatest token seen to t.
func (s *Store) observe(t store.Token) {
	for {
		cur := s.highest.Load()
		if int64(t) <= cur || s.highest.CompareAndSwap(cur, int64(t)) {
			return
		}
	}
}

// milliseconds is d in whole milliseconds, rounded up: the unit of PX.
func milliseconds(d time.Duration) int64 {
	ms := int64(d / time.Millisecond)
	if d%time.Millisecond != 0 {
		ms++
	}
	return ms
}

// flag is b as a script argument: "1" or "0".
func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// scan copies the elements of a script's array reply into dst (each a
// *string, *int64 or *store.Token) and reports whether the reply had that
// shape.
func scan(reply any, dst ...any) bool {
	items, ok := reply.([]any)
	if !ok || len(items) != len(dst) {
		return false
	}
	for i, d := range dst {
		switch d := d.(type) {
		case *string:
			switch v := items[i].(type) {
			case string:
				*d = v
			case nil:
				*d = ""
			default:
				return false
			}
		case *int64:
			n, ok := integer(items[i])
			if !ok {
				return false
			}
			*d = n
		case *store.Token:
			n, ok := integer(items[i])
			if !ok {
				return false
			}
			*d = store.Token(n)
		default:
			return false
		}
	}
	return true
}

// integer reads an integer reply, or a string holding one.
func integer(v any) (int64, bool) {
	switch v := v.(type) {
	case int64:
		return v, true
	case string:
		n, err := strconv.ParseInt(v, 10, 64)
		return n, err == nil
	}
	return 0, false
}
