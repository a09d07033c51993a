// Package memstore is the in-memory reference implementation of
// [store.Store] and of most optional interfaces of package store
// (docs/STORES.md lists them).
//
// It exists for tests, the deterministic simulation and runnable examples:
// everything it knows is lost with the process, so it must never guard real
// work. It passes the same conformance suite as every other backend
// ([github.com/tenure-dev/tenure/store/storetest]).
//
//	s := memstore.New(memstore.Config{})
//	defer s.Close()
//
// # Clock
//
// Every expiry decision is taken on the store's clock, [Config.Clock], inside
// the store's one mutex (promise P1). The default is the host clock
// ([time.Now], whose monotonic reading makes it immune to wall-clock jumps).
// Tests and the simulation inject a virtual clock to move time by hand.
//
// # Tokens
//
// Tokens come from one in-memory counter shared by every lease name. It is
// never reset: [Store.Release] marks a lease released and keeps its token, so
// the next tenure of any name gets a greater token (promise P2). The counter
// lives only as long as the [Store] value, which is why this store is for
// tests, simulation and examples only.
//
// # Notifications
//
// [Store.Listen] reports each release ([store.NoticeReleased], naming the
// next follower in line) and each acquisition ([store.NoticeAcquired], with
// its holder and TTL). The store never waits for a listener: it appends to
// the listener's unbounded queue, and the goroutine that called Listen
// delivers from it.
//
// # Line
//
// The store keeps followers that ask to wait ([store.AcquireParams.Wait]) in
// line per lease, first come first, and forgets one that has not asked again
// within twice its TTL after the expiry it was told. A release keeps the
// lease for the head of the line for [store.Handoff].
//
// # History
//
// [Store.History] reports every grant, takeover after expiry, release and
// forced release, by the store's clock, in the order they happened. The
// store keeps the most recent [Config.HistoryEvents] events (10 000 by
// default), of all names together, and loses them with the process.
//
// # Failure modes
//
// Calls cannot be lost or half applied, so memstore never returns
// [store.ErrUnavailable] except when the call's context is already done, in
// which case nothing was attempted. Input outside the limits fails with an
// error matching [store.ErrInvalid] and changes nothing. After
// [Store.Close] every call fails with [store.ErrClosed].
package memstore
