package pgstore

import (
	"context"

	"github.com/tenure-dev/tenure/store"
)

// RaiseTokenFloor moves the token sequence up to the greatest of its own
// value, every token the leases and fences tables hold, and the server's
// clock in microseconds since 1970, and returns that value: the next
// tenure's token is greater. Run it as the schema's owner (the run-time
// role has no privilege on the sequence) on a new primary after a failover
// of asynchronous replication, before any worker acquires there.
//
// Why the clock: the last commits of the old primary may be lost, and with
// them the last values drawn from the sequence; the tables of the new
// primary cannot say what they were, so a floor read from them could hand
// a lost token out again (two holders with one token, which no fence tells
// apart). Tokens are drawn one per acquisition, far fewer than one a
// microsecond, so the clock in microseconds is above every token drawn
// before it, as long as the tokens so far stay below the clock of the last
// raise plus the microseconds since (they do, by many orders of
// magnitude) and the new primary's clock is not behind the old one's by
// more than that margin. Tokens become large (about 1.8 × 10^15 in 2026)
// and stay consecutive from there. A standby cannot raise it: promote it
// first.
func (s *Store) RaiseTokenFloor(ctx context.Context) (store.Token, error) {
	ns := s.obj.namespace()
	var floor int64
	err := s.pool.QueryRow(ctx, "SELECT pg_catalog.setval($1::regclass, GREATEST("+
		"(SELECT last_value FROM "+s.seqName+"),"+
		"(SELECT COALESCE(max(token), 0) FROM "+ns.Ident(s.obj.Leases)+"),"+
		"(SELECT COALESCE(max(token), 0) FROM "+ns.Ident(s.obj.Fences)+"),"+
		"(extract(epoch FROM clock_timestamp()) * 1000000)::bigint))", s.seqName).Scan(&floor)
	if err != nil {
		return 0, interpretError("raise the token floor (as the schema's owner, on a primary)", err)
	}
	return store.Token(floor), nil
}
