// Package natsstore keeps tenure leases in a NATS JetStream key-value
// bucket: a [store.Store], [store.Notifier], [store.Lister] and
// [store.TTLFloor] over a [jetstream.JetStream] the caller creates
// (github.com/nats-io/nats.go).
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
//
// Every write is a publish with the revision the call read as the
// expected last revision of its key (Nats-Expected-Last-Subject-Sequence),
// so it is a compare-and-set: Acquire writes the held key only if no
// tenure was live when it read; Renew reads the held key, checks holder,
// token and seq (promise P6) and writes seq+1 only if nothing was written
// in between, so a clone whose seq moved on, or that lost the race, fails;
// Release writes its marker only over the tenure it checked.
//
// Round trips: Acquire 3 or 4 (read, write the held key, read and write
// the record key); Renew 2 per lease (read, write), the leases of a batch
// up to 64 at once: JetStream has no transaction that writes several keys
// with per-message TTLs and expected revisions, so a batch is pipelined,
// not one request; Release 2; Get 1, or 2 when the lease is not held; List
// 1 to list the record keys, then a Get per lease.
//
// # Clock
//
// Expiry is nats-server's: the server removes a held key when its message
// TTL runs out, by its own clock (promise P1); a held key that exists is
// held, and a renewal that finds it there extends it even when its TTL
// just ran out and the removal has not happened yet. No client clock
// decides anything. Consequences:
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
// A token is the revision of the message that began the tenure: the
// bucket stream's sequence number. JetStream's sequence is one counter per
// stream, raised by every message (renewals, releases, markers and record
// writes included) and never lowered by deleting or purging keys, by
// purging the whole stream (which moves its first sequence up) or by a
// restart of a server with file storage, so every new tenure of any lease
// gets a greater token (promise P2). Tokens are not consecutive.
//
// They start again at 1 when the bucket is deleted and created again, or
// when the store is pointed at another bucket or server: never do that
// while fences hold tokens of this one, or create the new bucket's stream
// with a first sequence (first_seq) above every token they recorded.
// [Open] cannot see a bucket's past, but it refuses buckets whose tokens
// could go back or whose leases could end other than by their TTL:
// memory storage (a restart empties the stream and restarts its
// sequence), mirrors and sourced streams, no per-key TTLs, a history of
// more than one value per key, a bucket-wide TTL and discarding old
// messages when full. [Migrate] creates a bucket that passes.
//
// # Notifications
//
// [Store.Listen] watches the held keys (a KV watch: an ordered consumer
// of new messages only) and reports a release (its marker), an expiry (the
// marker the server leaves, which is why the bucket has LimitMarkerTTL)
// and a new tenure (a takeover); renewals are not announced. After the
// connection reconnects, or when the watch ends, it watches again and
// reports the empty name, so followers look again at what they wait for
// (the ordered consumer would resume by itself, but only after missing its
// heartbeats for seconds). Correctness never depends on notifications.
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
