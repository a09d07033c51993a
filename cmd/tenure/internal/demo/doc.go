// Package demo is `tenure demo`: the stories tenure exists for, played live
// with real processes on embedded SQLite files, in well under a minute.
//
// # The paused leader
//
// Three worker processes (re-executions of the same binary) contend for the
// lease "nightly-billing". The leader starts tonight's billing run: it reads
// its token, calls the payment provider, then records the charge in a
// ledger. The demo freezes it with SIGSTOP right after it read the token,
// for longer than the TTL. The lease expires at the store; a follower takes
// over with a greater token and charges the run. Then the frozen leader is
// resumed: it finishes the write it had started, with its old token.
//
// With fencing, the ledger's write goes through the fence, which has
// already accepted the greater token: the late charge is refused. Without
// fencing, the same scene ends with the customer charged twice. The demo
// prints both timelines and a verdict, and succeeds only if the fenced
// scene charged exactly once and the unfenced one twice.
//
// Note what the frozen leader did wrong, on purpose: it read its token
// before the slow call and wrote after it. [tenure.Lease.Token] would have
// returned 0 after the pause; the demo shows why that is not enough on its
// own (the pause can fall between the check and the write) and why the
// resource must decide (promise P4).
//
// # The clone
//
// A snapshot is a leader factory. worker-1 acquires the lease; its state
// (identity, token, renewal seq) is restored in two worker processes, as a
// virtual machine snapshot restored twice would be (the clones are made
// the way the chaos harness makes them, through internal/snapshot). Each
// copy charges the run once. With the strict fence the charge's
// transaction compare-and-sets the lease row's holder, token and seq and
// advances the seq, as pgfence's and mysqlfence's strict checks do: the
// first copy to write (or to renew) moves the renewal chain on, and the
// other is refused or stands down at its first renewal. With the token
// fence alone, both copies present the same token and both charges pass
// (promise P6: only the renewal chain tells clones apart). The scene
// succeeds only if the strict fence let one charge through and the token
// fence two.
package demo
