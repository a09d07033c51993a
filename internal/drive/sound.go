//go:build !tenure_glue_mutant

package drive

import "github.com/tenure-dev/tenure/store"

// renewed reports whether the store renewed p: its compare-and-set on
// holder, token and seq matched. Nothing else counts, not even the same
// holder and token at another seq (a clone's, promise P6).
func renewed(_ store.RenewParams, r store.RenewResult) bool { return r.Renewed }
