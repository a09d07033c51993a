// Package demo is `tenure demo`: the story tenure exists for, played live
// with real processes on an embedded SQLite file, in well under a minute.
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
package demo
