package storeurl

import (
	"context"
	"net/url"
	"strings"

	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/alwaysleader"
)

// Always is an always:REASON URL: store/alwaysleader, for genuinely
// idempotent jobs: every holder leads at once.
type Always struct {
	// Reason is why the job may run anywhere, any number of times at once.
	Reason string
}

// Name is "always-leader".
func (*Always) Name() string { return "always-leader" }

// Form is how an always-leader URL is written.
func (*Always) Form() string { return "always:REASON" }

// Traits of the always-leader store: it keeps no time and no leases.
func (a *Always) Traits() Traits {
	return Traits{Reason: a.Reason,
		NoClock:  "the always-leader store keeps no time: no offset to check",
		NoNotify: "the always-leader store keeps no leases: nobody waits for a release"}
}

// parseAlways reads always:REASON; the reason may be percent-encoded. What
// a reason may be is store/alwaysleader's to say, when the store is opened.
func parseAlways(raw string) (Target, error) {
	_, rest, _ := strings.Cut(raw, ":")
	reason, err := url.PathUnescape(rest)
	if err != nil {
		return Target{}, Errorf(store.ErrInvalid, err, "storeurl: store URL %q: the reason is not valid percent-encoding: %v", raw, err)
	}
	return Target{Backend: &Always{Reason: reason}, Display: "always:" + reason}, nil
}

// Open makes the store; it refuses an empty reason.
func (a *Always) Open(_ context.Context, t Target, _ OpenOptions) (Conn, error) {
	st, err := alwaysleader.New(a.Reason)
	if err != nil {
		return nil, Errorf(store.ErrInvalid, err, "storeurl: store URL %q: %v; write always:REASON, e.g. always:the%%20report%%20is%%20idempotent", t.Display, err)
	}
	return alwaysConn{baseConn{t: t, st: st}}, nil
}

// MigrationSQL refuses: the store keeps no schema.
func (*Always) MigrationSQL(t Target) (string, error) { return noSchema(t) }

// GrantSQL refuses: the store has no roles.
func (*Always) GrantSQL(t Target, _ string) (string, error) { return noGrant(t) }

// ReadGrantSQL refuses as GrantSQL does.
func (*Always) ReadGrantSQL(t Target, _ string) (string, error) { return noGrant(t) }

type alwaysConn struct{ baseConn }

// Migrate says there is nothing to migrate.
func (alwaysConn) Migrate(context.Context) (string, error) {
	return "the always-leader store keeps nothing: nothing to migrate", nil
}

var (
	_ Backend = (*Always)(nil)
)
