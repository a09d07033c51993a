//go:build tenure_glue_mutant

package drive

import "github.com/tenure-dev/tenure/store"

// renewed is broken on purpose in this build, to show that the simulation
// catches a broken glue: it judges a renewal by holder and token alone, so
// a holder whose renewal chain a clone moved on takes the clone's seq for
// its own and both write (see internal/sim's TestGlueMutantIsCaught).
func renewed(p store.RenewParams, r store.RenewResult) bool {
	return r.Renewed || (r.Grant.Holder == p.Holder && r.Grant.Token == p.Token && r.Grant.Remaining > 0)
}
