package storeurl

import (
	"context"
	"strings"

	"github.com/tenure-dev/tenure/store"

	"github.com/tenure-dev/tenure/fence/pgfence"
)

// ReadGrantSQL returns the SQL that grants role read-only access to the
// store and the fleet registry (for tenure status, agents and
// dashboards): it can list and get leases and read the registry, and
// change nothing. Like [Target.GrantSQL] it exists for PostgreSQL only.
func (t Target) ReadGrantSQL(role string) (string, error) {
	switch t.Kind {
	case Postgres:
	case MySQL:
		return "", newError(store.ErrInvalid, nil, "storeurl: read-only grants exist for PostgreSQL only: on MySQL, tenure status needs the run-time grants that --grant prints")
	default:
		return t.GrantSQL(role) // the same refusal, saying why
	}
	leases, err := t.PG.ReadGrantSQL(role)
	if err != nil {
		return "", newError(store.ErrInvalid, err, "storeurl: %v", err)
	}
	fleet, err := t.registryConfig().ReadGrantSQL(role)
	if err != nil {
		return "", newError(store.ErrInvalid, err, "storeurl: %v", err)
	}
	return strings.TrimRight(leases, "\n") + "\n" + fleet, nil
}

// ResetFence sets the fence of resource in an open PostgreSQL store to
// tok and records the reset with reason ([pgfence.Fencer.Reset]); it
// returns the token it replaced. Only the schema's owner may: the run-time
// role is refused. For another store it fails with an error matching
// [store.ErrInvalid].
func (o *Opened) ResetFence(ctx context.Context, resource string, tok store.Token, reason string) (store.Token, error) {
	if o.pg == nil {
		return 0, newError(store.ErrInvalid, nil,
			"storeurl: fence reset repairs the fences of a PostgreSQL store, not of the %s store %s; pass --store postgres://… or set %s",
			o.Target.Kind.Name(), o.Target.Display, EnvVar)
	}
	f, err := pgfence.New(o.Target.PG)
	if err != nil {
		return 0, newError(store.ErrInvalid, err, "storeurl: %s", o.Target.Redact(err.Error()))
	}
	old, err := f.Reset(ctx, o.pool, resource, tok, reason)
	if err != nil {
		return 0, o.Target.Wrap(err)
	}
	return old, nil
}
