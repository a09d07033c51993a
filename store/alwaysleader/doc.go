// Package alwaysleader is a [store.Store] under which every caller leads,
// always, at once: for genuinely idempotent jobs only, where running the
// work twice, or on every instance at the same time, is known to be
// harmless (an upsert of the same rows, a cache warm-up, a reconcile loop
// whose every step is a compare-and-set of its own).
//
//	s, err := alwaysleader.New("the sync is an idempotent upsert keyed by invoice id; duplicates are harmless")
//	client, err := tenure.New(s, tenure.Config{Label: "sync"})
//
// It lets code written against tenure run unchanged where mutual exclusion
// is not needed, instead of a copy of that code with the lease ripped out,
// and it makes the choice visible: [New] refuses to build one without a
// written reason, and [Store.Reason] returns it, so logs and `tenure
// status` can say why this job runs without a lease.
//
// # Clock
//
// None decides anything. Grants report the requested TTL as remaining, so
// a [tenure.Client] renews as usual; [Store.Get] and [Store.List] report a
// lease as expired once its last TTL has passed on this host's clock, for
// people to read. Nothing is ever refused because of it.
//
// # Tokens
//
// A constant: every grant carries [Token]. A growing counter was rejected:
// each process would count on its own, and a fence shared by two processes
// would refuse the one whose counter happened to be lower, at random. With
// a constant token a fence accepts every holder, which is what this store
// promises (nothing) and what an idempotent job needs.
//
// Because every tenure of a name carries the same token, a [tenure.Lease]
// value from an earlier tenure is not told apart from the current one:
// calling Release on a stale Lease may end the current tenure too. For an
// idempotent job that costs one re-acquisition.
//
// # Notifications
//
// None: nobody ever waits for a lease, so there is nothing to announce.
//
// # Failure modes
//
// Everything lives in memory and nothing can fail half way. Input outside
// the limits of [store.Store] fails with an error matching
// [store.ErrInvalid], a call whose context is already done fails with
// [store.ErrUnavailable] before anything is attempted, and after
// [Store.Close] every call fails with [store.ErrClosed]. A Store not made
// by [New] (the zero value has no reason) refuses every call with
// [store.ErrInvalid].
//
// # What it breaks, on purpose
//
// It keeps no promise about exclusion, and fails the mutual-exclusion parts
// of the conformance suite ([github.com/tenure-dev/tenure/store/storetest])
// by design:
//
//   - [Store.Acquire] never refuses: a lease held by someone else is
//     granted again, so any number of holders lead at once.
//   - P2 does not hold: every grant carries the same constant [Token], so a
//     new tenure's token is not greater than the last one's.
//   - P3 and P4 are empty: [Store.Renew] renews whatever it is given, so a
//     holder never learns it was superseded (it never is), and a fence
//     accepts every write, because equal tokens pass.
//
// That is acceptable only when the work is idempotent: the promises exist
// to stop a second writer, and for such a job a second writer does no harm.
// For anything else use a real store.
package alwaysleader
