package fence

import "errors"

// ErrNotIssued is matched by the refusal of a token its lease store never
// handed out: greater than the store's token counter (pgfence's fence
// function reads the token sequence, redisfence the counter key it was
// given). Such a token is a bug or an attack, never a superseded holder;
// accepting it would refuse every legitimate writer from then on. The
// refusal changes nothing and also matches store.ErrInvalid.
var ErrNotIssued = errors.New("tenure: fence: token was never issued")
