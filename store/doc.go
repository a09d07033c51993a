// Package store is the contract between tenure's lease client and the
// stores that keep leases: the page for whoever writes a backend. It
// imports only the standard library.
//
// A backend implements [Store]: Acquire, a batched Renew, Release, Get and
// Close. Optional capabilities are separate interfaces, found by type
// assertion: [Notifier] (announce releases and takeovers, so followers need
// not wait for the expiry they were told), [Subscriber] (hand a listener
// only the announcements of the names it follows, so that clients sharing
// a store each hear of their own leases; see [Subscribe]), [Lister]
// (enumerate leases, for status pages), [TTLFloor] (a store that cannot
// keep leases as short as [MinTTL]), [TTLUnit] (a store that keeps TTLs in
// a coarser unit than the nanosecond, so that a client refuses a TTL it
// would round), [BatchAcquirer] and [BatchReleaser] (many acquisitions or
// releases in one round trip, so a client holding thousands gives them
// back at shutdown in a few calls; without them a client makes one call
// per lease), [Historian] (a record of grants, takeovers and releases, for
// people: `tenure history`), [ForceReleaser] (a release recorded as an
// operator's) and [Windower] (a job at most once per window: see
// Windows). Which backend implements which is in one table,
// docs/STORES.md, generated from the code. Assert each at compile time:
//
//	var (
//		_ store.Store    = (*Store)(nil)
//		_ store.Notifier = (*Store)(nil)
//	)
//
// Every backend passes the conformance suite in
// [github.com/tenure-dev/tenure/store/storetest] against its real server,
// its failures included: calls while the server is cut off or down, and
// tokens after a restart.
//
// # What a store promises
//
//   - It owns time (promise P1): every expiry is decided on the store's
//     clock, inside the call's one atomic operation. A client's clock is
//     never consulted.
//   - Tokens only go up (P2): every new tenure of a name gets a token
//     greater than every token handed out before for that name, across
//     releases, restarts and deleted records; a renewal keeps it.
//   - Renewals are a chain (P6): a renewal is a compare-and-set on holder,
//     token and seq that advances seq by one, so that of two clones only
//     one can renew.
//   - Every compare-and-set is spelled out in the params; a store keeps no
//     hidden state that decides one. Every answer reports the lease as it is
//     ([Grant]: holder, token, seq, remaining time by the store's clock),
//     refusals included ([HeldError]), so that a follower retries exactly
//     when the lease can expire.
//   - Followers may wait in line ([AcquireParams].Wait): a store that keeps
//     a line reports each follower's place and, after a release, announces
//     the head of the line ([Notice]) and keeps the lease for it for
//     [Handoff] (where the store can end a hold by its own clock; etcd
//     cannot, and keeps none). The line orders followers; it never grants
//     a lease early or extends one.
//
// # History
//
// A [Historian] records an event when a tenure starts ([EventGranted] on
// an absent or released lease, [EventTakenOver] on an expired one) and
// when one is released ([EventReleased], or [EventForceReleased] through
// [ForceReleaser]), with the store's clock, the tenure's holder and token
// and, for a new tenure, the one before it. A renewal records nothing: the
// history grows with changes of hands, not with time held. Record an event
// in the same atomic operation as the change, or the history can show a
// tenure that never was. Stores keep events for a retention of their own
// and document it; expiry itself is no event (nothing runs at that moment),
// it shows as the next [EventTakenOver]. Validate the params with
// [HistoryParams.Validate].
//
// # Windows
//
// A [Windower] runs a job at most once per window (`tenure run --once-per`,
// tenure.Client.Once). The window is a key the caller names, or one the
// store derives from a period on its own clock ([DerivedWindowKey]), never
// the caller's. [Windower.StartWindow] begins it and
// [Windower.FinishWindow] records it completed or failed, each in one
// atomic step that also checks the caller holds the lease with its token,
// the compare of [Store.Release]; the rule of who may begin a window is
// [DecideStart]: a completed window is refused with a [*WindowDoneError]
// naming who ran it, when and with which token; one begun by an earlier
// tenure that did not complete (it failed, or ended halfway) is taken over
// with [StartWindowParams.RetryFailed] (the record then names the newer
// token, so the older tenure's finish is refused) and refused without it.
// A store that is also a [Historian] records each begun window
// ([EventWindowStarted], naming the tenure it took over from, if any) and
// each outcome ([EventWindowCompleted], [EventWindowFailed]), with the
// window key in [HistoryEvent.Window], in the same step.
//
// # Chain writes and schemas
//
// [ChainWrite] is what a strict fence (pgfence's and mysqlfence's strict
// checks, etcdstore's and consulstore's StrictTxn) presents and reports
// to: one write under a tenure that advances its renewal chain;
// [ValidateChainWrite] is the check each applies before it sends
// anything. [SchemaStatus] is what a store with migrations and functions
// (pgstore, mysqlstore) reports of its schema next to what its Migrate
// would apply.
//
// # Payload
//
// A holder may publish a payload with its tenure ([AcquireParams.Payload]:
// its address, typically), for followers. A store keeps it with the lease
// and returns it, exactly, from Acquire (on the grant, and on the
// [HeldError] of a refused acquisition, in the same round trip), Get and
// List. It is fixed for the tenure: Renew neither takes nor returns it
// (a [RenewResult] leaves it empty, so that a batch of many leases does
// not carry every payload at every renewal), and the next tenure replaces
// it, with its own or with none. A released or expired lease's [Record]
// keeps the last tenure's payload, as it keeps its holder. It is text
// ([ValidatePayload]: at most [MaxPayloadLen] bytes, the characters
// [ValidateText] allows, or empty), so every store can keep it as text and
// every status page can print it.
//
// # Slots
//
// A name can be a semaphore of N holders: its N slots are the leases
// [SlotName](name, k), "name#k" for k from 0 to N−1, each a lease like
// any other (its own token sequence, renewal chain, fence, history and
// notifications), so at most N tenures of the name are held at once. A
// store that implements [SlotAcquirer] takes the first free slot in one
// atomic step (pgstore: one statement; sqlitestore: one write
// transaction; redisstore: one script; etcdstore: one transaction of
// nested transactions); [AcquireSlot] falls back to trying the slots in
// turn with Acquire on the others (consulstore: a KV transaction has no
// branch, so "slot 0, or else slot 1" cannot be said in one; natsstore:
// compare-and-set per key, no transaction over keys; k8sstore: one object
// per request; mysqlstore: not done yet). The conformance suite's Slots
// area checks both ways alike.
//
// # Errors
//
// Classify errors at one place per backend and wrap the cause with %w:
// bad input is [ErrInvalid] and changes nothing (check it with the
// validators here: [AcquireParams.Validate], [ValidateRenewBatch],
// [ValidateName], [ValidateText]); a missing schema is [ErrNotMigrated]; a
// call on a closed store is [ErrClosed]; a held lease is a [*HeldError];
// anything the network or the server did is [ErrUnavailable], which means
// the call may have been applied: the client treats its outcome as unknown
// and stands down (promise P3). A store-side fence that refuses a stale
// token returns a [*FencedError].
//
// # Limits
//
// Names, labels and instance ids are non-empty UTF-8 without control
// characters, invisible format characters (bidirectional controls,
// zero-width characters) or line separators, so that what a terminal shows
// is what is stored ([ValidateText]), at most [MaxNameLen], [MaxLabelLen]
// and [MaxInstanceLen] bytes; a Renew call carries at most [MaxRenewBatch] leases (a client
// holding more splits its renewals into batches of that size).
package store
