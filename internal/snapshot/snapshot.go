// Package snapshot is fault injection for clones: it makes a client believe
// it holds a tenure exactly as another process does, identity included,
// which is what a virtual machine snapshot restored a second time, or a
// fork, would believe. The chaos harness and the fences' tests use it to
// show that of two clones only one can go on writing (promise P6).
//
// Package tenure sets Take and Adopt when it is initialised, so that the
// hooks stay out of its exported API. Never use them to share leadership.
package snapshot

import (
	"context"
	"time"

	"github.com/tenure-dev/tenure/store"
)

// Tenure is what a snapshot of a holder process contains about one
// tenure: its lease, identity, token and renewal seq, and how long the
// holder still trusts it.
type Tenure struct {
	Name      string
	Holder    store.Holder
	Token     store.Token
	Seq       int64
	Remaining time.Duration
}

// The hooks, set by package tenure.
var (
	// Take returns the tenure of lease (a *tenure.Lease) as a snapshot of
	// its process would contain it; Remaining is 0 once it is not trusted.
	Take func(lease any) Tenure
	// Adopt makes client (a *tenure.Client) hold t as the process it was
	// taken from does, and returns the *tenure.Lease. The client must not
	// already have t.Name.
	Adopt func(ctx context.Context, client any, t Tenure) (lease any, err error)
)
