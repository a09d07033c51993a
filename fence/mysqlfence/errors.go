package mysqlfence

import (
	"errors"
	"fmt"
	"strings"

	"github.com/tenure-dev/tenure/fence"
	"github.com/tenure-dev/tenure/store"

	"github.com/go-sql-driver/mysql"

	"github.com/tenure-dev/tenure/store/mysqlstore"
)

// SQLSTATEs the fence procedures raise.
const (
	codeStaleToken   = "TF001" // fence: a greater token was recorded
	codeLeaseNotHeld = "TF002" // check_lease: not held with this token
	codeChainMoved   = "TF003" // check_lease_strict: holder or seq mismatch
	codeNotIssued    = "TF004" // fence: the token is above the counter
)

// errs classifies what is not the fence procedures' own refusals.
var errs = mysqlstore.Interpreter{
	Owner:   "mysqlfence",
	Migrate: "the fence procedures are missing; run `tenure migrate` (or mysqlstore.Store.Migrate) for this database and prefix",
	Grant:   "grant this account what mysqlstore.Config.GrantSQL prints",
	Unknown: "roll the transaction back; if this was the commit, its outcome is unknown",
}

// interpretError is the one place where errors of the fence procedures
// become tenure's errors. subject is the resource or lease name the call
// was about, offered the token it carried. The procedures' SQLSTATEs
// become [*store.FencedError]s, read from the message's key=value pairs;
// the rest is [mysqlstore.Interpreter.Error].
func interpretError(op, subject string, offered store.Token, err error) error {
	if err == nil {
		return nil
	}
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		return errs.Error(op, err)
	}
	// The message ends with the key=value pairs: "tenure: fenced: …: recorded=7 offered=6".
	detail := me.Message
	if i := strings.LastIndex(detail, ": "); i >= 0 {
		detail = detail[i+2:]
	}
	switch mysqlstore.SQLState(err) {
	case codeStaleToken:
		var recorded, off int64
		if _, scanErr := fmt.Sscanf(detail, "recorded=%d offered=%d", &recorded, &off); scanErr != nil {
			recorded = 0
		}
		return fmt.Errorf("mysqlfence: %s: roll back and stop working under this token: %w", op,
			&store.FencedError{Resource: subject, Offered: offered, Recorded: store.Token(recorded)})
	case codeNotIssued:
		var issued, off int64
		if _, scanErr := fmt.Sscanf(detail, "issued=%d offered=%d", &issued, &off); scanErr != nil {
			issued = 0
		}
		return fmt.Errorf("mysqlfence: %s: %w (%w): token %d is above the last token handed out, %d; nothing was recorded",
			op, fence.ErrNotIssued, store.ErrInvalid, offered, issued)
	case codeLeaseNotHeld:
		var current, off int64
		var state string
		if _, scanErr := fmt.Sscanf(detail, "current=%d offered=%d state=%s", &current, &off, &state); scanErr != nil {
			state = "not held with this token"
		}
		return fmt.Errorf("mysqlfence: %s: the lease is %s; roll back and stop working under this token: %w", op, state,
			&store.FencedError{Resource: "lease:" + subject, Offered: offered, Recorded: store.Token(current)})
	case codeChainMoved:
		var current, off, curSeq, offSeq int64
		if _, scanErr := fmt.Sscanf(detail, "cur=%d off=%d cur_seq=%d off_seq=%d", &current, &off, &curSeq, &offSeq); scanErr != nil {
			current = int64(offered)
		}
		return fmt.Errorf("mysqlfence: %s: the renewal chain is at seq %d, not %d: a clone of this holder wrote first, or a reply was lost; roll back and stand down: %w",
			op, curSeq, offSeq, &store.FencedError{Resource: "lease:" + subject, Offered: offered, Recorded: store.Token(current)})
	}
	return errs.Error(op, err)
}
