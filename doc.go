// Package tenure runs singleton work one at a time on compute that can be
// paused, restored from a snapshot twice, forked with its disk, and whose
// clocks lie. It holds leases with fencing tokens over a store you already
// run (PostgreSQL, MySQL/MariaDB, Redis, etcd, Consul, NATS JetStream,
// Kubernetes Lease objects, or an embedded SQLite file), and ships the
// resource-side checks that make the tokens mean something.
//
// This package is the user's API: [Client], [Config], [Lease],
// [ChainWrite], [Transition] and the errors to match. The contract a
// backend implements is package [github.com/tenure-dev/tenure/store]; the
// backends are its subpackages, and docs/STORES.md says in one table,
// generated from the code, what each of them can do. The resource-side
// checks are under fence/.
//
// # What is promised, and where
//
// No lease can promise that only one process believes it leads: a process
// paused for a minute wakes up believing whatever it believed before. The
// promise lives at the resource: once a write with token y was accepted, no
// write with a token x < y is accepted. tenure keeps it with nine rules:
//
//   - P1 The store owns time. Every expiry is decided by the store, on its
//     clock, inside its atomic operation. A local clock only ever makes a
//     holder stand down earlier.
//   - P2 Tokens only go up. Every new tenure of a name gets a token greater
//     than every token handed out before for it, across releases, restarts
//     and deleted rows. A renewal keeps the token.
//   - P3 Unknown is no. A holder reports leadership only between a renewal
//     it saw succeed and a local deadline derived from it. Errors,
//     timeouts, mismatches and detected suspensions revoke at once.
//   - P4 The resource decides. Resources keep the highest token accepted and
//     refuse lower ones (see the fence packages).
//   - P5 Identity is per instance: a label plus an id made in memory at
//     start (random bytes mixed with both clocks and the pid), regenerated
//     on revoke, wake and restore.
//   - P6 Renewals are a chain. Each renewal is a compare-and-set on
//     (holder, token, seq) that advances seq; a holder whose seq no longer
//     matches has been cloned, and stands down.
//   - P7 Nothing local asserts leadership: no marker, PID or token file.
//   - P8 A cached "alive" may be served; "dead" is always asked again.
//   - P9 Fail quietly toward the cheap side (losing leadership needlessly
//     costs seconds), loudly on the expensive one: a fenced write returns
//     [ErrFenced], never a log line.
//
// # Using it
//
//	store, err := pgstore.New(pool, pgstore.Config{})
//	client, err := tenure.New(store, tenure.Config{Label: "billing-worker"})
//	go client.Run(ctx)
//	err = client.Do(ctx, "nightly-invoice-run", func(ctx context.Context, l *tenure.Lease) error {
//		// ctx is cancelled the moment the tenure is lost.
//		return chargeAll(ctx, l.Token()) // every write carries the token
//	})
//
// [Client.Acquire] tries once, [Client.Campaign] waits, [Client.Do] wraps a
// function; each tenure is a [Lease] with its own token, [Lease.Done]
// channel and [Lease.Err]. [Config.OnTransition] receives every acquisition
// and loss, in order.
//
// # A tenure's life
//
// Every acquisition is a new tenure with a new token; a tenure ends once
// and never comes back:
//
//	Acquire / Campaign
//	      |
//	      v
//	  acquiring ---- refused: a HeldError. Acquire returns it; Campaign
//	      |          retries at the holder's expiry by the store's clock,
//	      |          or at once when the store announces a release.
//	      | grant seen
//	      v
//	    held ------- each renewal seen to succeed moves the local
//	      |          deadline on and advances the seq. Token() = token.
//	      |
//	      | the local deadline passes; a renewal fails or times out;
//	      | the store reports another holder, an expiry or a moved seq;
//	      | a pause is detected; the progress gate; Revoke; Release;
//	      | Run returns
//	      v
//	    lost ------- Token() = 0, Done is closed, Err is a *LostError.
//	      |
//	      | its owner releases the lease once the work has stopped
//	      | (Lease.Release; Do does it when fn returns), except after a
//	      | moved seq, a pause or a revoke (this process may be a copy
//	      | whose twin holds it); otherwise the store expires it by TTL
//	      v
//	  released
//
// # Shutdown
//
// When [Client.Run]'s ctx is done, renewals stop and every tenure ends
// ([LossClosed]). The work under a tenure of [Client.Do] is cancelled (fn's
// ctx ends) and Run waits for fn to return before it releases the lease,
// so the next holder never starts beside it; it waits up to the tenure's
// remaining trusted time, and a lease whose fn outlives that is not
// released but left to expire by its TTL. Tenures of [Client.Acquire] and
// [Client.Campaign] are released at once: Run cannot see their work, so
// stop it first.
//
// # The trust window
//
// A tenure is trusted until its local deadline, on the monotonic clock:
//
//	deadline = sent + remaining − max(TTL/10, 2×round trip) − Grace
//
// where sent is the send time of the last renewal (or the grant) seen to
// succeed and remaining the time the store granted by its own clock.
// Renewals go out every [Config.RenewInterval] (TTL/3 by default), all of
// a client's leases in one store round trip. [Lease.Token] returns 0 the
// moment the window closes, and also when the wall clock and the monotonic
// clock disagree about the time since the window opened by more than
// [Config.SuspendTolerance] (a virtual machine paused and its wall clock
// re-synced on wake). A timer that fires that much too late (SIGSTOP, a
// descheduled process) ends every tenure too. After a clone or a
// suspension the identity is regenerated.
//
// The monotonic clock does not count time a virtual machine spends paused.
// If your platform can tell you about a resume or restore, call
// [Client.Revoke] from that hook: it ends every tenure and regenerates the
// identity before anything else runs.
//
// # Clones
//
// Two byte-identical clones of one process (a snapshot restored twice, a
// fork) share identity, token and seq, and a fence that accepts equal
// tokens cannot tell them apart. The renewal chain can: each renewal is a
// compare-and-set on the seq, so the clone that renews second finds the
// chain moved, stands down ([LossSeqMismatch]) and takes a new identity. A
// [ChainWrite] (pgfence.StrictTx) advances the same chain inside the
// resource's own transaction, so that of two clones only one can ever
// write; chain writes and renewals of a tenure never overlap, so a moved
// chain always means a clone. The chaos harness and the fences' tests make
// such clones on purpose.
//
// # Followers
//
// A refused acquisition returns the current holder and its remaining time
// by the store's clock ([HeldError]). Campaigns wait in line where the
// store keeps one (see [store.AcquireParams] Wait, and the Line column of
// docs/STORES.md): the follower at the head of the line retries exactly
// when that time is up, or at once when the store announces the release
// and names it; a store that can (the Handoff column) keeps a released
// lease for it for [store.Handoff], and the other followers stay back
// until they hear of the new tenure, which sends them back to waiting for
// its expiry. A handover so costs the store one acquisition however many
// followers wait. Where the store keeps no line, every follower retries at
// the expiry, or at once when a release or takeover is announced, each
// after a small random spread. Every campaign also looks again when the
// store's listener has just (re)subscribed, since announcements made
// before then are lost. Errors back off with jitter up to the renew
// interval; nothing spins.
//
// A client hears only of the leases it wants, holds or is giving back: a
// store that offers subscriptions ([store.Subscriber]; docs/STORES.md
// says which) hands its listener those announcements alone, so that of
// many clients sharing a store only those concerned are woken; over the
// other stores the client drops the rest as they arrive, before its loop
// sees them.
//
// [Client.Observe] gives the follower's view without campaigning: it
// calls a function with who holds a name (holder, token, remaining time
// by the store's clock, or nobody) and again at every change, seen at once
// when the store announces it and at the holder's expiry otherwise.
//
// A leader publishes a small payload with each tenure it takes
// ([Config.Payload], up to 1 KiB of text: its address, typically), so
// that followers need no second registry to find it: they read it in
// [Observation.Payload], in the [HeldError] of a refused acquisition, and
// in `tenure status`. It is fixed for the tenure and replaced by the next
// leader's; anyone who can read the store can read it, so it is no place
// for secrets.
//
// # Metrics and logs
//
// A client is quiet by default. [Config.Logger] takes a [log/slog] logger
// for acquisitions, losses, renewal failures, detected pauses and clones,
// and a store that cannot be reached while campaigning, with the keys
// lease, token, holder, reason, store and err. [Config.Observer] receives
// the same as [Event]s; package github.com/tenure-dev/tenure/metrics turns
// them into Prometheus metrics. Neither is ever called from
// [Lease.Token].
package tenure
