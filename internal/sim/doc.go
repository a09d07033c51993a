// Package sim runs the real lease engine (internal/engine) and the glue that
// ships between it and a store (internal/drive) against the real in-memory
// store (store/memstore) on virtual time, through a simulated network, with
// simulated processes that are paused, killed, restarted, cloned, revoked
// (as a restore hook would) and given wrong wall clocks, and checks what
// landed at a fenced resource.
//
// Everything is driven by one seeded random source and one event queue, so a
// run is a pure function of its [Config]: any failure replays exactly from
// the seed it prints.
//
// # What is checked
//
// Every write a simulated process sends carries the token of the tenure it
// believes it holds; the resource accepts it when the token is at least the
// highest accepted so far (or, with Strict, when the store's renewal chain
// still matches, as tenure_check_lease_strict does). The [Report] lists
// violations of:
//
//   - no stale acceptance: accepted tokens never go down;
//   - one writer per token: all accepted writes of a token come from one
//     ground-truth process (an id the simulated process cannot copy);
//   - tokens grow: every grant's token exceeds every token granted before;
//   - unknown is no: whenever a process sends a write, the store agrees at
//     that instant, by its own clock, that the process's tenure is live
//     (except after a pause the process could not detect: a VM whose wall
//     clock was not re-synced on wake; there only the fence protects);
//   - a revoke releases nothing: a process that revoked a tenure (perhaps
//     a restored copy whose twin still works under it) never sends its
//     release.
//
// One exemption remains in "unknown is no": a tenure that one of two
// byte-identical clones released (after a failed renewal, or because its
// work was done) may still be trusted by the other until that one's next
// renewal; both carry the same holder, token and seq, so no compare-and-set
// at release can tell them apart, and the strict fence keeps the resource
// safe meanwhile.
//
// # Mutants
//
// A checker that finds nothing proves nothing. Each [Mutant] breaks one
// mechanism on purpose (no token bump on takeover, a fence that accepts
// lower tokens, deleting the row on release, expiry judged by the client's
// clock, working on after a failed renewal, no seq check) and the tests
// assert that the checker catches every one. The glue is broken on purpose
// in a separate build (tag tenure_glue_mutant), which the tests build and
// run too.
package sim
