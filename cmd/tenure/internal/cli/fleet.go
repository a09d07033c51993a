package cli

import (
	"context"
	"flag"
	"io"
	"strings"

	"github.com/tenure-dev/tenure/cmd/tenure/internal/registrycli"
	"github.com/tenure-dev/tenure/cmd/tenure/internal/storeopen"
	"github.com/tenure-dev/tenure/cmd/tenure/internal/storeurl"
	"github.com/tenure-dev/tenure/registry"
)

// fleetStore is the store part of the usage of agents and owner.
const fleetStore = " [--store postgres://…]"

func agentsCommand() *command {
	return &command{
		summary:      "list the fleet's agents and their heartbeats (PostgreSQL)",
		synopsis:     registrycli.AgentsUsage + fleetStore,
		interspersed: true,
		about: `Agents lists every agent of the fleet registry: its state (alive, stale or
deregistered), the age of its last heartbeat by the store's clock, how many
resources it owns, its address, instance and labels. With --json it prints
one JSON object on one line.

The fleet registry lives in PostgreSQL, in the schema and with the table
prefix of the store URL; tenure migrate creates its tables. Any other store
is refused (exit 64).`,
		setup: func(fs *flag.FlagSet) action {
			o := fleetOptions{cmd: "agents", call: registrycli.Agents}
			o.flags(fs)
			return o.run
		},
	}
}

func ownerCommand() *command {
	return &command{
		summary:      "say who owns a resource: alive (exit 0), none (3) or dead (4) (PostgreSQL)",
		synopsis:     registrycli.OwnerUsage + fleetStore,
		interspersed: true,
		about: `Owner answers who owns RESOURCE in the fleet registry, with one of three
outcomes and exit codes a script can branch on:

  0  the owner is alive: its agent, address and heartbeat age by the
     store's clock
  3  the resource has no owner (it was never placed, or was removed)
  4  the owner is dead (stale or deregistered by the store's clock). Do not
     place the resource elsewhere: its data is on that host. Wait for the
     agent, or reassign the resource deliberately.

With --json it prints one JSON object on one line, whose "outcome" is
"alive", "no_owner" or "owner_dead".

The fleet registry lives in PostgreSQL, in the schema and with the table
prefix of the store URL; tenure migrate creates its tables. Any other store
is refused (exit 64).`,
		setup: func(fs *flag.FlagSet) action {
			o := fleetOptions{cmd: "owner", call: registrycli.Owner}
			o.flags(fs)
			return o.run
		},
	}
}

// fleetOptions are the flags of agents and owner, which registrycli runs.
type fleetOptions struct {
	cmd   string
	call  func(ctx context.Context, reg *registry.Registry, args []string, stdout, stderr io.Writer) int
	json  bool
	store string
}

func (o *fleetOptions) flags(fs *flag.FlagSet) {
	fs.BoolVar(&o.json, "json", false, "print JSON, one object on one line")
	fs.StringVar(&o.store, "store", "", "store `URL`: postgres://… or postgresql://…, the fleet registry's database (default $"+storeurl.EnvVar+")")
}

func (o *fleetOptions) run(ctx context.Context, e *env, args []string) error {
	switch {
	case o.cmd == "agents" && len(args) != 0:
		return usagef(o.cmd, "takes no arguments, got %q", strings.Join(args, " "))
	case o.cmd == "owner" && len(args) != 1:
		return usagef(o.cmd, "takes one RESOURCE, got %d arguments", len(args))
	case o.cmd == "owner":
		if err := registry.ValidateResource(args[0]); err != nil {
			return usagef(o.cmd, "%s", message(err))
		}
	}
	target, err := storeurl.Resolve(o.store, e.getenv)
	if err != nil {
		return err
	}
	if _, err := storeopen.RegistryConfig(target); err != nil {
		return err
	}
	opened, err := storeopen.Open(ctx, target, storeopen.Options{})
	if err != nil {
		return err
	}
	defer func() { _ = opened.Close() }() // Nothing is left to do about a failed close.
	reg, err := opened.Registry()
	if err != nil {
		return err
	}
	var fwd []string
	if o.json {
		fwd = append(fwd, "--json")
	}
	fwd = append(append(fwd, "--"), args...)
	sctx, cancel := withStoreTimeout(ctx)
	defer cancel()
	code := o.call(sctx, reg, fwd, e.stdout, redactingWriter{w: e.stderr, target: target})
	if code == ExitOK {
		return nil
	}
	return &exitError{code: code}
}

// redactingWriter masks the store URL's secrets in what passes through it.
type redactingWriter struct {
	w      io.Writer
	target storeurl.Target
}

func (r redactingWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(r.w, r.target.Redact(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}
