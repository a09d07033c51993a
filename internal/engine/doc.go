// Package engine is the lease state machine behind tenure.Client.
//
// It is deterministic: it starts no goroutines, reads no clock and draws no
// randomness of its own. The caller feeds it [Event] values stamped with an
// [Instant] and carries out the [Action] values it returns; identities and
// jitter come from functions in [Config]. The same code therefore runs under
// the real runtime, on virtual time in tests, and in the seeded simulation.
//
// # Model
//
// The engine holds any number of named leases for one holder process. A
// lease is idle, acquiring (a store request in flight), or held. A held
// lease has a local deadline on the monotonic clock: the send time of the
// last renewal it saw succeed, plus the remaining time the store granted,
// minus a safety margin of max(TTL/10, 2×round trip), minus the configured
// grace. Leadership ends locally, first, when
//
//   - the deadline passes (expired locally),
//   - a renewal fails or times out (renew error: unknown is no),
//   - the store reports another holder or token (superseded), or no live
//     tenure (expired at store),
//   - the store reports the same holder and token with a renewal seq the
//     engine did not produce (seq mismatch: a clone or a lost reply),
//   - the wall clock and the monotonic clock disagree about the time since
//     the last seen renewal, or a timer fires far too late (suspension),
//   - the work stops calling Progress within the progress bound,
//   - the caller revokes or releases it.
//
// A tenure that ends locally is not released at the store by the engine:
// the work under it may still be stopping, and nobody else may hold the
// lease before it has. Its owner releases it once the work has stopped;
// otherwise it expires by its TTL. Only a revoke releases at once.
//
// After a seq mismatch, a suspension, a revoke, or a store that reports this
// very identity as a holder the engine never saw granted, the identity is
// regenerated: nothing that might be shared with a clone is reused.
//
// All held leases are renewed together: one [SendRenew] per renew interval,
// however many leases there are.
//
// # Announcements
//
// The engine acts on the store's announcements ([Notified]) of the names it
// tracks, and on the empty one, and ignores the others. It tracks a name
// from the first event that concerns it (a Want, an Adopt, a release of a
// tenure it no longer tracks) until it neither wants, holds nor releases
// it, and reports both ends ([Follow] before any store call for the name,
// [Unfollow] at the end of the step that dropped it; [Engine.Tracks] says
// which holds now), so that the caller can have the store hand it only
// those announcements. What it does not hear of a name before Follow is
// covered by the store call that comes after: its answer is newer.
package engine
