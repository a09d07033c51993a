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
//   - s3fence: objects in S3 or an S3-compatible store that keep the token
//     of the write they carry in their metadata; a write is one
//     conditional PUT (If-Match on the ETag read), made only when the
//     object carries no greater token. The ETag covers the bytes only, so
//     its promise also needs each write's bytes to differ from the
//     object's earlier ones; its documentation says why.
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
// # Tokens that were issued
//
// A fence that accepts any token can be poisoned: one write carrying a
// token nobody was issued (2^63 - 1, from a bug or a hostile caller) is
// recorded as the highest, and every legitimate writer is refused from then
// on. Each fence checks what it can reach; a refusal of a token above what
// the store issued matches [ErrNotIssued] (and ErrInvalid) and changes
// nothing:
//
//   - pgfence: the fence function reads the token sequence of the same
//     schema and prefix inside its own SECURITY DEFINER call and refuses a
//     greater token (SQLSTATE TF004). The lease checks (CheckLease, the
//     strict check) compare with the lease row, which the run-time role
//     cannot write. Tokens of another store go through FenceForeign, which
//     cannot check them and which the run-time role is not granted. A
//     poisoned fence is repaired with `tenure fence reset RESOURCE --to N
//     --reason TEXT` (pgfence Fencer.Reset) as the schema's owner; every
//     reset is recorded in the fence_resets table.
//   - mysqlfence: the fence procedure reads the token counter of the same
//     database and prefix (SQL SECURITY DEFINER, the run-time account has
//     no table privilege) and refuses a greater token (SQLSTATE TF004). It
//     takes tokens of its own store only, and has no audited reset yet.
//   - redisfence: given the lease store's counter key (Config.CounterKey),
//     the script refuses a token above the counter, read in the same atomic
//     step. Without it (tokens of another store) it cannot check. Any client
//     that may write to that Redis can set a fence key directly: only
//     Redis ACLs keep a hostile client out.
//   - httpfence: as strong as its fence store. NewPostgres uses pgfence's
//     fence function, so it takes only tokens of the PostgreSQL store of
//     the same schema and prefix; NewMemory and a FenceFunc check nothing
//     beyond [ValidateWrite]. A request header is anyone's to write: put the
//     service behind authentication.
//   - sqlitestore.Fence: no check against the store's counter; every
//     process that can open the file can write any table in it, so the
//     file's permissions are the boundary.
//   - s3fence: no check: S3 cannot read a lease store's counter, so an
//     object takes any valid token. Anyone allowed to write the object can
//     set its token metadata directly: the bucket's policy is the
//     boundary. A poisoned object is repaired by writing it again with the
//     last token handed out.
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
