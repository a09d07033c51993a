// Package redisstore is the Redis [store.Store] for a single Redis server
// (or the primary that Sentinel names). docs/STORES.md lists the optional
// interfaces of package store it implements.
//
//	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", ContextTimeoutEnabled: true})
//	store, err := redisstore.New(rdb, redisstore.Config{})
//
// Set ContextTimeoutEnabled: without it go-redis ignores the deadline of a
// call's context and waits up to its ReadTimeout (3 s by default), which
// delays the client's reaction to an unreachable server.
//
// The store needs Redis 5 or later (scripts that read TIME and write); the
// tests run against Redis 7.0. Redis Cluster and Ring clients are refused:
// a store needs one token counter on one primary. Multi-server Redlock is
// deliberately not offered: it has no single counter that only goes up, so
// it cannot hand out fencing tokens.
//
// # Clock
//
// The store owns time (promise P1): a lease is held exactly while its held
// key exists, and Redis expires keys by the server's clock. Every decision
// is taken inside one Lua script, during which Redis holds its clock still,
// so a script sees one consistent now for every lease it touches. TTLs are
// whole milliseconds, rounded up; remaining times come from PTTL.
//
// Redis stores expiries as absolute times of the server's wall clock, so a
// step of that clock moves every expiry (see Failure modes). A replica
// does not expire keys by itself but waits for its primary's deletions;
// after a failover the promoted replica's clock decides.
//
// # Tokens
//
// Every new tenure takes its token in the same script that grants it:
// token = max(counter + 1, last + 1, TIME), where counter is the one
// counter of the prefix, shared by every lease name, last is the token of
// the name's previous tenure (kept in its record) and TIME is the server's
// clock in microseconds since 1970. The token is stored back in the
// counter. While the server keeps its data the counter alone makes every
// token greater than every token handed out before it (promise P2); the
// record's last token covers a counter lost on its own (deleted, evicted);
// the clock covers the loss of everything (a restart without persistence,
// a failover to a replica that lacked the last writes): a grant made after
// the loss reads a later TIME than every grant made before it, so tokens
// keep growing (see Restarts and failovers for the conditions). A renewal
// keeps the token and advances seq. Release deletes only the held key, when
// holder and token match, and keeps the record and the counter.
//
// Tokens are therefore large (about 1.8 x 10^15 in 2026) and not
// consecutive. Lua numbers are doubles, exact for integers below 2^53;
// the clock reaches 2^53 microseconds in the year 2255, and the counter
// goes beyond the clock only by one per grant made within one microsecond
// (a Redis script takes longer than that) plus whatever an operator or a
// repair added, so tokens stay exact for more than two centuries. The
// acquire script refuses to count past 2^53 rather than lose exactness.
//
// # Notifications
//
// The release and acquire scripts PUBLISH every release and every new
// tenure on [Keys.Channel], inside the same atomic step, as a small JSON
// object that [Store.Listen] turns into a [store.Notice]: an acquisition
// with its holder and TTL, a release with the follower the lease is kept
// for (see Line). [Store.Listen] subscribes on a connection of its own and
// subscribes again, with backoff, when that connection fails. Redis keeps
// no message for a subscriber that is away: one lost while reconnecting
// only delays followers until the expiry they were told.
//
// # Line
//
// Followers that campaign ([store.AcquireParams.Wait]) wait in line in a
// hash per lease, first come first by the server's TIME when they first
// asked; a refusal reports the caller's place ([store.HeldError].Position).
// A release keeps the lease for the head of the line for [store.Handoff]
// (fields kept_label, kept_instance and kept_until of the record) and names
// it in its announcement: the next follower alone tries at once, the others
// stay back, and a handover costs the server one acquisition however many
// wait. Anyone else's acquisition meanwhile is refused with a
// [*store.HeldError] that has no holder and names the follower in Next. A
// follower that stops asking is forgotten twice its TTL after the expiry it
// was last told. The line never grants a lease early and never extends one.
//
// # History
//
// The Redis store keeps no history ([store.Historian]): it records who
// holds a lease now, not who held it before. It could: the acquire and
// release scripts could append each grant, takeover and release to a
// capped stream (XADD … MAXLEN ~ N) in the same atomic script. It does not
// now because every acquisition would pay that write and the memory, and a
// failover that loses the last writes (see Failure modes) would lose their
// events too, so the history could claim a handover never happened. Use
// PostgreSQL or SQLite for leases whose history matters, or the holders'
// own logs.
//
// # Failure modes
//
//   - A forward step of the Redis server's wall clock by J expires every
//     lease J early: a lease with less than J remaining is gone at once
//     and another process may acquire it, with a greater token, while its
//     old holder, whose local deadline runs on its own monotonic clock,
//     keeps trusting its token for up to one renew interval, until its
//     next renewal finds the lease taken (up to its local deadline if that
//     renewal fails). That is not the cheap side: for that window two
//     processes believe they lead, and only a fence that checks tokens
//     keeps the resource correct (side effects that check no token may
//     happen twice). Each grant and renewal reports the server's TIME
//     ([store.Grant.At]): a holder whose next renewal still succeeds sees
//     that the server's clock ran ahead of its own monotonic time and
//     stands down at once (tenure.LossStoreClockAhead) instead of trusting
//     the shortened lease to its old deadline. A backward step by J extends every lease by J: a
//     dead holder's lease blocks followers that much longer, which costs
//     availability, never safety. Tokens do not depend on the clock while
//     the counter survives; after a loss of data they are floored by it,
//     so a clock stepped back across a loss can repeat tokens (see
//     Restarts and failovers).
//   - A restart or failover that loses acknowledged writes loses leases,
//     the counter and any fence on the same server; tokens keep growing,
//     but holders stand down only at their next renewal and a lost fence
//     accepts one stale token until the new holder writes (see Restarts and
//     failovers). [Store.CheckDurability] says whether the server can lose
//     writes.
//   - A call whose reply does not arrive (connection cut, timeout, context
//     deadline, server restart) fails with an error matching
//     [store.ErrUnavailable]: it may have been applied. So do replies that
//     mean "not now" (LOADING, BUSY, READONLY during a failover,
//     MASTERDOWN, OOM, too many clients). The client treats the outcome as
//     unknown (promise P3).
//   - go-redis retries a command after a network error (Options.MaxRetries,
//     3 by default). A retried script that had been applied shows up as a
//     lease held by the caller's own holder (Acquire) or as a seq mismatch
//     (Renew); the client treats both as loss, the safe side.
//   - A closed go-redis client fails calls with [store.ErrClosed]. ACL
//     refusals and keys of another type under the prefix come back as
//     errors that say so. Under ACLs the client's user needs EVAL, EVALSHA,
//     SCAN and SUBSCRIBE, and the commands the scripts call (HMGET, HSET,
//     HINCRBY, GET, SET, DEL, PTTL, PEXPIRE, TIME, PUBLISH), on the
//     store's keys and channel.
//   - Input outside the limits fails with [store.ErrInvalid] before
//     anything is sent. After [Store.Close] every call fails with
//     [store.ErrClosed]; Close leaves the go-redis client open.
//
// Package [github.com/tenure-dev/tenure/fence/redisfence] is the resource
// side: fenced writes to Redis keys.
//
// # Keys
//
// With the default [Config.KeyPrefix] "tenure:" ([Store.Keys] names them):
//
//   - tenure:lease:<name>: the lease's record, a hash with the fields
//     label, instance, token, seq, acquired_s and acquired_us (the
//     server's TIME when the tenure began), released ("0" or "1") and
//     payload (what the holder published; a record written by an older
//     library lacks it and reads as empty), and kept_label, kept_instance
//     and kept_until (the follower a released lease is kept for, and until
//     when, in server microseconds; see Line). It
//     names the current or last tenure and never expires: Get and List
//     report expired and released leases from it.
//   - tenure:held:<name>: exists while the lease is held; a string holding
//     the tenure's token, whose TTL (PX, milliseconds) is the lease's
//     expiry.
//   - tenure:line:<name>: the followers waiting for the lease, a hash of
//     "label\ninstance" to "ticket until" (server microseconds); absent
//     when nobody waits.
//   - tenure:token: the token counter, never deleted.
//   - tenure:notify: the pub/sub channel of releases and acquisitions; the
//     message is a JSON object (see Notifications).
//
// Nothing else is written, and nothing but these scripts may write these
// keys. Run the server with maxmemory-policy noeviction: any other policy
// may evict held keys (they have a TTL), ending leases early, and an
// allkeys-* policy may evict the counter and the records too, restarting
// tokens (see below).
//
// # Operations
//
// [Store.Acquire], [Store.Renew] and [Store.Release] are each one Lua
// script (scripts/*.lua, embedded) and one round trip, and so are
// [Store.AcquireBatch] and [Store.ReleaseBatch] (the acquire and release
// scripts over a whole batch: a client sends the attempts made at once
// together, and releases everything it holds at shutdown, in one call per
// batch of up to [store.MaxRenewBatch]; and the store itself sends
// [Store.Acquire] calls made at once by any of its callers, many clients
// sharing it, together: while two are out, later ones wait for one to
// come back and go in one call, up to 1,000); go-redis sends
// EVALSHA and falls back to EVAL when the server answers NOSCRIPT (after a
// restart or SCRIPT FLUSH). Renew sends the whole batch, up to
// [store.MaxRenewBatch] leases, as one script call, which the server runs
// without serving anyone else: on a small two-core machine a batch of
// 10,000 leases takes about 170 ms end to end (17 microseconds per lease),
// more on a loaded one. [Store.Get] is one read-only script; [Store.List]
// finds the records with SCAN and reads them 1,000 per script call.
//
// # Restarts and failovers: lost writes
//
// Redis acknowledges a write before it is on disk unless the server runs
// with appendonly yes and appendfsync always. With appendfsync everysec
// (the usual setting) a crash loses about the last second of writes; with
// RDB snapshots only, everything since the last snapshot; without
// persistence, everything. Replication is asynchronous, so a failover to a
// replica loses what the replica had not received. Each script's writes
// are persisted and replicated as one unit, so a lease and its token are
// lost together. [Store.CheckDurability] reports the settings under which
// this can happen; the tenure command's doctor prints them.
//
// What a loss costs:
//
//   - Tokens keep growing. The counter may come back lower than tokens
//     already handed out, but the next grant is floored by the server's
//     clock, which has moved on since every lost grant. This holds as long
//     as (a) the server's clock (after a failover, the promoted replica's)
//     is not behind the clock of the lost grants, and (b) the counter was
//     not ahead of the clock by more than the time the loss took: it is
//     ahead only after an operator raised it or the store repaired it (by
//     [CounterRepairMargin], about one second), so a restart faster than
//     that lead can still repeat tokens, which the detection below covers
//     for stores that saw them.
//   - Leases are lost. A holder whose lease was lost keeps believing it
//     leads until its next renewal (at most one renew interval), which
//     finds the lease absent or held by another tenure; meanwhile another
//     process may acquire it, with a greater token. Only a fence keeps the
//     resource correct in that window.
//   - A fence kept on the same server (package redisfence) is lost too: it
//     forgets the greatest token it accepted, so a stale holder's write is
//     accepted again until the new holder, whose token is greater, has
//     written once; from then on the stale token is refused. Keep fenced
//     data and its fence on a server that syncs every write, or accept that
//     window.
//
// What the store detects: every [Store] remembers, in memory, the greatest
// token the server reported to it (in grants, in [store.HeldError], in
// renewal results, in Get and List). A grant whose token is not greater
// than the greatest seen before the request was sent can only come from a
// counter that went backwards despite the clock (the clock was stepped
// back, or the counter had been raised ahead of it). Acquire then refuses
// it: it gives the tenure back, raises the counter to the greatest token
// seen plus [CounterRepairMargin], and fails with an error matching
// [ErrTokenWentBackwards] (not [store.ErrUnavailable]). A store that never
// saw the lost tokens cannot detect that case.
//
// Sentinel: connect through redis.NewFailoverClient, which follows the
// primary the sentinels name; during a failover calls fail with
// [store.ErrUnavailable] (READONLY from the demoted primary, cut
// connections) until the client has found the new one. A failover is a
// loss as above when the promoted replica lacks the last writes, which
// asynchronous replication allows. A test runs a primary, a replica and
// three sentinels, cuts the replica off, releases a lease and grants it
// to another holder on the primary alone, and fails over (SENTINEL
// FAILOVER): the new primary has forgotten the release and the grant, the
// holder of the lost grant is refused at its next renewal, and the next
// tenure, taken through a store that never saw the lost token, gets a
// greater one from the clock, although the promoted replica's counter is
// below it. The clock floor holds across a failover as long as the
// promoted replica's clock is not behind the old primary's (condition a
// above); Sentinel does nothing to ensure it, so keep the servers' clocks
// synchronised.
//
// What to do: run Redis with appendonly yes and appendfsync always, no
// asynchronous replica to fail over to, and maxmemory-policy noeviction,
// when leases guard work that must not run twice; keep the servers' clocks
// synchronised and never step them back. After an unclean restart or a
// failover onto a host whose clock may be behind, raise the counter above
// every token that may have been handed out: above the greatest token any
// fence recorded, or by a wide margin (redis-cli INCRBY tenure:token
// 1000000000 adds about 17 minutes of clock). Raising it is always safe;
// tokens only need to grow.
package redisstore
