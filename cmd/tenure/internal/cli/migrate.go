package cli

import (
	"context"
	"flag"
	"fmt"
	"strings"

	"github.com/tenure-dev/tenure/cmd/tenure/internal/storeurl"
)

func migrateCommand() *command {
	return &command{
		summary:      "create or upgrade the store's schema, or print its SQL",
		synopsis:     "migrate [--print [--grant ROLE]] [--store URL]",
		interspersed: true,
		about: `Migrate creates or upgrades the store's schema. On PostgreSQL it creates
tenure's tables, token sequence and fence functions, and the fleet
registry's tables, in the schema and with the prefix the URL names; run it
as the schema's owner. It is safe to run concurrently and again.

With --print it connects to nothing and prints the SQL instead, for a DBA
to review and apply; --grant ROLE adds the grants a run-time role needs (no
DDL). An SQLite store creates its schema itself when it is opened: migrate
only reports its version, and --print prints that schema. Redis, etcd and
Consul keep no schema: migrate checks that the store answers and says there
is nothing to migrate, and --print is refused.`,
		setup: func(fs *flag.FlagSet) action {
			var o migrateOptions
			fs.BoolVar(&o.print, "print", false, "print the SQL instead of applying it")
			fs.StringVar(&o.grant, "grant", "", "with --print, also print the grants the run-time `ROLE` needs")
			fs.StringVar(&o.store, "store", "", storeUsage)
			return o.run
		},
	}
}

type migrateOptions struct {
	print bool
	grant string
	store string
}

func (o *migrateOptions) run(ctx context.Context, e *env, args []string) error {
	if len(args) != 0 {
		return usagef("migrate", "takes no arguments, got %q", strings.Join(args, " "))
	}
	if o.grant != "" && !o.print {
		return usagef("migrate", "--grant needs --print")
	}
	target, err := storeurl.Resolve(o.store, e.getenv)
	if err != nil {
		return err
	}
	if o.print {
		sql, err := target.MigrationSQL()
		if err != nil {
			return err
		}
		if o.grant != "" {
			grants, err := target.GrantSQL(o.grant)
			if err != nil {
				return err
			}
			sql = strings.TrimRight(sql, "\n") + "\n\n" + grants
		}
		_, err = fmt.Fprintln(e.stdout, strings.TrimRight(sql, "\n"))
		return err
	}
	opened, err := target.Open(ctx, storeurl.Options{})
	if err != nil {
		return err
	}
	defer func() { _ = opened.Close() }() // Nothing is left to do about a failed close.
	msg, err := opened.Migrate(ctx)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(e.stdout, msg)
	return err
}
