// Package natsstore keeps tenure leases in a NATS JetStream key-value
// bucket: a [store.Store] over a [jetstream.JetStream] the caller creates
// (github.com/nats-io/nats.go); docs/STORES.md lists the optional
// interfaces of package store it implements.
// It needs nats-server 2.11 or later, for per-key (per-message) TTLs; it
// is tested against nats-server 2.15.
//
//	nc, err := nats.Connect("nats://127.0.0.1:4222")
//	js, err := jetstream.New(nc)
//	err = natsstore.Migrate(ctx, js, natsstore.Config{}) // once; or `tenure migrate`
//	st, err := natsstore.Open(ctx, js, natsstore.Config{})
//	client, err := tenure.New(st, tenure.Config{TTL: 30 * time.Second})
//
// # Keys
//
// A lease has two keys in the bucket, named by the lease name in base64url
// (KV keys are restricted to a few ASCII characters):
//
//   - h.<name>, the held key: the live tenure (holder, token, seq and the
//     holder's payload, [store.AcquireParams.Payload]), written
//     with a per-message TTL. It exists exactly while the lease is held.
//     A release overwrites it with a deletion marker that carries the
//     released tenure; when the TTL runs out the server removes it and
//     leaves a marker of its own for [MarkerTTL].
//   - r.<name>, the record key: the latest tenure's holder, token, start and
//     payload, without TTL, for [Store.Get] once the held key is gone.
//   - w.<name>, the line key: the followers waiting for the lease, in
//     order (see The line); written only when someone waits.
//
// Every write is a publish with the revision the call read as the
// expected last revision of its key (Nats-Expected-Last-Subject-Sequence),
// so it is a compare-and-set: Acquire writes the held key only if no
// tenure was live when it read; Renew reads the held key, checks holder,
// token and seq (promise P6) and writes seq+1 only if nothing was written
// in between, so a clone whose seq moved on, or that lost the race, fails;
// Release writes its marker only over the tenure it checked.
//
// Round trips: Acquire 4 (read the held key; read the record key and the
// server's clock, at once; write the held key; write the record key), or
// 1 when refused, plus reading and, when it changes, writing the line for
// a follower that waits;
// Renew 3 per lease (read, write, read back: see Failure modes), the
// leases of a batch up to 64 at once: JetStream has no transaction that
// writes several keys with per-message TTLs and expected revisions, so a
// batch is pipelined, not one request; Release 2 (the held key and the
// line read at once, then the marker written); Get 1, or 2 when the
// lease is not held; List 1 to list the record keys, then a Get per lease.
//
// # Clock
//
// Expiry is nats-server's: the server removes a held key when its message
// TTL runs out, by its own clock (promise P1); a held key that exists is
// held, and a renewal that finds it there is stored even when its TTL
// just ran out and the removal has not happened yet, but then reported
// as of unknown outcome (see Failure modes). No client clock decides
// anything. Consequences:
//
//   - The server keeps message TTLs in whole seconds, at least one, and
//     truncates finer ones. The store rounds a TTL up to the next second
//     (a holder must never believe in a lease longer than the server's)
//     and reports the granted time; it refuses a TTL below [MinTTL], which
//     [Store.MinTTL] reports ([store.TTLFloor]).
//   - The server's expiry timer may fire up to about a second late, plus a
//     write of the marker; a lease never ends early.
//   - nats-server reports no remaining time and no clock a client can read
//     in the same request. The time a held lease has left, as [Store.Get],
//     a [*store.HeldError] or a refused renewal report it, is therefore the
//     full TTL of its last write: an upper bound, since that write happened
//     before the read. A follower told so waits at most one TTL too long,
//     and hears of the expiry earlier through [Store.Listen].
//   - For the same reason grants carry no store time ([store.Grant.At] is
//     zero), so a holder cannot tell that the server's clock stepped
//     forward, which expires leases early: run NTP that slews rather than
//     steps, and rely on the fence.
//   - [store.Record.AcquiredAt] is the acquiring process's wall clock, for
//     people to read.
//
// # Tokens
//
// A new tenure's token is max(last + 1, the server's clock in
// microseconds), where last is the greatest token the lease's keys name
// (the held key's released tenure, the record key) and the clock is the
// wall clock of the server that keeps the stream, read with a stream info
// request after the held key was read. A renewal keeps the token. The
// Redis store makes its tokens the same way. last + 1 makes tokens grow
// while the stream keeps its messages, whatever the clock does; the clock
// makes them grow when the stream lost its last messages:
//
//   - nats-server acknowledges a write before it is on disk (it syncs its
//     files every two minutes unless sync_always is set), so a power loss
//     of the host of a one-replica bucket can lose the stream's last
//     messages and move its sequence back. The tokens handed out in the
//     lost tail were made from clock readings before the loss; the next
//     ones read a later clock.
//   - A bucket deleted and created again, or the store pointed at another
//     bucket or server, keeps no last token; the clock keeps new tokens
//     above the old ones.
//
// The floor holds as long as the server's clock, after the loss, is ahead
// of where it stood when the lost tokens were made: it must not step back
// (run NTP that slews rather than steps), and a replica that takes over a
// cluster's stream must not be behind. A token comes from last + 1, above
// the clock, only after the clock went back; then a tenure whose record
// write failed (its acquisition reported no grant) and whose held key
// expired may see its token handed out again.
//
// Tokens are not consecutive: they are about the microseconds since 1970,
// below 2^53 (exact in a double) until the year 2255. Earlier versions of
// this store took the stream sequence, far below the clock, as the token;
// such a process still acquiring in the bucket hands out tokens that
// fences refuse (its holder gets [store.ErrFenced] and overwrites
// nothing) until it is upgraded. A tenure it began reads as before (the
// revision of its first message is its token) and is a floor as any.
//
// [Open] cannot see a bucket's past, but it refuses buckets whose tokens
// could go back or whose leases could end other than by their TTL:
// memory storage (a restart empties the stream), mirrors and sourced
// streams, no per-key TTLs, a history of more than one value per key, a
// bucket-wide TTL and discarding old messages when full. [Migrate]
// creates a bucket that passes.
//
// # Notifications
//
// [Store.Listen] watches the held keys (a KV watch: an ordered consumer
// of new messages only) and reports a release (its marker:
// [store.NoticeReleased], naming the head of the line), an expiry (the
// marker the server leaves, which is why the bucket has LimitMarkerTTL:
// [store.NoticeChanged]) and a new tenure (a takeover:
// [store.NoticeAcquired], with its holder and TTL); renewals are not
// announced. After the
// connection reconnects, or when the watch ends, it watches again and
// reports the empty name, so followers look again at what they wait for
// (the ordered consumer would resume by itself, but only after missing its
// heartbeats for seconds). Correctness never depends on notifications.
//
// # The line
//
// Followers that ask to wait ([store.AcquireParams.Wait], as every
// campaign does) are kept in line, first come first, in the lease's line
// key, written with the refusal's compare-and-set on its revision: a
// refusal reports the follower's place ([store.HeldError].Position). A
// follower that stops asking is forgotten twice its TTL after the expiry
// it was told (by the server's time of the held key's last write); the
// holder of the lease leaves the line when it is next read. A release
// reads the line with the held key and names its head in the marker it
// writes, which Listen announces as the [store.NoticeReleased]'s Next: the
// head tries at once, the others stay away for [store.Handoff], and hear
// of the head's new tenure ([store.NoticeAcquired]), which sends them back
// to its expiry. A handover so costs the store the release and the head's
// acquisition however many wait (TestHandoverToTheHeadOfTheLine: four
// followers, one acquisition; every one of them tried before the line).
// The store keeps no hold: nats-server cannot end one by its own clock, so
// a released lease is free at once for any follower, as in etcd; a head
// that died while waiting delays the others by [store.Handoff].
//
// # Failure modes
//
//   - Transport failures, timeouts, a stream without a leader and a full
//     store match [store.ErrUnavailable]: the call may have been applied,
//     and the client treats its outcome as unknown (promise P3). A missing
//     bucket matches [store.ErrNotMigrated].
//   - Reads use JetStream's direct get when the bucket allows it (Migrate's
//     buckets do); in a cluster a replica may answer from slightly behind.
//     A stale read can only make a compare-and-set fail or a follower
//     wait: every write is checked by the stream's leader.
//   - A Renew batch with an error in any entry is reported as the error;
//     the entries renewed meanwhile moved their seq on, so the holder,
//     which stood down, acquires again with a new token.
//   - An acquisition whose record write fails is reported as unavailable
//     although its tenure began; the lease then expires by its TTL. Until
//     a later record write, [Store.Get] of that lease after its expiry
//     names the tenure recorded before.
//   - An expired lease reports the seq its tenure began with: renewals
//     write only the held key, and the server's expiry marker carries
//     nothing. A released lease reports its last seq.
//   - A power loss of the host of a one-replica bucket (or of every
//     replica at once) can lose up to two minutes of writes that
//     nats-server had acknowledged: a lease acquired in them reads as
//     free, so a second holder can be let in while the first works on
//     until its next renewal fails (the fence keeps them apart: tokens
//     still grow, see Tokens); a lease released in them reads as held
//     until its TTL runs out. Replicas on separate hosts ([Config.Replicas]
//     3), or sync_always in the servers' jetstream configuration, keep
//     acknowledged writes.
//   - nats-server can acknowledge a renewal and then undo it (seen with
//     2.15.2): it ends a held key whose TTL ran out in two steps with no
//     lock between, deciding to, then writing its expiry marker as a
//     rollup of the key with no expected revision, so a renewal stored
//     between the steps is replaced by the marker (four of about 17,000
//     renewals stored around their keys' expiry, on one server on
//     loopback). Renew therefore reads every renewal back. One that was
//     replaced is reported as not renewed, with the lease as it is; one
//     that stands but was stored once the TTL of the write it replaced had
//     run out, by the server's clock (the message times the server
//     stamps), may still be replaced and fails with
//     [store.ErrUnavailable], so its holder stands down. Only a renewal
//     stored before that TTL ran out, which the server cannot have
//     decided to end, is reported as renewed. That needs a server clock
//     that does not step back (see Tokens). It is reasoned from a single
//     server's code; for a cluster, whose leader stamps a message before
//     the replicas store it, it is not verified.
//   - Keys in the bucket that this store did not write make calls on their
//     lease fail with an error naming the key's revision.
//   - Bad input fails with [store.ErrInvalid] and changes nothing; after
//     [Store.Close] every call fails with [store.ErrClosed].
//
// # Credentials
//
// NATS permissions are per subject, and a lease's writes are publishes to
// its keys' subjects, $KV.<bucket>.h.… and $KV.<bucket>.r.…: credentials
// that can run the store can publish anything, with any headers, to any
// key of its bucket. More than the lease protocol, then: a worker can
// forge, end or take over any tenure in the bucket, and write whatever
// the store reads from a key. No configuration of the server limits that
// within a bucket; give workers that must not touch each other's leases
// buckets of their own, and rely on fences, which refuse a token below
// one they accepted whatever a key says.
//
// What permissions do limit is everything outside the bucket.
// docs/nats-accounts.conf is an account whose worker user may publish
// only to $KV.<bucket>.>, to the bucket stream's STREAM.INFO,
// DIRECT.GET, STREAM.MSG.GET, CONSUMER.CREATE and CONSUMER.DELETE
// JetStream API subjects and to its consumers' flow control replies
// ($JS.FC.KV_<bucket>.>), and subscribe only to _INBOX.>, for its
// replies (so the account should hold tenure's users alone): it cannot
// reach another bucket, stream or subject, nor delete, purge or
// reconfigure its bucket's stream ([Migrate] needs the operator). TestWorkerAccount runs
// the store as that user against a nats-server with that file, and shows
// every other publish refused.
package natsstore
