// Package storetest is the conformance suite every [store.Store] backend
// runs against its real server, and the benchmarks that compare backends.
//
// # Running it
//
// A backend's test file builds a [Harness] and hands it to [Run] and
// [Benchmark]; that is the whole file:
//
//	type harness struct{ pool *pgxpool.Pool }
//
//	func (h harness) NewStore(tb testing.TB) store.Store { ... }
//	func (h harness) Capabilities() storetest.Capabilities { ... }
//
//	func TestStore(t *testing.T)      { storetest.Run(t, harness{...}) }
//	func BenchmarkStore(b *testing.B) { storetest.Benchmark(b, harness{...}) }
//
// Capabilities also carries the harness's [Faults]: how to make a store
// whose server the suite may cut off, kill and restart (a proxy such as
// internal/faultnet's between the store and its server, or a server of
// its own), or, for each fault it cannot inject, why. A harness that
// neither injects nor declines a fault fails the suite.
//
// Every subtest calls [Harness.NewStore] for a store of its own and runs in
// parallel with the others, so NewStore must give each call its own namespace
// (table prefix, schema, key prefix or file). The suite starts goroutines and
// waits for all of them; run it from a package whose TestMain checks for
// leaks.
//
// # Time
//
// The suite runs on real time, because real servers cannot be fast-forwarded.
// Expiry tests use leases of [store.MinTTL] to one second (raised to
// [Capabilities.MinTTL] for stores that refuse shorter ones) and wait for the
// remaining time the store reported plus [Capabilities.ExpiryLag]; no test
// waits on a sleep for anything else. Notifications are awaited on channels
// with generous timeouts. A store that rounds TTLs up (etcd counts whole
// seconds) reports the longer remaining time and declares the rounding in
// ExpiryLag.
//
// # What it checks
//
//   - Acquire: a new tenure on an absent, released or expired lease; a
//     [*store.HeldError] with holder, token, seq and remaining time when held
//     (by anyone, the same holder included); exactly one winner among racing
//     acquirers.
//   - Renew: the compare-and-set on holder, token and seq; seq advancing by
//     one; results in order that report the lease as it is; batches of
//     1,000 leases and mixed batches.
//   - Release: only by the holder with its token while held; the token
//     counter survives it.
//   - Tokens: strictly increasing per name across every kind of tenure change
//     (promise P2).
//   - Notify (when [Capabilities.Notify]): releases and takeovers reach a
//     [store.Notifier] listener, which announces its subscription with
//     the empty name; a [store.Subscriber]'s subscription hears of the
//     names it follows and of no other.
//   - Input: every limit of the contract refused with [store.ErrInvalid],
//     with nothing changed.
//   - History (when the store is a [store.Historian]): grants, releases,
//     takeovers after expiry and (for a [store.ForceReleaser]) forced
//     releases recorded with holder, token and the tenure before; renewals
//     and refused calls record nothing; Since, Limit and the empty name
//     (every lease); oldest first; bad params refused with
//     [store.ErrInvalid].
//   - Slots, through [store.AcquireSlot] (in one step on a
//     [store.SlotAcquirer], slot by slot on other stores): the first free
//     slot is taken, at most N are held (of eight racing callers for three
//     slots, exactly three win, each a different slot), a
//     [*store.SlotsHeldError] names every holder when all are held, a
//     released slot is the one the next caller gets, each slot's tokens
//     grow across its tenures, and bad params are refused with
//     [store.ErrInvalid] by the store's own AcquireSlot too, with nothing
//     changed.
//   - Close: every call after [store.Store.Close] fails with
//     [store.ErrClosed].
//   - List (when the store is a [store.Lister]): every lease in name order
//     with its state.
//   - Faults: every call, optional interfaces included, with a context
//     already done fails with [store.ErrUnavailable] wrapping the
//     context's error; while the store is cut off from its server (a
//     partition that also dropped its connections) and while its server
//     is down, every call fails with ErrUnavailable by its deadline; after
//     a restore, and after a restart, the store answers again and a
//     [store.Notifier] listener hears releases again (Listen reconnects
//     by itself); the first tenure after a restart has a greater token
//     than the tenure before it (P2).
package storetest
