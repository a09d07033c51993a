// Package redisfence is the resource side of tenure's fencing for data
// kept in Redis (promise P4: the resource decides): a Lua script that
// writes a key only when the writer's fencing token is equal to or greater
// than the greatest token the resource accepted before, and records the
// token, in one atomic step.
//
//	lease, err := client.Campaign(ctx, "billing")
//	...
//	err = redisfence.Set(ctx, rdb, "billing", lease.Token(), "billing:last-run", time.Now().Format(time.RFC3339), 0)
//	if errors.Is(err, store.ErrFenced) {
//		return err // superseded: a newer holder has written; stop
//	}
//
// The token may come from any tenure store (PostgreSQL, Redis, etcd, ...):
// the fence only needs tokens that go up per lease, which every store
// promises (P2).
//
// # Calls
//
//   - [Set] (SET key value, with an optional TTL) and [HSet] (HSET key
//     field value ...): the fenced write itself. A refused token writes
//     nothing.
//   - [Check]: moves the fence without writing. It is not atomic with a
//     write made afterwards; use it to shut out predecessors at once, or to
//     ask whether a token is still current.
//   - [StrictHSet]: for leases kept by store/redisstore on the same
//     server, the strict write: HSET only while the writer's tenure is
//     held by the server's clock with exactly its holder, token and
//     renewal seq, advancing the seq in the same step. No fence key: the
//     lease itself is the fence, and of two clones only one can write.
//   - [Recorded]: the greatest token accepted so far (0 when none), for
//     operators and tests.
//
// The package-level functions use the default key prefix; make a [Fencer]
// with [New] for another. Every writer of one resource must use the same
// prefix and the same Redis.
//
// # Keys
//
// The fence of resource R is the string key [DefaultKeyPrefix] + R (the
// Fencer's prefix + R, see [Fencer.Key]): the greatest token accepted, in
// decimal. It never expires and nothing here deletes it; deleting it resets
// the fence, after which a stale token is accepted once more. Tokens are
// compared as decimal strings, exactly, across the whole int64 range.
//
// The script writes the data first and moves the fence after, so a write
// the server refuses (HSet onto a key of another type) leaves the fence as
// it was.
//
// Data keys must stay out of the fence keys and the lease store's keys: a
// data key equal to a fence key would rewind that fence, one among the
// store's keys could forge or end a lease. A [Fencer] refuses (with
// [store.ErrInvalid], sending nothing) data keys that start with its fence
// prefix, keys that start with [Config.StoreKeyPrefix] when it is set, and
// otherwise the keys the default store owns ("tenure:lease:...",
// "tenure:held:...", "tenure:token"). [New] refuses a fence prefix whose
// keys could be the store's keys, and redisstore refuses a store prefix
// whose keys could be fence keys of [DefaultKeyPrefix]; both compare key
// spaces ([redisstore.Keys.Overlaps]), so the defaults, "tenure:" and
// "tenure:fence:", live side by side. [StrictHSet] refuses data keys under
// the lease store's prefix and under [DefaultKeyPrefix].
//
// # Tokens the store never issued
//
// A fence that takes any token can be poisoned: one write with a token of
// 2^63 - 1 (a bug, a hand-made call) refuses every legitimate writer from
// then on. When the leases live in a redisstore on the same server, set
// [Config.CounterKey] to its counter ([redisstore.Keys.Counter]): every
// fenced call then reads the counter in the same atomic step and refuses a
// token above it with an error matching [fence.ErrNotIssued] (and
// [store.ErrInvalid]), writing nothing. Without it (tokens of another
// store) the fence takes any valid token. This guards against mistakes,
// not against a hostile client: anything that may write to Redis can set
// a fence key directly; keep such clients out with Redis ACLs. A poisoned
// fence is repaired by setting its key (see Keys) to the last token
// accepted, with SET, as an operator.
//
// # Calling the scripts from other languages
//
// The scripts (fence.lua, strict.lua; their headers give the KEYS and ARGV
// layout) check their own input, for callers that do not go through Go:
// a token (and the strict script's seq) must be a canonical positive
// decimal: ASCII digits only, no sign, no leading zero, no exponent or
// fraction, at most 19 digits and at most 2^63 - 1. The fence script also
// takes the fence key prefix and the store key prefix (empty when unknown):
// the fence key must start with the former, and the data key must start
// with neither. A last key after the fence key (check) or after the data
// key (set, hset) is the lease store's counter: a token above its value is
// refused with the reply {-1, counter}. A call that breaks these rules fails with an error that
// starts with "ERR tenure fence:" (or "ERR tenure strict:") and changes
// nothing.
//
// # Redis Cluster
//
// The script touches two keys, the fence and the data key. On Redis
// Cluster both must hash to the same slot: put the same hash tag in the
// resource name and the key, for example resource "{orders}" with key
// "{orders}:total" (the default prefix contains no braces, so the tag in
// the resource decides). Tests run against a single server only.
//
// # Errors
//
//   - A refusal matches [store.ErrFenced]; errors.As finds a
//     [*store.FencedError] with the resource, the token offered and the
//     token recorded. Never log it and carry on (promise P9): stop working
//     under that token.
//   - Transport errors, timeouts and replies such as LOADING, READONLY or
//     BUSY match [store.ErrUnavailable]: the write may or may not have
//     been made. Retrying with the same token is safe: an equal token
//     passes and writes the same value again.
//   - A closed go-redis client matches [store.ErrClosed]; other server
//     errors (WRONGTYPE, ACL refusals) come back wrapped.
//   - Bad input (nil client, empty or overlong resource, token 0 or below,
//     empty key, a data key among the fence or lease store keys, negative TTL, no fields or more than [MaxFields]) matches
//     [store.ErrInvalid] and sends nothing. A [tenure.Lease] whose Token
//     is 0 is no longer trusted: do not write.
//
// # What it cannot do
//
// A fence that accepts equal tokens cannot tell two byte-identical clones
// of one holder apart: both carry the same token. The renewal chain (seq)
// in the store breaks that tie; [StrictHSet] (and pgfence's strict check)
// is the fence that uses it. The fence also lives only as long as Redis keeps it: a restart
// without appendfsync always, or a failover to a replica, can lose the
// last fence moves together with the writes they guarded (they are made
// in one step), after which a stale holder's write is accepted as if those
// writes had never happened. A fence on the same server as a redisstore
// that lost its data has forgotten every token; the store's tokens keep
// growing across the loss (they are floored by the server's clock), so the
// new holder's first write moves the fence past every token handed out
// before, and from then on stale tokens are refused again; until that
// write, a stale holder's write is accepted. Run the Redis that holds fenced data with
// appendonly yes and appendfsync always, and with maxmemory-policy
// noeviction (or a volatile-* policy: fence keys have no TTL).
package redisfence
