package redisfence

import (
	"context"
	_ "embed"
	"fmt"
	"strings"

	"github.com/tenure-dev/tenure/store"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-dev/tenure"
	"github.com/tenure-dev/tenure/store/redisstore"
)

//go:embed strict.lua
var strictSrc string

var strictScript = redis.NewScript(strictSrc)

// StrictHSet sets fields of the hash at key (HSET, leaving other fields
// alone) when, by the Redis server's clock, l's lease is held with exactly
// l's holder, token and renewal seq, and advances the seq in the same
// atomic step. It is the strict fence for leases kept by
// [redisstore.Store]: of two byte-identical clones of one holder (a
// snapshot restored twice) only one can ever pass; the other fails with an
// error matching [store.ErrFenced] because the chain moved on (promise
// P6). leases are the store's keys ([redisstore.Store.Keys]); key must
// live on the same server.
//
// StrictHSet keeps l's renewal chain in step as [tenure.ChainWrite]
// describes: it waits for a renewal in flight, holds the next one back
// until the script answered, and hands the new seq to the client only
// after the write. A refused or failed write costs nothing; a write whose
// outcome is unknown (an error matching [store.ErrUnavailable]) costs at
// most the tenure: if it was made, the next renewal finds the chain moved
// and ends the tenure (the cheap side).
//
// A refusal means this tenure is over for writing (expired, released,
// taken over, or a clone wrote first): stop working under it. Bad input
// matches [store.ErrInvalid] and sends nothing; a lease whose tenure has
// ended fails with its [*tenure.LostError].
func StrictHSet(ctx context.Context, c redis.Scripter, leases redisstore.Keys, l *tenure.Lease, key string, fields map[string]string) error {
	if l == nil {
		return fmt.Errorf("redisfence: strict hset: %w: lease is nil", store.ErrInvalid)
	}
	if err := validate(c, l.Name(), 1); err != nil {
		return fmt.Errorf("redisfence: strict hset: %w", err)
	}
	if leases.Prefix == "" {
		return fmt.Errorf("redisfence: strict hset: %w: the lease keys are empty; pass the store's Keys()", store.ErrInvalid)
	}
	if err := validateHash(key, fields); err != nil {
		return fmt.Errorf("redisfence: strict hset: %w", err)
	}
	switch {
	case strings.HasPrefix(key, leases.Prefix):
		return fmt.Errorf("redisfence: strict hset: %w: key %q starts with the lease store's key prefix %q: writing it could forge or end a lease; keep data keys outside the prefix",
			store.ErrInvalid, key, leases.Prefix)
	case strings.HasPrefix(key, DefaultKeyPrefix):
		return fmt.Errorf("redisfence: strict hset: %w: key %q starts with the default fence key prefix %q: a hash there would break that fence; keep data keys outside the prefix",
			store.ErrInvalid, key, DefaultKeyPrefix)
	}
	op := fmt.Sprintf("strict hset %q under lease %q", key, l.Name())
	w, err := l.BeginChainWrite()
	if err != nil {
		return fmt.Errorf("redisfence: %s: %w", op, err)
	}
	next := int64(0)
	defer func() {
		if next > 0 {
			w.Commit(next)
		} else {
			w.Abort()
		}
	}()
	tok, h := w.Token(), w.Holder()
	if tok == 0 {
		return fmt.Errorf("redisfence: %s: %w: the lease is no longer trusted; do not write", op, store.ErrInvalid)
	}
	argv := append(make([]any, 0, 5+2*len(fields)), h.Label, h.Instance, int64(tok), w.Seq(), leases.Prefix)
	argv = appendFields(argv, fields)
	reply, err := strictScript.Run(ctx, c, []string{leases.Record(l.Name()), leases.Held(l.Name()), key}, argv...).Int64Slice()
	if err != nil {
		return interpretError(op, err)
	}
	switch {
	case len(reply) == 2 && reply[0] == 1:
		next = reply[1]
		return nil
	case len(reply) == 4 && reply[0] == 0:
		state := "not held"
		if reply[3] == 1 {
			state = "held"
		}
		return fmt.Errorf("redisfence: %s: the lease is %s with token %d at seq %d, not token %d at seq %d: it expired or was taken over, or a clone of this holder wrote first; stop working under this tenure: %w",
			op, state, reply[1], reply[2], tok, w.Seq(), &store.FencedError{Resource: "lease:" + l.Name(), Offered: tok, Recorded: store.Token(reply[1])})
	}
	return unexpectedReply(op, reply)
}
