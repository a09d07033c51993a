package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/tenure-dev/tenure/store"

	"github.com/tenure-dev/tenure/cmd/tenure/internal/storeurl"
)

// releaseAttempts bounds how often release --force retries when the lease
// changes hands under it.
const releaseAttempts = 3

func releaseCommand() *command {
	return &command{
		summary:      "release a lease: your own, or anyone's with --force",
		synopsis:     "release NAME [--force] [--store URL]",
		interspersed: true,
		about: `Release expires the lease NAME at the store now, keeping its token counter,
so the next holder gets a greater token and takes over at once.

Without --force it releases only the caller's own tenure: TENURE_HOLDER and
TENURE_TOKEN, which tenure run gives its command, must match the lease.
Run inside a tenure run command, it asks that tenure run to release (over
the socket named by TENURE_RUN_CONTROL): the end is then the command's
doing, not a loss, and tenure run exits with the command's own status. The
next holder may start at once, so make the release the command's last act:
its tree is killed if it still runs the grace later. Elsewhere, or when
that tenure run no longer holds the lease, release asks the store directly.

With --force an operator expires whoever holds the lease. Its holder is
fenced from then on: a fence refuses its token as soon as a greater token
is recorded (on PostgreSQL, tenure_fence does, and tenure_check_lease
refuses it at once). If it runs under tenure run on a store that notifies
(PostgreSQL, Redis, etcd, Consul), that tenure run hears of it within a
round trip and SIGKILLs its command at once (the lease is already gone);
on SQLite, at its next renewal.

Without --store and TENURE_STORE, release uses this host's SQLite file
(saying so on standard error when that call creates the file); an empty --store or TENURE_STORE is refused
(exit 64).`,
		setup: func(fs *flag.FlagSet) action {
			var o releaseOptions
			fs.BoolVar(&o.force, "force", false, "expire the lease whoever holds it")
			fs.StringVar(&o.store, "store", "", storeUsage)
			return func(ctx context.Context, e *env, args []string) error {
				o.storeGiven = flagSet(fs, "store")
				return o.run(ctx, e, args)
			}
		},
	}
}

type releaseOptions struct {
	force      bool
	store      string
	storeGiven bool
}

func (o *releaseOptions) run(ctx context.Context, e *env, args []string) error {
	if len(args) != 1 {
		return usagef("release", "takes one lease NAME, got %d arguments", len(args))
	}
	name := args[0]
	if err := store.ValidateName(name); err != nil {
		return usagef("release", "%s", message(err))
	}
	var (
		own   store.Holder
		token store.Token
	)
	if !o.force {
		var err error
		if own, token, err = ownTenure(e.getenv); err != nil {
			return err
		}
	}
	if path := e.getenv(EnvControl); !o.force && path != "" && e.getenv(EnvLease) == name {
		// Inside a tenure run command: ask that tenure run to release, so
		// that it takes the end as the command's doing, not as a loss.
		rep, err := askControl(path, controlRequest{Op: "release", Lease: name, Holder: own.String(), Token: int64(token)})
		switch {
		case err != nil && !rep.Fallback && rep.Error != "":
			return err
		case err == nil && rep.Released:
			fmt.Fprintf(e.stdout, "released lease %q (token %d)\n", name, rep.Token)
			return nil
		}
		// No such tenure run, or not its live tenure: ask the store.
	}
	opened, err := e.openStore(ctx, "release", o.storeGiven, o.store)
	if err != nil {
		return err
	}
	defer func() { _ = opened.Close() }() // Nothing is left to do about a failed close.

	for range releaseAttempts {
		sctx, cancel := withStoreTimeout(ctx)
		rec, err := opened.Store.Get(sctx, name)
		cancel()
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("lease %q does not exist in %s; nothing to release", name, opened.Target.Display)
		}
		if err != nil {
			return opened.Target.Wrap(err)
		}
		if rec.State != store.StateHeld {
			fmt.Fprintf(e.stdout, "lease %q is not held (%s, last token %d); nothing to release\n", name, rec.State, rec.Token)
			return nil
		}
		if !o.force && (rec.Holder != own || rec.Token != token) {
			return &exitError{code: ExitNotAcquired, err: fmt.Errorf("lease %q is held by %s with token %d, not by %s with token %d; not released (an operator may use --force)",
				name, rec.Holder, rec.Token, own, token)}
		}
		release := opened.Store.Release
		if fr, ok := opened.Store.(store.ForceReleaser); ok && o.force {
			release = fr.ForceRelease // the history tells it from the holder's own
		}
		sctx, cancel = withStoreTimeout(ctx)
		err = release(sctx, store.ReleaseParams{Name: name, Holder: rec.Holder, Token: rec.Token})
		cancel()
		if errors.Is(err, store.ErrNotHeld) {
			continue // It changed hands or expired between the two calls: look again.
		}
		if err != nil {
			return opened.Target.Wrap(err)
		}
		switch {
		case o.force && opened.Target.Kind == storeurl.Postgres:
			fmt.Fprintf(e.stdout, "released lease %q; its holder %s with token %d is now fenced: tenure_check_lease refuses token %d at once and tenure_fence refuses it once a greater token is recorded; the next holder gets a greater token\n",
				name, rec.Holder, rec.Token, rec.Token)
		case o.force:
			fmt.Fprintf(e.stdout, "released lease %q; its holder %s with token %d is now fenced: a fence refuses token %d once a greater token is recorded; the next holder gets a greater token\n",
				name, rec.Holder, rec.Token, rec.Token)
		default:
			fmt.Fprintf(e.stdout, "released lease %q (token %d)\n", name, rec.Token)
		}
		return nil
	}
	return fmt.Errorf("lease %q changed hands %d times while being released; try again", name, releaseAttempts)
}

// ownTenure reads the caller's tenure from TENURE_HOLDER and TENURE_TOKEN,
// as tenure run sets them.
func ownTenure(getenv func(string) string) (store.Holder, store.Token, error) {
	hs, ts := getenv(EnvHolder), getenv(EnvToken)
	if hs == "" || ts == "" {
		return store.Holder{}, 0, usagef("release", "without --force, release gives up the caller's own lease and needs %s and %s, which tenure run sets for its command; to expire someone else's lease add --force", EnvHolder, EnvToken)
	}
	i := strings.LastIndex(hs, "/")
	h := store.Holder{Label: hs[:max(i, 0)], Instance: hs[i+1:]}
	if i < 0 || h.Validate() != nil {
		return store.Holder{}, 0, usagef("release", "%s=%q is not a holder; it must be label/instance, as tenure run sets it", EnvHolder, hs)
	}
	t, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || t <= 0 {
		return store.Holder{}, 0, usagef("release", "%s=%q is not a token; it must be a positive integer, as tenure run sets it", EnvToken, ts)
	}
	return h, store.Token(t), nil
}
