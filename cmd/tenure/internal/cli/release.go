package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tenure-dev/tenure/store"

	"github.com/tenure-dev/tenure/cmd/tenure/internal/storeopen"
)

// releaseAttempts bounds how often release --force retries when the lease
// changes hands under it.
const releaseAttempts = 3

func releaseCommand() *command {
	return &command{
		summary:      "release a lease: your own, or anyone's with --force",
		synopsis:     "release NAME [--force [--now]] [--store URL]",
		interspersed: true,
		about: `Release expires the lease NAME at the store now, keeping its token counter,
so the next holder gets a greater token and takes over at once (an
operator's --force differs: see below).

Without --force it releases only the caller's own tenure: TENURE_HOLDER and
TENURE_TOKEN, which tenure run gives its command, must match the lease.
Run inside a tenure run command, it asks that tenure run to release (over
the socket named by TENURE_RUN_CONTROL): the end is then the command's
doing, not a loss, and tenure run exits with the command's own status. The
next holder may start at once, so make the release the command's last act:
its tree is killed if it still runs the grace later. Elsewhere, or when
that tenure run no longer holds the lease, release asks the store directly.

With --force an operator ends the tenure of whoever holds the lease,
without ever letting the next holder start while the old holder's command
may still run:
  - PostgreSQL, MySQL/MariaDB, SQLite and Redis: release moves the holder's
    renewal chain on (a renewal in its name, with the seq it read, for the
    time the lease has left: its expiry stays where it was) and prints
    that time by the store's clock. The holder's next renewal, at most
    TTL/3 later, finds the chain moved on, and its tenure run stops the
    command (SIGTERM, SIGKILL after the grace), all within the time it
    trusts, which ends before that expiry. Nobody can take the lease
    before the expiry; a tenure run --wait takes it then, with a greater
    token. (Releasing at once would let the next holder in while the old
    one learns of it: a round trip later where the store notifies, at its
    next renewal on MySQL.)
  - etcd, Consul, NATS and Kubernetes renew without a new expiry (a
    keepalive, or a TTL fixed when the lease was made), so release expires
    the lease now; the holder hears the release within a round trip and
    SIGKILLs its command.
--now expires the lease at once on every store: the old holder's command
may go on beside the next holder's until the old holder hears of it (a
round trip on a store that notifies, its next renewal, up to TTL/3, on
MySQL), refused only where a fence checks its token. Use it when the
holder is known to be gone (its host is dead), not to hurry a live one.

Either way the holder is fenced: a fence refuses its token as soon as a
greater token is recorded (tenure_check_lease and mysqlfence's strict
check refuse it at once, since its chain moved on). tenure history records
--now as force-released where the store keeps a history (PostgreSQL,
SQLite); a forced release without --now shows there as the next holder's
takeover at the expiry.

A lease that is not held, or does not exist, is left as it is: release
says so on standard output and exits 0, as nobody holds it either way.

Without --store and TENURE_STORE, release uses this host's SQLite file
(saying so on standard error when that call creates the file); an empty
--store or TENURE_STORE is refused (exit 64).`,
		setup: func(fs *flag.FlagSet) action {
			var o releaseOptions
			fs.BoolVar(&o.force, "force", false, "end the tenure of whoever holds the lease; the next holder waits out the time it has left (PostgreSQL, MySQL, SQLite, Redis)")
			fs.BoolVar(&o.now, "now", false, "with --force, expire the lease at once on every store; the old holder's command may run beside the next holder's until the old holder hears of it")
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
	now        bool
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
	if o.now && !o.force {
		return usagef("release", "--now goes with --force: it says how an operator's forced release ends another holder's tenure; your own tenure is released at once anyway")
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
			fmt.Fprintf(e.stdout, "lease %q does not exist in %s; nothing to release\n", name, opened.Target.Display)
			return nil
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
		if o.force && !o.now && opened.Target.Backend.Traits().RenewKeepsExpiry {
			done, err := standDown(ctx, e, opened, name, rec)
			if err != nil {
				return err
			}
			if done {
				return nil
			}
			continue // It changed (a renewal, a release) between the two calls: look again.
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
		o.report(e, opened, name, rec)
		return nil
	}
	return fmt.Errorf("lease %q changed hands %d times while being released; try again", name, releaseAttempts)
}

// report says what a release of rec did: for a forced one, how its holder
// learns of it and where its token is refused.
func (o *releaseOptions) report(e *env, opened *storeopen.Opened, name string, rec store.Record) {
	// A holder hears of a forced release only where the store tells it:
	// MySQL's bells wake followers, never the holder.
	_, notifies := opened.Store.(store.Notifier)
	notifies = notifies && opened.Target.Backend.Traits().NoNotify == ""
	switch {
	case o.force && !notifies:
		fmt.Fprintf(e.stdout, "released lease %q; its holder %s with token %d is now fenced: a fence refuses token %d once a greater token is recorded; the next holder may start at once, but this store sends no notification: the old holder learns of the release only at its next renewal, and until then its work may run on beside the next holder, refused only where a fence checks its token\n",
			name, rec.Holder, rec.Token, rec.Token)
	case o.force && opened.Target.Backend.Traits().LeaseCheck != "":
		tr := opened.Target.Backend.Traits()
		fmt.Fprintf(e.stdout, "released lease %q; its holder %s with token %d is now fenced: %s refuses token %d at once and %s refuses it once a greater token is recorded; the next holder gets a greater token\n",
			name, rec.Holder, rec.Token, tr.LeaseCheck, rec.Token, tr.Fence)
	case o.force:
		fmt.Fprintf(e.stdout, "released lease %q; its holder %s with token %d is now fenced: a fence refuses token %d once a greater token is recorded; the next holder gets a greater token\n",
			name, rec.Holder, rec.Token, rec.Token)
	default:
		fmt.Fprintf(e.stdout, "released lease %q (token %d)\n", name, rec.Token)
	}
}

// standDown ends the tenure rec of lease name without letting the next
// holder in before its holder has stood down. A renewal in the holder's name, a compare-and-set on
// the seq Get read, moves the holder's renewal chain on, so that its own
// next renewal fails as a seq mismatch and it stands down. The TTL is the
// time rec had left, rounded up to a millisecond, so the store's expiry
// stays where it was (the store sets it to its now + TTL, and its now has
// moved on since Get). No one else can acquire the lease before that
// expiry, which comes after the end of the time the holder trusts (its
// deadline is its last renewal's send time + the time granted − a
// margin). It reports false when the lease changed between Get and the
// renewal.
func standDown(ctx context.Context, e *env, opened *storeopen.Opened, name string, rec store.Record) (bool, error) {
	ttl := max(rec.Remaining, time.Millisecond)
	if r := ttl % time.Millisecond; r != 0 {
		ttl += time.Millisecond - r
	}
	sctx, cancel := withStoreTimeout(ctx)
	res, err := opened.Store.Renew(sctx, []store.RenewParams{{Name: name, Holder: rec.Holder, Token: rec.Token, Seq: rec.Seq, TTL: ttl}})
	cancel()
	if err != nil {
		return false, opened.Target.Wrap(err)
	}
	if len(res) != 1 || !res[0].Renewed {
		return false, nil
	}
	fmt.Fprintf(e.stdout, "lease %q: the renewal chain of its holder %s with token %d moved on and the lease keeps its expiry: the holder stands down at its next renewal, and the next holder can take it in %s by the store's clock, with a greater token (released at once, the lease would let the next holder in before the old one heard of it; --now does that, for a holder known to be gone)\n",
		name, rec.Holder, rec.Token, remaining(res[0].Grant.Remaining))
	return true, nil
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
