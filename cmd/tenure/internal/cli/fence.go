package cli

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/tenure-dev/tenure/store"
)

func fenceCommand() *command {
	return &command{
		summary:      "repair a poisoned fence, audited (PostgreSQL, as the schema's owner)",
		synopsis:     "fence reset RESOURCE --to N --reason TEXT [--store URL]",
		interspersed: true,
		words:        func() []string { return []string{"reset"} },
		about: `Fence reset repairs the fence of RESOURCE in a PostgreSQL store: it sets
the highest token the resource accepted to N and prints the token it
replaced. Use it when a fence was poisoned, that is when it recorded a token
so high that every legitimate writer is refused, for example by a caller of
fence_foreign or by a role that once had write privileges on the fences
table. N may be 0 up to the last token the store issued; 0 lets the next
writer's token through whatever it is.

Every reset is recorded in the fence_resets table of the store's schema and
prefix (tenure_fence_resets by default): the resource, the old and new
token, --reason, the role that ran it (current_user and session_user) and
the server's time. --reason is required.

Run it as the schema's owner: the run-time role that tenure migrate --print
--grant sets up may not reset fences (permission denied, exit 1). Lowering
a fence lets a writer through that it refused before: stop the writers that
poisoned it first, and choose N no lower than the token of the last write
you know was accepted. Other stores are refused (exit 64).`,
		setup: func(fs *flag.FlagSet) action {
			var o fenceOptions
			fs.StringVar(&o.to, "to", "", "set the fence to the token `N` (0 up to the last token issued)")
			fs.StringVar(&o.reason, "reason", "", "why, recorded with the reset (required)")
			fs.StringVar(&o.store, "store", "", "store `URL`: postgres://… or postgresql://… (default $TENURE_STORE)")
			return func(ctx context.Context, e *env, args []string) error {
				o.storeGiven = flagSet(fs, "store")
				return o.run(ctx, e, args)
			}
		},
	}
}

type fenceOptions struct {
	to, reason string
	store      string
	storeGiven bool
}

func (o *fenceOptions) run(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 || args[0] != "reset" {
		return usagef("fence", "the only subcommand is reset: tenure fence reset RESOURCE --to N --reason TEXT")
	}
	if len(args) != 2 {
		return usagef("fence", "reset takes one RESOURCE, got %d arguments", len(args)-1)
	}
	resource := args[1]
	if err := store.ValidateText("resource", resource, store.MaxNameLen); err != nil {
		return usagef("fence", "%s", message(err))
	}
	if o.to == "" {
		return usagef("fence", "--to N is required: the token to set the fence to")
	}
	to, err := strconv.ParseInt(o.to, 10, 64)
	if err != nil || to < 0 {
		return usagef("fence", "--to %q is not a token: give a whole number from 0 up to the last token the store issued", o.to)
	}
	if strings.TrimSpace(o.reason) == "" {
		return usagef("fence", "--reason is required: it is recorded with the reset")
	}
	opened, err := e.openStore(ctx, "fence", o.storeGiven, o.store)
	if err != nil {
		return err
	}
	defer func() { _ = opened.Close() }() // Nothing is left to do about a failed close.
	cctx, cancel := withStoreTimeout(ctx)
	defer cancel()
	old, err := opened.ResetFence(cctx, resource, store.Token(to), o.reason)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(e.stdout, "reset the fence of %s from %d to %d; recorded with the reason %s\n",
		strconv.Quote(resource), old, to, strconv.Quote(o.reason))
	return err
}
