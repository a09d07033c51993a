package storeopen

import (
	"context"
	"errors"
	"fmt"

	"github.com/tenure-dev/tenure/cmd/tenure/internal/storeurl"
	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/sqlitestore"
)

// SchemaCheck is the answer of `tenure migrate --check`: one line per
// part of the store's schema, and whether [Opened.Migrate] would change
// any of it.
type SchemaCheck struct {
	Lines  []string
	Behind bool
}

// CheckSchema reports whether the schema of the store t names is behind
// what [Opened.Migrate] would make, and changes nothing. PostgreSQL reports
// the store's and the fleet registry's migrations and functions, MySQL its
// migrations and procedures, NATS whether its bucket exists. An SQLite
// file is not opened (opening creates and upgrades it): it keeps its
// schema up to date itself. Redis, etcd, Consul, Kubernetes and the
// always-leader store keep no schema. Those report one line, never behind.
func CheckSchema(ctx context.Context, t storeurl.Target, opts Options) (SchemaCheck, error) {
	switch t.Kind {
	case storeurl.Postgres, storeurl.MySQL, storeurl.Nats:
	case storeurl.SQLite:
		return SchemaCheck{Lines: []string{fmt.Sprintf("the SQLite store %s creates and upgrades its schema (version %d) itself when it is opened: nothing to check",
			t.Display, sqlitestore.SchemaVersion)}}, nil
	default:
		return SchemaCheck{Lines: []string{fmt.Sprintf("the %s store %s keeps no schema: nothing to check", t.Kind.Name(), t.Display)}}, nil
	}
	opts.Migrate = false
	o, err := Open(ctx, t, opts)
	if t.Kind == storeurl.Nats && errors.Is(err, store.ErrNotMigrated) {
		return SchemaCheck{Lines: []string{fmt.Sprintf("the NATS store %s has no bucket yet: %v", t.Display, err)}, Behind: true}, nil
	}
	if err != nil {
		return SchemaCheck{}, err
	}
	defer func() { _ = o.Close() }() // Nothing was changed; a failed close leaves nothing to do.
	if o.nats != nil {
		return SchemaCheck{Lines: []string{o.migrateNats() + ": nothing to migrate"}}, nil
	}
	parts, err := o.schemaStatus(ctx)
	if err != nil {
		return SchemaCheck{}, err
	}
	var c SchemaCheck
	for _, p := range parts {
		c.Lines = append(c.Lines, p.what+": "+p.status.String())
		c.Behind = c.Behind || p.status.Behind()
	}
	return c, nil
}

// schemaPart is the status of one part of a store's schema.
type schemaPart struct {
	what   string
	status store.SchemaStatus
}

// schemaStatus reads the status of each part of a PostgreSQL or MySQL
// store's schema; none for other stores.
func (o *Opened) schemaStatus(ctx context.Context) ([]schemaPart, error) {
	switch {
	case o.mysql != nil:
		st, err := o.mysql.SchemaStatus(ctx)
		if err != nil {
			return nil, o.Target.Wrap(err)
		}
		return []schemaPart{{"MySQL store " + o.Target.Display, st}}, nil
	case o.pg != nil:
		st, err := o.pg.SchemaStatus(ctx)
		if err != nil {
			return nil, o.Target.Wrap(err)
		}
		reg, err := o.Registry()
		if err != nil {
			return nil, err
		}
		fleet, err := reg.SchemaStatus(ctx)
		if err != nil {
			return nil, o.Target.Wrap(err)
		}
		return []schemaPart{{"PostgreSQL store " + o.Target.Display, st}, {"fleet registry", fleet}}, nil
	}
	return nil, nil
}

// versionLines says, for each part of the schema, its status before and
// after a migration.
func versionLines(before, after []schemaPart) string {
	var out string
	for i, a := range after {
		out += fmt.Sprintf("\n%s: before: %s; now: %s", a.what, before[i].status, a.status)
	}
	return out
}
