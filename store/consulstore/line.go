package consulstore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/tenure-dev/tenure/store"

	"github.com/hashicorp/consul/api"
)

// refuse returns held, the refusal of acquisition p of lease l (as read),
// after putting p.Holder in line or keeping its place there when p.Wait
// asks for it (see [Store.wait]); ttl is p.TTL as a session TTL. A place
// at the head of the line is remembered, so that [Store.Listen] watches
// the lease for an expiry (see [heads]).
func (s *Store) refuse(ctx context.Context, op string, p store.AcquireParams, ttl time.Duration, l lease, held *store.HeldError) error {
	if !p.Wait {
		return held
	}
	place, kept, err := s.wait(ctx, p, ttl, l, held.Remaining)
	if err != nil {
		return interpret(op+": wait in line", err)
	}
	s.heads.placed(p.Holder, l, place, kept)
	held.Position = place
	return held
}

// forgetAfter is the TTL of the session that keeps a follower in line,
// told that the lease has remaining left and asking with a lease TTL of
// ttl. Consul invalidates a session twice its TTL after its creation or
// last renewal (see Clock in the package documentation), so a follower
// that does not ask again is forgotten remaining + 2×ttl after it asked:
// twice its TTL after the expiry it was told. Consul's own promise, no
// earlier than the session's TTL, still keeps it past that expiry as long
// as its TTL is at least half the remaining time.
func (s *Store) forgetAfter(remaining, ttl time.Duration) time.Duration {
	d := (remaining + 2*ttl + 1) / 2
	if r := d % time.Millisecond; r != 0 {
		d += time.Millisecond - r
	}
	return min(max(d, s.cfg.MinSessionTTL), MaxSessionTTL)
}

// wait puts p.Holder in the line of lease l (as the refusal read it), or
// keeps its place there, and returns its place (1: next) and the TTL of
// the session that keeps it.
//
// A follower's key, wait/<holder> in the lease's directory, is locked by
// a session of its own whose TTL is [Store.forgetAfter] and whose
// behaviour is delete, so that Consul deletes the key when the session
// ends: a follower that stops asking is forgotten without anyone reading
// a clock. A follower in line renews its session (one round trip, which
// Consul answers from the leader's timers without a Raft write) and keeps
// its key, so its place, the key's CreateIndex. A follower not in line (or
// whose session ended since the read) creates a session and locks a new
// key with it, reading the line in the same transaction: two round trips,
// and its place is counted from what the transaction read.
func (s *Store) wait(ctx context.Context, p store.AcquireParams, ttl time.Duration, l lease, remaining time.Duration) (int, time.Duration, error) {
	forget := s.forgetAfter(remaining, ttl)
	if place, session := l.place(p.Holder); place > 0 && session != "" {
		entry, _, err := s.client.Session().Renew(session, (&api.WriteOptions{}).WithContext(ctx))
		if err != nil {
			return 0, 0, fmt.Errorf("renew the session of the place in line: %w", err)
		}
		if entry != nil {
			// The session keeps the TTL it was created with; an answer
			// that does not say it leaves the TTL a new place would get.
			if kept, err := time.ParseDuration(entry.TTL); err == nil {
				forget = kept
			}
			return place, forget, nil
		}
		// The session ended, and its key with it: take a new place.
	}
	session, err := s.newSession(ctx, sessionRequest{
		Name:       "tenure line " + p.Holder.String(),
		TTL:        forget.String(),
		LockDelay:  "0s",
		Behavior:   api.SessionBehaviorDelete,
		Checks:     []string{},
		NodeChecks: []string{},
	})
	if err != nil {
		return 0, 0, err
	}
	k := s.keys(p.Name)
	body, err := json.Marshal(waitValue{Label: p.Holder.Label, Instance: p.Holder.Instance})
	if err != nil {
		s.reap(session)
		return 0, 0, fmt.Errorf("encoding the follower's key: %w", err)
	}
	ok, resp, err := s.txn(ctx, api.TxnOps{
		{KV: &api.KVTxnOp{Verb: api.KVLock, Key: k.waiter(p.Holder), Session: session, Value: body}},
		{KV: &api.KVTxnOp{Verb: api.KVGetTree, Key: k.line}},
	}, false)
	if err != nil {
		// The key may be locked by the session: leave the session to
		// expire with it.
		return 0, 0, err
	}
	if !ok {
		s.reap(session)
		return 0, 0, fmt.Errorf("%w: the key that keeps the place in line is locked by another session (%s); another acquisition by the same holder put it in line meanwhile: retry",
			store.ErrUnavailable, txnErrors(resp))
	}
	// The first result is the lock's; the others are the line read after it.
	in, err := parseLease(p.Name, k, kvPairs(resp)[1:])
	if err != nil {
		return 0, 0, err
	}
	place, _ := in.place(p.Holder)
	if place == 0 {
		return 0, 0, fmt.Errorf("the transaction that put the follower in line did not read its key back; acquire again")
	}
	return place, forget, nil
}
