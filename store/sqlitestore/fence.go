package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
	"unicode/utf8"

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
// resource is any non-empty UTF-8 string of at most [store.MaxNameLen]
// bytes; bad input fails with [store.ErrInvalid].
func Fence(ctx context.Context, tx *sql.Tx, resource string, tok store.Token) error {
	switch {
	case tx == nil:
		return fmt.Errorf("sqlitestore: fence: %w: transaction is nil; begin one on Store.DB", store.ErrInvalid)
	case resource == "":
		return fmt.Errorf("sqlitestore: fence: %w: resource is empty", store.ErrInvalid)
	case len(resource) > store.MaxNameLen:
		return fmt.Errorf("sqlitestore: fence: %w: resource is %d bytes long; the maximum is %d", store.ErrInvalid, len(resource), store.MaxNameLen)
	case !utf8.ValidString(resource):
		return fmt.Errorf("sqlitestore: fence: %w: resource %q is not valid UTF-8", store.ErrInvalid, resource)
	case tok <= 0:
		return fmt.Errorf("sqlitestore: fence: %w: token %d for resource %q must be positive", store.ErrInvalid, tok, resource)
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
