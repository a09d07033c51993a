package tenure

import "github.com/tenure-dev/tenure/store"

// The store types a user touches, defined by package store for backends and
// the same types here.

// Token is a fencing token: it only goes up for a lease name (promise P2),
// and the zero Token means "not held". Pass it with every write to a
// fenced resource.
type Token = store.Token

// Holder identifies one holder instance (promise P5): a label and an
// instance id made in memory and regenerated whenever leadership is lost or
// revoked.
type Holder = store.Holder

// Store is the contract a backend implements (see package store): the
// type a [Client] is made over, for code that passes stores around.
type Store = store.Store
