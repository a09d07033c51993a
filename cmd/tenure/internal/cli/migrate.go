package cli

import (
	"context"
	"flag"
	"fmt"
	"strings"

	"github.com/tenure-dev/tenure/cmd/tenure/internal/storeopen"
	"github.com/tenure-dev/tenure/cmd/tenure/internal/storeurl"
	"github.com/tenure-dev/tenure/store"
)

func migrateCommand() *command {
	return &command{
		summary:      "create or upgrade the store's schema, or print its SQL",
		synopsis:     "migrate [--check | --print [--grant ROLE] [--grant-read ROLE] | --token-floor] [--store URL]",
		interspersed: true,
		about: `Migrate creates or upgrades the store's schema. On PostgreSQL it creates
tenure's tables, token sequence and fence functions, and the fleet
registry's tables, in the schema and with the prefix the URL names; run it
as the schema's owner. It is safe to run concurrently and again.

It reports, for each part of the schema, its version and functions before
and after. With --check it changes nothing: it reports them and exits 78
when migrate would change anything (the schema is behind this version of
tenure), 0 when it would not, for deploy pipelines; it reads the tables
that record migrations and functions, so run it as the owner (the
run-time role may not read them). Stores that keep no
schema say so and exit 0; an SQLite store upgrades its schema itself when
opened, so --check does not open it.

With --print it connects to nothing and prints the SQL instead, for a DBA
to review and apply. Roles on PostgreSQL:

  owner       runs migrate (or applies the printed SQL) and owns the tables,
              the token sequence and the functions; repairs fences (tenure
              fence reset). Keep it away from workers.
  run-time    --grant ROLE: what tenure run, the library, the fences and
              the fleet registry need, and nothing more: USAGE on the schema
              and EXECUTE on the lease, fence and registry functions, which
              run as the owner. It has no privilege on the tables or the
              sequence, so it cannot rewind or raise a fence, forge or
              extend a lease, move the token sequence or forge a heartbeat;
              a fence takes only tokens the sequence issued.
  read-only   --grant-read ROLE: tenure status, tenure history, tenure
              agents, tenure owner and dashboards: the functions that read
              leases, their history and the registry; it changes nothing.

Migrating an older schema takes the write privileges on the tables and the
sequence from every role but their owner: apply the --grant SQL of this
version to the run-time role afterwards.

An SQLite store creates its schema itself when it is opened: migrate
only reports its version, and --print prints that schema. Redis, etcd and
Consul keep no schema: migrate checks that the store answers and says there
is nothing to migrate, and --print is refused. A Kubernetes store (k8s://)
keeps none either; --print --grant ACCOUNT prints, as YAML for kubectl
apply, the Role its workers need on Lease objects, a RoleBinding of it to
the service account ACCOUNT and, for a cluster administrator to apply, an
admission policy that refuses any update of a lease's token other than
the store's own (the Role alone would let a worker rewrite it).

--token-floor, on PostgreSQL, as the owner, on a new primary after a
failover from asynchronous replication and before any worker acquires
there: it migrates, then raises the token sequence to the server's clock in
microseconds (or above every token the tables hold, if greater) and prints
it. The old primary's last commits may be lost, and with them the last
tokens it handed out, which the new primary would hand out again; the
clock is above all of them (pgstore.Store.RaiseTokenFloor says why).`,
		setup: func(fs *flag.FlagSet) action {
			var o migrateOptions
			fs.BoolVar(&o.check, "check", false, "change nothing: exit 78 when the schema is behind, 0 when it is current")
			fs.BoolVar(&o.print, "print", false, "print the SQL instead of applying it")
			fs.StringVar(&o.grant, "grant", "", "with --print, also print the grants the run-time `ROLE` needs")
			fs.StringVar(&o.grantRead, "grant-read", "", "with --print, also print the grants of a read-only `ROLE` (status, agents)")
			fs.BoolVar(&o.tokenFloor, "token-floor", false, "after a failover (PostgreSQL): raise the token sequence above every token handed out before")
			fs.StringVar(&o.store, "store", "", storeUsage)
			return o.run
		},
	}
}

type migrateOptions struct {
	check      bool
	print      bool
	grant      string
	grantRead  string
	tokenFloor bool
	store      string
}

func (o *migrateOptions) run(ctx context.Context, e *env, args []string) error {
	if len(args) != 0 {
		return usagef("migrate", "takes no arguments, got %q", strings.Join(args, " "))
	}
	if (o.grant != "" || o.grantRead != "") && !o.print {
		return usagef("migrate", "--grant and --grant-read need --print")
	}
	if o.tokenFloor && o.print {
		return usagef("migrate", "--token-floor changes the store; it does not go with --print")
	}
	if o.check && (o.print || o.tokenFloor) {
		return usagef("migrate", "--check changes nothing and prints no SQL; it does not go with --print or --token-floor")
	}
	target, err := storeurl.Resolve(o.store, e.getenv)
	if err != nil {
		return err
	}
	if o.check {
		return checkSchema(ctx, e, target)
	}
	if o.print {
		var sql string
		// A Kubernetes store has no schema, only the grants to print.
		if !target.Backend.Traits().GrantsAlone || o.grant == "" {
			if sql, err = storeopen.MigrationSQL(target); err != nil {
				return err
			}
		}
		if o.grant != "" {
			grants, err := storeopen.GrantSQL(target, o.grant)
			if err != nil {
				return err
			}
			sql = strings.TrimLeft(strings.TrimRight(sql, "\n")+"\n\n"+grants, "\n")
		}
		if o.grantRead != "" {
			grants, err := storeopen.ReadGrantSQL(target, o.grantRead)
			if err != nil {
				return err
			}
			sql = strings.TrimRight(sql, "\n") + "\n\n" + grants
		}
		_, err = fmt.Fprintln(e.stdout, strings.TrimRight(sql, "\n"))
		return err
	}
	if o.tokenFloor {
		if err := storeopen.TokenFloorSupported(target); err != nil {
			return err
		}
	}
	opened, err := storeopen.Open(ctx, target, storeopen.Options{Migrate: true})
	if err != nil {
		return err
	}
	defer func() { _ = opened.Close() }() // Nothing is left to do about a failed close.
	msg, err := opened.Migrate(ctx)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintln(e.stdout, msg); err != nil || !o.tokenFloor {
		return err
	}
	floor, err := opened.RaiseTokenFloor(ctx)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(e.stdout, "raised the token floor to %d: the next tenure's token is greater\n", floor)
	return err
}

// checkSchema is migrate --check: it prints the status of each part of
// the schema and fails with an error matching [store.ErrNotMigrated] (exit
// 78) when migrate would change any of it.
func checkSchema(ctx context.Context, e *env, target storeurl.Target) error {
	c, err := storeopen.CheckSchema(ctx, target, storeopen.Options{})
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintln(e.stdout, strings.Join(c.Lines, "\n")); err != nil {
		return err
	}
	if c.Behind {
		return fmt.Errorf("migrate --check: %w: the schema of %s is behind this version of tenure; run tenure migrate (as the schema's owner) to bring it up to date", store.ErrNotMigrated, target.Display)
	}
	return nil
}
