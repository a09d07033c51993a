package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/tenure-dev/tenure/fence"
	"github.com/tenure-dev/tenure/store"
)

// Fence checks tok against the fence of resource inside the caller's own
// transaction tx on a database [Open] has migrated (typically one begun on
// [Store.DB]), and records it: the fence keeps the highest token resource
// has accepted. A token equal to or greater than the recorded one passes
// and becomes the recorded one; a lower token fails with a
// [*store.FencedError] (matching [store.ErrFenced]) carrying the offered
// and recorded tokens, and changes nothing.
//
// Call Fence before the protected write, in the same transaction, and
// commit only when it returned nil: the fence and the write then commit or
// roll back together, and because transactions on [Store.DB] begin
// IMMEDIATE, no other writer can slip in between. On [store.ErrFenced] roll
// back and stop working for that tenure: the holder was superseded (promise
// P9). The fence advances only if tx commits.
//
// The table is tenure_fence(resource TEXT PRIMARY KEY, token INTEGER), with
// the same meaning as PostgreSQL's tenure_fence, so other programs on the
// same file can use it from SQL:
//
//	INSERT INTO tenure_fence (resource, token) VALUES (?1, ?2)
//	ON CONFLICT (resource) DO UPDATE SET token = max(token, excluded.token)
//	RETURNING token; -- stale when the result is greater than ?2
//
// resource is 1 to [store.MaxNameLen] bytes of UTF-8 without control
// characters and tok is positive, the rule every fence applies
// ([fence.ValidateWrite]); bad input fails with [store.ErrInvalid].
func Fence(ctx context.Context, tx *sql.Tx, resource string, tok store.Token) error {
	if tx == nil {
		return fmt.Errorf("sqlitestore: fence: %w: transaction is nil; begin one on Store.DB", store.ErrInvalid)
	}
	if err := fence.ValidateWrite(resource, tok); err != nil {
		return fmt.Errorf("sqlitestore: fence: %w", err)
	}
	// One statement, so the check and the record cannot be split even on
	// a transaction that began DEFERRED: the write lock is taken first.
	var recorded store.Token
	err := tx.QueryRowContext(ctx, `INSERT INTO tenure_fence (resource, token) VALUES (?, ?)
ON CONFLICT (resource) DO UPDATE SET token = max(token, excluded.token)
RETURNING token`, resource, tok).Scan(&recorded)
	if err != nil {
		return classifyErr(fmt.Sprintf("fence %q", resource), "", 0, err)
	}
	if recorded > tok {
		return &store.FencedError{Resource: resource, Offered: tok, Recorded: recorded}
	}
	return nil
}
