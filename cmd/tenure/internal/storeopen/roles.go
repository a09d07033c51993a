package storeopen

import (
	"context"
	"strings"

	"github.com/tenure-dev/tenure/store"

	"github.com/tenure-dev/tenure/cmd/tenure/internal/storeurl"
	"github.com/tenure-dev/tenure/fence/pgfence"
)

// ReadGrantSQL returns the SQL that grants role read-only access to the
// store t names and the fleet registry (for tenure status, agents and
// dashboards): it can list and get leases and read the registry, and
// change nothing. It exists for PostgreSQL only.
func ReadGrantSQL(t storeurl.Target, role string) (string, error) {
	switch t.Kind {
	case storeurl.Postgres:
	case storeurl.MySQL:
		return "", storeurl.Errorf(store.ErrInvalid, nil, "storeurl: read-only grants exist for PostgreSQL only: on MySQL, tenure status needs the run-time grants that --grant prints")
	default:
		return GrantSQL(t, role) // the same refusal, saying why
	}
	pg, fleet, err := postgresConfigs(t)
	if err != nil {
		return "", err
	}
	leases, err := pg.ReadGrantSQL(role)
	if err != nil {
		return "", storeurl.Errorf(store.ErrInvalid, err, "storeurl: %v", err)
	}
	registrySQL, err := fleet.ReadGrantSQL(role)
	if err != nil {
		return "", storeurl.Errorf(store.ErrInvalid, err, "storeurl: %v", err)
	}
	return strings.TrimRight(leases, "\n") + "\n" + registrySQL, nil
}

// ResetFence sets the fence of resource in an open PostgreSQL store to
// tok and records the reset with reason ([pgfence.Fencer.Reset]); it
// returns the token it replaced. Only the schema's owner may: the run-time
// role is refused. For another store it fails with an error matching
// [store.ErrInvalid].
func (o *Opened) ResetFence(ctx context.Context, resource string, tok store.Token, reason string) (store.Token, error) {
	if o.pg == nil {
		return 0, storeurl.Errorf(store.ErrInvalid, nil,
			"storeurl: fence reset repairs the fences of a PostgreSQL store, not of the %s store %s; pass --store postgres://… or set %s",
			o.Target.Kind.Name(), o.Target.Display, storeurl.EnvVar)
	}
	cfg, _, err := postgresConfigs(o.Target)
	if err != nil {
		return 0, err
	}
	f, err := pgfence.New(cfg)
	if err != nil {
		return 0, storeurl.Errorf(store.ErrInvalid, err, "storeurl: %s", o.Target.Redact(err.Error()))
	}
	old, err := f.Reset(ctx, o.pool, resource, tok, reason)
	if err != nil {
		return 0, o.Target.Wrap(err)
	}
	return old, nil
}
