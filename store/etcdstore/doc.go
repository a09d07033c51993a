// Package etcdstore keeps tenure leases in etcd v3: a [store.Store] that
// keeps followers in line (without a hold; see The line), over a
// [clientv3.Client] the caller creates and closes; docs/STORES.md lists
// the optional interfaces of package store it implements. For data kept in etcd it also gives the fence inside
// the caller's own transaction: a token check ([Store.IsOwner]) and the
// strict, chain-advancing write ([Store.StrictTxn]).
//
//	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"127.0.0.1:2379"}})
//	...
//	store, err := etcdstore.New(cli, etcdstore.Config{KeyPrefix: "myapp/tenure/"})
//	client, err := tenure.New(store, tenure.Config{TTL: 30 * time.Second})
//
// # Clock
//
// Expiry is etcd's: the lessor of the cluster's leader expires etcd leases
// on the leader's monotonic clock, and deletes the held/ keys attached to
// them through raft. A held/ key that exists is held (promise P1); no
// client clock decides anything. Consequences:
//
//   - etcd counts lease TTLs in whole seconds: a TTL is rounded up to the
//     next second, and the granted time is what Acquire and Renew report
//     (Acquire less the age of the spare etcd lease it took, if it took
//     one: see etcd leases).
//   - etcd's minimum TTL is 2 s at its default election timeout of 1 s, and
//     the server silently raises shorter leases. The store refuses a TTL
//     below [MinTTL] (or above [MaxTTL]) with an error matching
//     [store.ErrInvalid] instead: a holder must never believe in a lease
//     shorter than the one it has. [Store.MinTTL] reports that floor
//     ([store.TTLFloor]), so a client refuses a shorter TTL when it is
//     made rather than at its first acquisition.
//   - The lessor looks for expired leases every 500 ms, so a key is deleted
//     up to half a second after its TTL, plus a raft round.
//   - When leadership moves, the new leader extends every lease by the
//     election timeout: a lease may outlive its TTL by that much, never the
//     other way. Holders are unaffected (they stand down on their own
//     deadline); followers wait a little longer.
//   - The time a lease has left, as reported by [Store.Get], [Store.List],
//     a [*store.HeldError] or a refused renewal, comes from etcd's
//     LeaseTimeToLive, which answers in whole seconds rounded down; the
//     store reports that plus one second (capped at the granted TTL), an
//     upper bound, so that a follower waiting for it does not come back
//     early. A refused acquisition adds the time etcd takes to delete an
//     expired lease's keys (see The line); followers hear of that
//     deletion anyway, and only wait for the expiry they were told when
//     the notice is lost (see Notifications).
//   - etcd has no clock a client can read: [store.Record.AcquiredAt] is the
//     acquiring process's wall clock, for people to read.
//
// # Tokens
//
// A token is the revision of the transaction that created the held/ key:
// its create revision. etcd's revision is one counter for the whole
// cluster, raised by every write and persisted in the raft log and the
// backend, so a later tenure of any lease always gets a greater token
// (promise P2): after a release, after an expiry, after every key of the
// store was deleted (a deletion is itself a write), after compaction
// (which discards old versions but never lowers the revision), and across
// restarts and leader changes. Tokens are not consecutive.
//
// A token tells tenures apart, not processes: two byte-identical clones of
// one holder (a snapshot restored twice) carry the same token, and a
// token check ([Store.IsOwner]) lets both write. [Store.StrictTxn] also
// compares and advances the renewal seq, so only one of them can.
//
// They go backwards only when the cluster's data does: restoring a
// snapshot taken before the last tokens were handed out, or pointing the
// store at another cluster. Restore with
// `etcdutl snapshot restore --bump-revision N --mark-compacted`, N larger
// than the number of writes since the snapshot, and tokens keep growing.
//
// # Notifications
//
// [Store.Acquire] and [Store.Release] announce each change in the
// transaction that makes it, by putting the announcement under
// announce/<name>: a new tenure with its holder and granted TTL
// ([store.NoticeAcquired]), a release with the head of the line
// ([store.NoticeReleased], Next). etcd expiring a lease writes no
// announcement (its lessor deletes the held/ key, and no code of this
// store runs then), so [Store.Listen] also watches the deletions under
// claim/ and held/: a release deletes its lease's claim/ key with the
// held/ key, in one revision, and a held/ key deleted alone was deleted by
// the lessor. That deletion is announced as it arrives, as
// [store.NoticeChanged]. Listen keeps these two watches and nothing else:
// renewals (puts of held/ keys), followers joining the line and the
// claim/ puts cost a listener nothing; it hears of handovers and expiries.
// The watches require a leader and are renewed from the last revision each
// delivered whenever one ends; if that revision was compacted meanwhile,
// the events in between are lost. Correctness never depends on
// notifications.
//
// An expiry's notice names nobody: to name the head of the line, each
// listener would read the line at each expiry. Every follower of the
// lease so tries at once (spread over at most 10 ms), one of them takes
// the lease and the others are refused and wait for its new tenure: one
// acquisition per follower, a herd, but only when a holder crashed or
// stalled, never on a clean handover, where the release names the head.
// A lease acquired by a version of this store that wrote no claim/ key
// has none to delete: its release reaches listeners as a release and as
// an expiry, that once.
//
// # The line
//
// A follower that asks to wait ([store.AcquireParams.Wait]) and is refused
// gets a key wait/<name>\x00<holder>, and keeps it when it asks again: its
// place is the key's create revision, first come first, and
// [store.HeldError].Position counts the keys created no later. The key
// lives on an etcd lease that ends twice the follower's TTL after the
// expiry it was told, so etcd forgets a follower that stops asking; an
// acquisition deletes the acquirer's key, whether it waited or not, and
// one that does not wait takes no place. A release names the head of the
// line (the oldest key) in its announcement; that follower tries at once,
// the others stay back for [store.Handoff] and hear of its new tenure
// meanwhile. A handover after a release so costs the store the release
// and the head's acquisition, however many wait.
//
// The store keeps no hold: a released lease is free at once, for anyone,
// and a refusal never names a follower in [store.HeldError].Next. A hold
// needs a time that ends it, decided inside a transaction, and etcd has no
// clock a transaction can compare; the only timer it offers, an etcd
// lease, lasts at least 2 s (its minimum TTL) and ends up to 500 ms late,
// which would keep a lease whose next follower died from everyone for
// three seconds instead of a quarter of one. Without it, a follower that
// does not wait may take the lease before the head of the line, and so
// may a follower behind the head whose timer runs out in the [store.Handoff]
// before the head's new tenure is announced; either takes the lease as it
// would without a line, with a greater token, and the line is never
// needed for correctness.
//
// After an expiry the line keeps no order: followers hear of the expiry
// when etcd deletes the held/ key (see Notifications), all try at once,
// and the first to arrive takes the lease. A takeover after a crash so
// comes when etcd deletes the key: at the TTL of the holder's last
// renewal (counted from its LeaseGrant, sent just before the renewal's
// transaction), plus up to the lessor's 500 ms sweep and a raft round,
// the watch event and the new holder's acquisition (one or two round
// trips).
//
// The expiry a refusal reports only matters when that notice is lost (a
// watch down or compacted past at that moment): it is the latest the
// held/ key may still exist, the holder's remaining time rounded up (see
// Clock) plus the lessor's 500 ms sweep, so that a follower comes back no
// earlier (it would only be refused again) and no later than 1.5 s after
// the TTL ran out (later only when a leader change extended the lease); a
// follower behind the head comes [store.Handoff] after that. Followers
// told at different times are told in whole seconds, so one behind the
// head may be told an earlier expiry than the head and take the lease
// first: without a hold, the line orders handovers after a release, not
// after an expiry. The reported expiry never extends a tenure: a follower
// is told more time, the holder never is.
//
// # History
//
// The etcd store keeps no history ([store.Historian]). etcd keeps one of
// its own: every grant and release is a revision of the lease's key, which
// a range or a watch at an older revision can read until the cluster
// compacts it. It is not offered because compaction runs on the cluster's
// schedule, not on a retention this store could promise, and a takeover
// after expiry is etcd deleting the key with the expired etcd lease,
// which no transaction of this store sees; recording it would need a
// watcher that is running at that moment. Use PostgreSQL or SQLite for
// leases whose history matters, or the holders' own logs.
//
// # Failure modes
//
//   - Transport failures, deadlines, a lost or changing leader, an overloaded
//     server and a full database (`mvcc: database space exceeded`) match
//     [store.ErrUnavailable]: the call may have been applied, and the
//     client treats its outcome as unknown (promise P3). Reads are
//     linearizable, so a member cut off from its leader cannot answer them.
//   - The etcd client waits for a connection while no endpoint answers:
//     calls without a deadline on their context block until one does.
//   - A Renew batch partly applied before an error is reported as the error;
//     the renewed leases' seqs moved on, so the holder, which stood down,
//     re-acquires with a new token.
//   - [Config.MaxTxnOps] above the server's --max-txn-ops makes large
//     batches fail with an error that names the setting; a server whose
//     --max-request-bytes is below 1.25 MiB (the default is 1.5 MiB), the
//     most the store puts in one request, fails them with an error that
//     names that flag.
//   - Keys under the prefix that this store did not write make calls on
//     their lease fail with an error naming the key.
//   - A [Store.StrictTxn] whose outcome is unknown (ErrUnavailable) ends
//     its chain write as not applied; if it did apply, the holder's next
//     renewal finds the seq moved and ends the tenure as a clone's.
//   - Bad input fails with [store.ErrInvalid] and changes nothing; after
//     [Store.Close] every call fails with [store.ErrClosed].
//
// # Keys
//
// Every lease name has up to seven keys under [Config.KeyPrefix], and one
// per follower in its line, each written only by the calls named, so
// that every change is one transaction that never reads before it writes:
//
//   - held/<name>: the holder, attached to an etcd lease. It exists exactly
//     while the lease is held. Its create revision is the token, its version
//     the renewal seq.
//   - claim/<name>: empty and on no etcd lease, put by [Store.Acquire] and
//     deleted by [Store.Release], each in the transaction that changes
//     held/<name>; an expiry leaves it. It tells listeners a release from
//     an expiry (see Notifications).
//   - start/<name>: the holder, start time and payload of the last tenure,
//     written by [Store.Acquire] in the transaction that creates
//     held/<name>.
//   - seq/<name>: the seq of the last renewal, so that an expired lease still
//     reports it.
//   - released/<name>: present when the last tenure was released rather
//     than expired.
//   - announce/<name>: the last announcement, put by [Store.Acquire] and
//     [Store.Release] (see Notifications).
//   - wait/<name>\x00<holder>: one follower in line, attached to an etcd
//     lease of its own, written by [Store.Acquire] (see The line). Names
//     hold no NUL, so wait/<name>\x00 is the prefix of that name's line
//     alone.
//
// # etcd leases
//
// Each [Store.Acquire] puts its keys on an etcd lease of their own: the
// store's spare of that TTL, granted in the background after the store's
// last acquisition with it, or, when there is none younger than a quarter
// of its TTL, one it grants on the caller's path; the tenure is reported
// shorter by the spare's age (see [spares]). Each [Store.AcquireBatch]
// grants one per distinct TTL for the keys it creates, and each
// [Store.Renew] one per distinct TTL in the batch, moving every lease it
// renews onto it. Leases that are not in the batch stay on the etcd lease
// they had and expire with it. The obvious design, one etcd lease per
// process kept alive with LeaseKeepAlive, cannot honour the contract: a
// keepalive extends every key on the lease, so a lease its holder stopped
// renewing (its work stalled, or it was given up and the release did not
// arrive) would live on for as long as the process renews any other, and a
// renewal could not change the TTL. The cost is one LeaseGrant (a raft
// entry) per renewal round instead of a keepalive, and a few empty etcd
// leases per process, each gone after its TTL. An Acquire that finds the
// lease held keeps the etcd lease it took as the spare.
//
// Round trips: Acquire 1 (the transaction) with a spare, 2 without (grant,
// transaction), and a grant in the background for the next spare; 2 or 3
// when the lease is held (also ask the holder's remaining time), 4 or 5
// when the caller also waits in line (grant the etcd lease of its wait/
// key, then put the key and count its place in one transaction). Renew 1
// grant per distinct TTL, then the transactions of the batch, sent
// concurrently, each carrying up to 3,906 leases (at the default
// [Config.MaxTxnOps]), plus 1 per distinct etcd lease of the current
// holders of entries that did not match. Release 1, 2 when someone waits in
// line (the first transaction finds the line not empty and reads its head;
// the second releases naming it). [Store.AcquireBatch] 1 grant per distinct
// TTL, then transactions of up to 3,660 acquisitions (at the default
// [Config.MaxTxnOps]), sent concurrently; the entries it finds held cost
// what Acquire's refusals cost beyond their transaction.
// [Store.ReleaseBatch] transactions of up to 3,721 releases, sent
// concurrently, plus 1 per lease someone waits for. Get 1, plus 1 when
// held. List 1, plus 1 per distinct etcd lease among the held leases.
// Nothing here grows with the number of followers but the count of the keys
// ahead of a waiting follower, which the server does.
//
// # Renewal chain
//
// A renewal is a nested transaction per lease comparing the held/ key's
// create revision with the token, its version with the seq and its value
// with the holder (promise P6); it writes the key again, which raises the
// version by one. A clone that renews with a seq that moved on fails the
// comparison and learns the current seq.
//
// # Fencing inside etcd
//
// When the protected resource is etcd itself, put [Store.IsOwner] in the
// transaction that writes: the write then commits only while the tenure is
// current, checked by the same server, in the same transaction (the etcd
// IsOwner pattern). A transaction that does not succeed must be treated as
// [store.ErrFenced]. The check is on the token only, so it passes for
// every clone of the holder.
//
// [Store.StrictTxn] is the strict form: one transaction that compares the
// held/ key's create revision (the token), version (the seq) and value
// (the holder) and, when they match, writes the key again on its etcd
// lease (advancing the seq, as a renewal does), the seq/ key, and the
// caller's operations. Of two clones only the one at the head of the
// renewal chain passes; the other gets a [*store.FencedError] saying that
// the chain moved on, and none of its operations apply. It takes the
// chain write of tenure's Lease.BeginChainWrite ([store.ChainWrite]) and ends
// it, so the holder's renewals carry the seq its writes advanced.
package etcdstore
