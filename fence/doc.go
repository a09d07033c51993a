// Package fence is tenure's resource-side fencing kit (promise P4: the
// resource decides). Its subpackages make a resource refuse writes from a
// holder that has been superseded:
//
//   - pgfence: PostgreSQL functions and Go helpers that run inside the
//     caller's own transaction.
//   - redisfence: a Lua script that writes a key (or hash fields) and moves
//     the resource's fence in one atomic step, only when the token is at
//     least the recorded one.
//   - httpfence: middleware for your own HTTP services that checks a
//     Fencing-Token header per resource against a fence store and answers
//     409 Conflict when it is stale, and the client side that sets the
//     header and turns that 409 into an error.
//
// The SQLite store has the same check as
// [github.com/tenure-dev/tenure/store/sqlitestore.Fence]. For side effects
// that cannot check a token at all, this package gives [IdempotencyKey].
//
// Every fenced write, whichever the kit, first passes [ValidateWrite]: a
// resource name of 1 to 255 bytes of UTF-8 without control characters,
// bidirectional controls or invisible format characters (so that a name
// shows on a terminal as what it is) and a positive token (0 is what a lease no longer trusted returns: do not
// write). Bad input is refused with an error matching ErrInvalid before
// anything is sent.
//
// # What the kit promises
//
// A lease system cannot promise that only one process believes it is the
// leader: a paused process wakes up believing it still is. The promise
// lives at the resource instead: once a write carrying token y was
// accepted, no write carrying a token x < y is accepted. Tokens come from
// the store and only go up per lease name (promise P2), so a superseded
// holder's late write is refused.
//
// A refusal is an error matching [github.com/tenure-dev/store.ErrFenced], never a log line
// (promise P9). Checks run in the same transaction as the write they
// protect, so the check and the write commit or roll back together: a
// rolled-back write never advances a fence. The HTTP middleware is the
// exception: it checks before the handler writes, as a separate step, so a
// request that passed just before a newer holder's first one can still
// land after it; httpfence's documentation says when that matters and what
// to use instead.
//
// Two byte-identical clones of one holder carry the same token, and a
// fence that accepts equal tokens cannot tell them apart. Only a
// compare-and-set on the lease's renewal chain can; pgfence's strict check
// does that.
//
// # Side effects that cannot check a token
//
// An email, a card charge through a third-party API, a message to a queue
// you do not own: the receiving end will not compare tokens. Most such
// providers deduplicate by an idempotency key instead, and that is the same
// insight wearing a different hat: the receiving end decides. Derive the
// key with [IdempotencyKey] from the lease name, the token and the step, so
// that a step retried or duplicated under one tenure is one effect. A new
// tenure gets a new key, so use it where the work really should run again
// under a new tenure; an effect that must happen once per piece of work,
// whichever tenure tries it, is keyed by the work itself.
package fence
