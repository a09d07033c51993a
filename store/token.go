package store

import "strconv"

// Token is a fencing token: a number that only goes up for a lease name
// (promise P2). Every new tenure gets a greater one; renewals keep it. A
// resource that remembers the highest token it accepted and refuses lower
// ones cannot be written by a holder that was superseded (promise P4).
//
// The zero Token means "not held".
type Token int64

// String returns the token in decimal, as it appears in TENURE_TOKEN.
func (t Token) String() string { return strconv.FormatInt(int64(t), 10) }
