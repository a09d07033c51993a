// Package fence is tenure's resource-side fencing kit (promise P4: the
// resource decides). Its subpackages make a resource refuse writes from a
// holder that has been superseded:
//
//   - pgfence: PostgreSQL functions and Go helpers that run inside the
//     caller's own transaction.
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
// A refusal is an error matching [github.com/tenure-dev/tenure.ErrFenced], never a log line
// (promise P9). Checks run in the same transaction as the write they
// protect, so the check and the write commit or roll back together: a
// rolled-back write never advances a fence.
//
// Two byte-identical clones of one holder carry the same token, and a
// fence that accepts equal tokens cannot tell them apart. Only a
// compare-and-set on the lease's renewal chain can; pgfence's strict check
// does that.
package fence
