package fence

import (
	"fmt"

	"github.com/tenure-dev/tenure/store"
)

// ValidateWrite checks what every fenced write gets, before it reaches a
// resource: resource must be a name a store could hold ([store.ValidateText]
// with [store.MaxNameLen]: 1 to 255 bytes of valid UTF-8 without control
// characters, bidirectional controls, zero-width or other invisible format
// characters), and tok must pass [ValidateToken]. Every fence in tenure
// (pgfence, mysqlfence, redisfence, httpfence, s3fence, sqlitestore.Fence,
// consulstore's FenceOps) applies this one rule, so a resource name one
// accepts, all accept. The error matches [store.ErrInvalid], says what was wrong and
// what to do; callers prefix it with their package and operation.
func ValidateWrite(resource string, tok store.Token) error {
	if err := store.ValidateText("resource", resource, store.MaxNameLen); err != nil {
		return fmt.Errorf("%w; name the resource the write changes with 1 to %d bytes of visible UTF-8 characters", err, store.MaxNameLen)
	}
	if err := ValidateToken(tok); err != nil {
		return fmt.Errorf("%w (resource %q)", err, resource)
	}
	return nil
}

// ValidateToken checks the token a fenced write carries: it must be
// positive. Token 0 is what a lease reports once it is no longer trusted
// (or before it was ever held), so a write carrying it must not be made.
// The error matches [store.ErrInvalid].
func ValidateToken(tok store.Token) error {
	switch {
	case tok == 0:
		return fmt.Errorf("%w: token is 0: the lease is no longer trusted; do not write, acquire the lease again", store.ErrInvalid)
	case tok < 0:
		return fmt.Errorf("%w: token %d is negative; pass the token the store handed out with the lease", store.ErrInvalid, tok)
	}
	return nil
}
