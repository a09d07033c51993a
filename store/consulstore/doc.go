// Package consulstore is a [store.Store] on Consul's KV store and sessions
// that keeps followers in line (without a hold; see The line);
// docs/STORES.md lists the optional interfaces of package store it
// implements. It gives Consul users the fence in their own transactions:
// a token check ([Store.FenceOps]) and the strict, chain-advancing write
// ([Store.StrictTxn]).
//
//	client, err := api.NewClient(api.DefaultConfig())
//	store, err := consulstore.New(client, consulstore.Config{})
//
// It needs Consul 1.14 or later (transactions of 128 operations) and was
// built and tested against Consul 1.16.3. The client's token needs key write
// on [Config.KeyPrefix] and session write on the agent's node.
//
// # Clock
//
// Expiry is Consul's session TTL, judged by the Consul leader's clock
// (promise P1): when a session is invalidated, Consul releases its locks in
// the same Raft write, and a lease whose record is not locked is not held.
// Consul guarantees a session lives at least its TTL after its creation or
// last renewal, and invalidates it between TTL and twice its TTL after
// that: the leader arms each session's timer with 2×TTL (its constant
// SessionTTLMultiplier), and a new leader re-arms every timer from its own
// start. So a lease may stay held up to one TTL longer than asked, more
// across a leader change. No setting of Consul's or this store's changes
// the multiplier; the only trade is the TTL itself: a shorter one (down to
// the servers' session_ttl_min, see below) shortens how long a crashed
// holder can keep a lease, at the cost of more renewals. The bound runs
// from the last renewal: a renewal either renews the lease's session or
// moves the lease to a session it creates (see Sessions and round trips).
//
// The remaining time the store reports is the session's TTL. For the
// holder, right after an acquisition or renewal, that is a safe lower
// bound: the session was created after the call was sent and lasts at least
// that long. For anyone else (a [*store.HeldError], [Store.Get],
// [Store.List]) it is an estimate, because Consul does not say when a
// session was created: the lease may end any time within twice that.
// Followers are woken earlier by [Store.Listen] when the lease is released
// or acquired, and the follower at the head of the line also when it
// expires (see Notifications).
//
// Consul refuses session TTLs below its servers' session_ttl_min (10 s by
// default) and above 24 h. [Store.MinTTL] reports [Config.MinSessionTTL]
// as the store's floor ([store.TTLFloor]), so a [github.com/tenure-dev/tenure.Client] refuses a
// shorter TTL when it is made: a lease of 500 ms held with a 10 s session
// would outlive a crashed holder by up to 20 s. A caller that asks the
// store directly for a shorter TTL still gets a session of
// [Config.MinSessionTTL], reported as the remaining time. Lower
// session_ttl_min on the servers, and [Config.MinSessionTTL] with it, for
// faster failover. A TTL above 24 h is
// refused with [store.ErrInvalid]. AcquiredAt, for people only, is the
// acquiring client's wall clock: Consul keeps no time on keys.
//
// # Tokens
//
// An acquisition bumps the counter key with a compare-and-set on its
// ModifyIndex, in the same transaction that locks the lease record, and the
// new ModifyIndex, the index of that Raft write, is the token. Raft indexes
// only grow across the whole cluster, so every new tenure's token is greater
// than every token handed out before (promise P2) even when the record, or
// the counter too, is deleted; deleting a held lease's counter makes its
// holder's next renewal fail. Tokens are large and not dense, and are shared
// by every name. A cluster restored from an older snapshot can hand out a
// token again; keep Consul's Raft data durable (it is, unless the servers
// run with -dev).
//
// A token tells tenures apart, not processes: two byte-identical clones of
// one holder (a snapshot restored twice) carry the same token, and a
// token check ([Store.FenceOps]) lets both write. [Store.StrictTxn] also
// compares and advances the renewal seq, so only one of them can.
//
// The key's LockIndex is not used: it counts lock acquisitions, which this
// store makes at every renewal, and it restarts when the key is deleted.
//
// # Notifications
//
// Every acquisition and every release also rewrites one announcement key,
// <prefix>.announce, in the transaction that makes the change: a
// compare-and-set that counts the announcements under the prefix and keeps
// the latest eight, each the lease name and the notice as tenure's other
// stores write it: a new tenure with its holder and session TTL
// ([store.NoticeAcquired]), a release with the head of the line
// ([store.NoticeReleased], Next; see The line). [Store.Listen] runs
// blocking queries on that key alone and delivers each announcement as
// written; an entry written by an older version of this store, which
// recorded no notice, reads as a [store.NoticeChanged] of its lease. When
// more came than the key keeps since it last looked, it delivers the empty
// notice (look at everything again).
//
// A batch ([Store.AcquireBatch], [Store.ReleaseBatch]) announces each
// transaction's changes with one compare-and-set of the key, each change
// an announcement of its own. A transaction carries up to 31 acquisitions
// or 63 releases, more than the key keeps, so a listener that did not look
// while one went by hears the empty notice and looks again at every lease
// it waits for, as [store.Notifier] allows. The key is not made longer for
// batches: every listener reads all of it at every announcement.
//
// A listener costs one query per announcement and one a minute when
// nothing happens, however many leases live under the prefix; renewals do
// not wake it. Watching for expiries (below) adds one query per lease the
// store is first in line for.
//
// A client listens through a subscription ([Store.Subscribe]), which runs
// those queries only while it follows a lease its store does not hold (by
// the store's own last write to it, which each renewal refreshes), that
// is, while a follower of the client waits: a process that only holds its
// leases makes no listening request at all, and its idle cost is its
// renewals (TestIdleHolderMakesNoListenRequests counts it). The price: a
// holder hears of an operator's release of its lease, or of a takeover,
// from its next renewal, within a renew interval, rather than at once.
// A subscription reads the announcement key once when its Listen begins,
// and its watch, whenever it starts (a follower begins to wait), delivers
// the announcements made since (the empty notice when more came than the
// key keeps), so a release made while the watch was starting is heard.
//
// Expiries are not announced: Consul invalidating a session runs no code of
// this store's, so no transaction of the store's writes the announcement
// key for it. Consul does unlock the lease record when it invalidates the
// holder's session (that write changes the record's ModifyIndex and clears
// its Session), so a blocking query on the record sees the expiry as soon
// as Consul makes it, as one on the lock's key does for Consul's own
// api.Lock. A query per lease for every listener would cost each listener
// every lease under the prefix, and tell every follower at once; the
// store keeps it for the one follower that needs it. When a refusal puts a
// follower first in line ([store.HeldError].Position 1, see The line), the
// store remembers that it is the head of that lease's line, and while a
// [Store.Listen] call runs it keeps one blocking query on that lease's
// record. When the query finds the record unlocked and not released, every
// Listen call of the store delivers a [store.NoticeChanged] of the lease,
// the kind etcdstore gives an expiry (the lease is free; the notice names
// no next follower and no new holder), and the head of the line tries at
// once instead of at the expiry it was told, which with Consul's 2×TTL may
// be up to one TTL late. A failover after a crash so lasts Consul's
// invalidation and the head's acquisition, as with Consul's own api.Lock.
//
// The store forgets a head when its follower acquires the lease through
// this store, when a refusal tells it a later place, and twice the TTL of
// the session that keeps its place after it last asked (by then Consul has
// forgotten a follower that stopped asking), or when the lease's record
// is deleted; forgetting ends its query.
// The queries are shared by the store's Listen calls and number at most
// 32; a process first in line for more leases than that is told of some
// of their expiries only, and tries at the told expiry for the others.
// A head's query also wakes at each renewal of its lease, since a renewal
// rewrites the record: the cost is one blocking query per lease this
// store is first in line for, each asked again at every renewal of that
// lease, and nothing for the leases the store's holders hold.
//
// Followers behind the head are not told of the expiry (no herd: one
// expiry costs the store the head's acquisition); they hear of the head's
// new tenure, which is announced, or else try at the expiry they were
// told. A notice carries a lease name, not a follower, so every Listen
// call of the head's store delivers it: followers of that lease that share
// the head's store (several clients over one store) try as well.
//
// Because the announcement key is a compare-and-set, acquisitions and
// releases of different leases under one prefix are serialized: one that
// loses the race reads and tries again (a round trip and a transaction
// more). Give unrelated fleets their own prefixes. Notifications are an
// optimisation only: one missed while the agent is unreachable delays a
// follower until the expiry it was told.
//
// # The line
//
// A follower that asks to wait ([store.AcquireParams.Wait]) and is refused
// gets a key wait/<holder> in the lease's directory, and keeps it when it
// asks again: its place is the key's CreateIndex, first come first, and
// [store.HeldError].Position counts the keys created no later. The key is
// locked by a session of the follower's own, with no health checks, no
// lock-delay and behaviour delete, so that Consul deletes the key when the
// session ends and no clock of a client decides anything. Its TTL is half
// of the holder's remaining time (as the refusal reported it) plus the
// follower's TTL: Consul arms a session's timer with twice its TTL, so a
// follower that stops asking is forgotten twice its TTL after the expiry
// it was told. By Consul's weaker promise alone (a session lives at least
// its TTL) it is kept half as long, which is still past that expiry unless
// the holder's remaining time exceeds twice the follower's TTL (followers
// of one [github.com/tenure-dev/tenure.Config] share the holder's TTL).
// The session's TTL is at least [Config.MinSessionTTL] and at most
// [MaxSessionTTL]. A follower that asks again
// renews that session, without a Raft write, and keeps its key; one whose
// session ended takes a new place at the end. An acquisition deletes the
// acquirer's key in its transaction, whether it waited or not, and
// destroys the session that kept it in the background; one that does not
// wait takes no place. A session per follower rather than a deadline in
// the key, pruned by whoever reads the line, keeps the clocks of the
// followers out of it and costs a follower one session while it waits; a
// single session for every follower of a process could not forget one
// follower without the others.
//
// A release names the head of the line (the oldest key) in its
// announcement, found by the read the release makes anyway; that follower
// tries at once, the others stay back for [store.Handoff] and hear of its
// new tenure meanwhile. A handover after a release so costs the store the
// release and the head's acquisition, however many wait.
//
// The store keeps no hold: a released lease is free at once, for anyone,
// and a refusal never names a follower in [store.HeldError].Next. A hold
// needs a time that ends it, decided inside a transaction, and Consul's
// transactions read no clock (they take KV, node, service and check
// operations, none of which compares a time); the only timer it offers, a
// session, lasts at least the servers' session_ttl_min (10 s by default)
// and ends anywhere up to twice its TTL, so a lease kept for a head of the
// line that died while waiting would be kept from everyone for seconds
// instead of a quarter of one. Without it, a follower that does not wait
// may take the lease before the head, and so may a follower behind the
// head whose timer runs out before the head's new tenure is announced;
// either takes the lease as it would without a line, with a greater token,
// and the line is never needed for correctness. Nor does the line ever
// lengthen a tenure or delay a takeover: it is read only for a refusal's
// Position and a release's Next, and no acquisition or renewal checks it.
//
// After an expiry the head of the line hears of it first: its store,
// which answered it with place 1, watches the lease while it listens (see
// Notifications), and it tries as soon as Consul unlocks the record. The
// others come back at the expiries they were told, which may fall before
// Consul's invalidation (the lease is then still held) or after the head's
// new tenure (they hear of it), so the head takes the lease unless a
// follower comes back in the round trip between. No order is promised:
// a head whose store does not listen, or whose query missed the expiry,
// leaves the lease to the first follower to arrive.
//
// # History
//
// The Consul store keeps no history ([store.Historian]). The announcement
// key keeps only the latest eight announcements, for listeners, and is no
// history: an expiry is Consul invalidating the session, which
// releases or deletes the key with no hook this store runs in, so a
// takeover after expiry could not be told from a grant after a release,
// and each event key would need a retention of its own (Consul keys do not
// expire). Use PostgreSQL or SQLite for leases whose history matters, or
// the holders' own logs.
//
// # Failure modes
//
//   - A request that gets no answer (agent down, connection cut, the call's
//     context ending, 5xx answers such as "No cluster leader" or rate
//     limits) fails with an error matching [store.ErrUnavailable]: it may
//     have been applied. A [Store.Renew] may have renewed part of its batch
//     before failing; the renewal chain (seq) lets the client tell a lost
//     reply from a clone.
//   - Talking to a client agent adds its RPC to the servers to every round
//     trip; a client agent that cannot reach the servers answers with 5xx
//     (ErrUnavailable). Sessions are bound to that agent's node: if the node
//     is deregistered, its sessions and so its leases end.
//   - ACL refusals are returned as plain errors naming the permissions
//     needed; retrying cannot help.
//   - A value under the prefix that this store did not write fails the
//     calls that read it; give every program its own prefix.
//   - A [Store.StrictTxn] whose outcome is unknown (ErrUnavailable) ends
//     its chain write as not applied; if it did apply, the holder's next
//     renewal finds the seq moved and ends the tenure as a clone's.
//   - [Store.Close] ends Listen and refuses later calls with
//     [store.ErrClosed]; it destroys no session that holds a lease, so held
//     leases stay held until released or expired. It waits up to two
//     seconds for the destruction of sessions already found empty.
//
// # Keys
//
// Each lease name has a directory under [Config.KeyPrefix]: the name with
// every byte outside ASCII letters, digits, '-', '_' and '.' written as %XX
// (and a leading '.' too), so "billing" lives in tenure/billing/ and "a/b"
// in tenure/a%2Fb/. The announcement key, <prefix>.announce, sits next to
// the directories (no directory starts with '.'). Each directory holds two
// keys, and one more per follower in line:
//
//   - lease: the lease record, JSON with the holder's label and instance,
//     seq, the session TTL in milliseconds (ttl_ms), acquired_at, released
//     and the holder's payload. While the lease is held it is locked by a session.
//   - counter: the token counter. Its value is the number of tenures so
//     far; its ModifyIndex is the current tenure's token. The store never
//     deletes it.
//   - wait/<holder>: one follower in line (see The line), JSON with its
//     label and instance, locked by the session that keeps its place. The
//     segment is the label and the instance joined by a NUL, escaped as a
//     name is, so that every holder has a key of its own.
//
// # Sessions and round trips
//
// Every acquisition creates a session for the new tenure (holder, TTL,
// [Config.LockDelay], release behaviour, no health checks: only its TTL or
// an operator ends it); a batch of acquisitions ([Store.AcquireBatch])
// creates one such session per distinct TTL and puts every lease it grants
// with that TTL into it, since Consul creates sessions one request at a
// time and never inside a transaction. The leases of a shared session stay
// independent: a release unlocks its own record only, a renewal of some of
// them moves those to a new session (see Moved below) and leaves the
// others to expire on time, and a renewal of all of them renews the
// session in place. A renewal checks, for each lease, the record's
// ModifyIndex and the counter's with the token (the compare-and-set on
// holder, token and seq, promise P6) and writes seq+1, in one transaction
// per batch of leases. It keeps each lease's expiry its own in one of two
// ways:
//
//   - In place: when the batch is exactly the leases this store put into
//     one session (the usual case: a holder renewing what it holds), it
//     renews that session (/v1/session/renew, which Consul answers from
//     the leader's timers without a Raft write) and then sends the
//     compare-and-set, which keeps the record's lock.
//   - Moved: otherwise it creates one new session per distinct TTL in the
//     batch and moves each lease into it (an unlock by the old session and
//     a lock by the new one in the same transaction). A lease left out of
//     the batch stays in its old session, which is no longer renewed, so
//     it expires on time even while its holder renews other leases.
//
// Consul cannot renew, create or destroy a session inside a transaction
// (its /v1/txn takes KV, node, service and check operations only), and
// cannot compare a key's value, only its ModifyIndex, so a renewal takes
// two requests at least: one for the session, one transaction for the
// compare-and-set. The session comes first, so a renewal reported
// renewed has its session extended after the call was sent.
//
// To skip the read a compare-and-set on a ModifyIndex would need, the
// store remembers its own last write to each lease (the tenure, the
// record's ModifyIndex, the session) and which leases it put into each
// session it created; it never puts a lease into a session it did not just
// create. A renewal that presents exactly the tenure last written sends
// its compare-and-set on that index at once. The index is a hint only: if
// the record changed in any way, the transaction fails, and the store
// reads the lease and decides on what it read, as it does for a lease it
// has no write of (acquired through another store, or advanced by
// [Store.StrictTxn]). What the store remembers of a session decides
// whether a renewal may renew it in place, so it errs one way only: it may
// count a lease in a session that left it (the renewal then moves the
// batch), never miss one that is in it. A session a renewal may have
// moved leases into without knowing (its transaction's outcome unknown)
// is never renewed in place, and the leases of a session last written
// more than twice its TTL ago are forgotten together. A copy of the
// process (a fork, a restored snapshot) carries the same memory; it can
// renew a shared session at most once before its compare-and-set fails
// and its holder stands down.
//
// A session none of whose leases is in it any more (released, moved by a
// renewal, taken over) is destroyed in the background, after the call
// returns; one that could not be destroyed (the agent unreachable, the
// store closed) expires by itself within twice its TTL. A store that did
// not create a session (a release through another store) leaves it to
// expire.
//
// Round trips, each one HTTP request to the agent, on the caller's path
// (n leases, of which f are free, r held as given):
//
//   - Acquire: one consistent read (the lease, its line and the
//     announcement key); when the lease is free, one session creation and
//     one transaction more, which also takes the acquirer out of the line
//     (three requests, as without a line; the session that kept its place
//     is destroyed in the background). The session is created while the
//     read is in flight unless the store expects a refusal, so a free
//     lease costs two round trips' time: the store expects one when it
//     holds the lease by its own last write, or saw it held (a refusal, or
//     an acquisition its Listen heard) less than twice the remaining time
//     ago, or kept for another follower by a release (made or heard) less
//     than [store.Handoff] ago; a release its Listen hears ends that. A
//     refusal that guessed wrong waits for the creation, a Raft write, and
//     destroys the session in the background. A transaction that lost the
//     race for the announcement key to another lease's acquisition or
//     release costs a read and a transaction more, with the same session.
//     Refused, the read alone; refused when it waits in line, one session
//     renewal more to keep its place (two round trips), or one session
//     creation and one transaction, which locks its key and reads the line
//     for its place, to take one (three). Nothing here grows with the
//     number of followers but the size of the reads that list the line.
//   - AcquireBatch: ⌈(n+1)/128⌉ consistent reads (the leases, their lines
//     and the announcement key), one session creation per distinct TTL
//     among the free leases (while the first read is in flight, for the
//     TTLs of the entries the store expects free, as for Acquire), and
//     ⌈f/31⌉ transactions (four operations a lease and one announcement),
//     sent one after the other since each compares and sets the
//     announcement key: three requests up to 31 free leases of one TTL,
//     as one Acquire; 42 for 1,000. A transaction
//     rolled back because a lease or the announcement key changed costs a
//     read of what changed and the transaction again. An entry refused
//     that waits in line costs what Acquire's refusal costs beyond its
//     read, each. An error for the whole call destroys the sessions it
//     created, in the background, with whatever they hold.
//   - Renew of n leases with one TTL, in place: one session renewal and
//     ⌈n/64⌉ transactions; two round trips up to 64 leases, and one Raft
//     write per transaction.
//   - Renew, moved: one session creation and ⌈n/32⌉ transactions, plus
//     ⌈n/128⌉ consistent reads for leases the store has no matching write
//     of; and in the background, one destruction per session the leases
//     left empty (Consul would otherwise spend the same Raft write
//     invalidating it, up to twice its TTL later).
//   - Release: one consistent read (which also finds the head of the line)
//     and one transaction, and the session's destruction in the background
//     when it is empty.
//   - ReleaseBatch: ⌈(n+1)/128⌉ consistent reads and ⌈r/63⌉ transactions
//     (two operations a lease and one announcement): two round trips up
//     to 63 leases; races as for AcquireBatch.
//   - Get and List: one consistent read.
//
// Off the caller's path, [Store.Listen] (and a subscription while its
// client waits for a lease) keeps one blocking query on the
// announcement key, and one more per lease this store is first in line
// for (at most 32, shared by all of the store's Listen calls; see
// Notifications). The first returns at each announcement, each of the
// others at each change to its lease's record (the holder's renewals
// included), and every one after a minute without change. None grows with
// the leases the store's holders hold or with the followers behind the
// head.
//
// Reads use ?consistent, so a leader that lost its quorum cannot answer
// them from stale state.
//
// # Lock-delay
//
// When a session is invalidated without a clean release (its TTL ran out, an
// operator destroyed it), Consul refuses to lock its keys again for the
// session's lock-delay, by the leader's clock. Consul's default is 15 s and
// is meant for locks without fencing; this store sets [Config.LockDelay]
// explicitly on every session, 0 unless configured, because its leases carry
// a fencing token and the delay would only slow failover. During a
// lock-delay, [Store.Acquire] reports the lease as held by its last holder,
// with the configured delay (at least a second) as remaining time. A clean
// [Store.Release] unlocks the record instead of invalidating a session, so
// it sets off no lock-delay.
//
// # Fencing in Consul transactions
//
// [Store.FenceOps] returns a check-index on the lease's counter key with the
// token as index: put it first in a transaction of your own and the
// transaction applies only while no newer tenure has begun, the Consul form
// of etcd's Mutex.IsOwner. [Store.FenceError] turns the failed transaction
// into a [*store.FencedError]. The check is on the token only, so it
// passes for every clone of the holder.
//
// [Store.StrictTxn] is the strict form, in two round trips: a consistent
// read of the lease record, checked for the writer's holder, token and
// seq, then one transaction of a compare-and-set of the record on the
// ModifyIndex just read (writing seq+1; a set keeps the session's lock), a
// check-index of the counter on the token, and the caller's operations.
// Of two clones only the one at the head of the renewal chain passes; the
// other gets a [*store.FencedError] saying that the chain moved on (or
// that another tenure holds the lease, or nobody does), and none of its
// operations apply. It takes the chain write of tenure's
// Lease.BeginChainWrite ([store.ChainWrite]) and ends it, so the holder's
// renewals carry the seq its writes advanced.
package consulstore
