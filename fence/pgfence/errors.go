package pgfence

import (
	"errors"
	"fmt"

	"github.com/tenure-dev/tenure/store"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tenure-dev/tenure/fence"
	"github.com/tenure-dev/tenure/internal/pgkit"
)

// SQLSTATEs the fence functions raise.
const (
	codeStaleToken   = "TF001" // fence: a greater token was recorded
	codeLeaseNotHeld = "TF002" // check_lease: not held with this token
	codeChainMoved   = "TF003" // check_lease_strict: holder or seq mismatch
	codeNotIssued    = "TF004" // fence, fence_reset: above the token sequence
	codeNoFence      = "TF005" // fence_reset: the resource has no fence
)

// errs classifies what is not the fence functions' own refusals.
var errs = pgkit.Interpreter{
	Owner:   "pgfence",
	Migrate: "the fence functions are missing; run `tenure migrate` (or pgstore.Store.Migrate) for this schema and prefix",
	Grant:   "grant this role what pgstore.Config.GrantSQL prints (fence_foreign and fence_reset are not in it: run them as the schema's owner, or grant them by hand)",
	Unknown: "roll the transaction back; if this was the commit, its outcome is unknown",
}

// interpretError is the one place where errors of the fence functions
// become tenure's errors, whether they came through pgx or through
// database/sql over pgx's stdlib driver (both carry a *pgconn.PgError).
// subject is the resource or lease name the call was about, offered the
// token it carried. The fence functions' SQLSTATEs become
// [*store.FencedError]s; the rest is [pgkit.Interpreter.Error].
func interpretError(op, subject string, offered store.Token, err error) error {
	if err == nil {
		return nil
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return errs.Error(op, err)
	}
	switch pgErr.Code {
	case codeNotIssued:
		var issued, off int64
		if _, scanErr := fmt.Sscanf(pgErr.Detail, "issued=%d offered=%d", &issued, &off); scanErr != nil {
			issued = -1
		}
		return fmt.Errorf("pgfence: %s: %w: %w: token %d is above the last token the store issued (%d); nothing was changed. A token of another lease store needs FenceForeign; otherwise the caller has a bug or is hostile",
			op, fence.ErrNotIssued, store.ErrInvalid, offered, issued)
	case codeNoFence:
		return fmt.Errorf("pgfence: %s: resource %q has no fence, so there is nothing to reset; check the resource name", op, subject)
	case codeStaleToken:
		var recorded, off int64
		if _, scanErr := fmt.Sscanf(pgErr.Detail, "recorded=%d offered=%d", &recorded, &off); scanErr != nil {
			recorded = 0
		}
		return fmt.Errorf("pgfence: %s: roll back and stop working under this token: %w", op,
			&store.FencedError{Resource: subject, Offered: offered, Recorded: store.Token(recorded)})
	case codeLeaseNotHeld:
		var current, off int64
		var state string
		if _, scanErr := fmt.Sscanf(pgErr.Detail, "current=%d offered=%d state=%s", &current, &off, &state); scanErr != nil {
			state = "not held with this token"
		}
		return fmt.Errorf("pgfence: %s: the lease is %s; roll back and stop working under this token: %w", op, state,
			&store.FencedError{Resource: "lease:" + subject, Offered: offered, Recorded: store.Token(current)})
	case codeChainMoved:
		var current, off, curSeq, offSeq int64
		if _, scanErr := fmt.Sscanf(pgErr.Detail, "current=%d offered=%d current_seq=%d offered_seq=%d",
			&current, &off, &curSeq, &offSeq); scanErr != nil {
			current = int64(offered)
		}
		return fmt.Errorf("pgfence: %s: the renewal chain is at seq %d, not %d: a clone of this holder wrote first, or a reply was lost; roll back and stand down: %w",
			op, curSeq, offSeq, &store.FencedError{Resource: "lease:" + subject, Offered: offered, Recorded: store.Token(current)})
	}
	return errs.Error(op, err)
}
