package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/tenure-dev/tenure"
	"github.com/tenure-dev/tenure/cmd/tenure/internal/doctor"
	"github.com/tenure-dev/tenure/cmd/tenure/internal/storeopen"
	"github.com/tenure-dev/tenure/cmd/tenure/internal/storeurl"
	"github.com/tenure-dev/tenure/store"
)

func doctorCommand() *command {
	return &command{
		summary:  "check a store and this host for what breaks leases, and say what to do",
		synopsis: "doctor [--ttl 30s] [--label L] [--json] [--store URL]",
		about: `Doctor examines the store as a holder on this host would meet it and prints
one finding per check, each OK, WARN or FAIL with what to do:

  reachable      the store answers; median and max of a few round trips
  schema         PostgreSQL/MySQL: migrated to this version, readable by the role
  ttl            --ttl makes a valid client (renewals, safety margin) and is
                 not below the store's minimum (etcd 2s, Consul session_ttl_min)
  clock          this host's clock against the store's (PostgreSQL, Redis,
                 MySQL; SQLite is this host; etcd and Consul have no wall-clock
                 expiry), and whether a clock steps over about one second
  lease-cycle    the lease "tenure-doctor" acquired, renewed and released:
                 the role may make every call the protocol needs
  notifications  the release was announced to a subscriber
  durability     Redis: persistence, replicas and eviction settings under which
                 acknowledged writes (leases, fences) can be lost
  identity       identity sources that look inherited: a live holder with
                 this host's label (--label, default the host name, as
                 tenure run) that no process on this host runs, and, with
                 the fleet registry (PostgreSQL), live agents sharing a
                 machine-id or hostname label: copies of one machine

The lease "tenure-doctor" stays in the store as one released record, however
often doctor runs (its token counter must outlive it); status and serve leave
it out of their lists of every lease, and show it when named. Doctor changes
nothing else. With --json it prints one object:
  {"store":"redis://…","ok":false,"findings":[{"check":"durability",
   "status":"WARN","detail":"appendonly=no: …","fix":"run with appendonly yes …"}]}

For drills, TENURE_DOCTOR_CLOCK_OFFSET=DURATION shifts this host's wall clock
as doctor reads it (-504h plays a host three weeks behind).

It exits 0 when no finding is a FAIL (warnings included), 1 when any is (an
unreachable store included), 64 for a bad flag or store URL.`,
		setup: func(fs *flag.FlagSet) action {
			var storeURL string
			ttl := durationFlag(fs, "ttl", tenure.DefaultTTL, "the lease TTL to judge, a `duration`")
			asJSON := fs.Bool("json", false, "print one JSON object instead of a table")
			label := fs.String("label", "", "the holder label this host's tenure run uses, for the identity check (default the host name)")
			fs.StringVar(&storeURL, "store", "", storeUsage)
			return func(ctx context.Context, e *env, args []string) error {
				if len(args) != 0 {
					return usagef("doctor", "takes no arguments, got %q", strings.Join(args, " "))
				}
				offset, err := doctor.ParseClockOffset(e.getenv(doctor.EnvClockOffset))
				if err != nil {
					return usagef("doctor", "%s", err)
				}
				if *label != "" {
					if err := (store.Holder{Label: *label, Instance: "x"}).Validate(); err != nil {
						return usagef("doctor", "--label: %s", message(err))
					}
				}
				opts := doctor.Options{TTL: *ttl, Clock: doctor.OffsetClock(tenure.NewSystemClock(), offset), Label: *label}
				return runDoctor(ctx, e, flagSet(fs, "store"), storeURL, *asJSON, opts)
			}
		},
	}
}

func runDoctor(ctx context.Context, e *env, given bool, storeURL string, asJSON bool, opts doctor.Options) error {
	if given && strings.TrimSpace(storeURL) == "" {
		return usagef("doctor", "--store is empty; give a store URL, or leave --store out for $%s or the default SQLite file", storeurl.EnvVar)
	}
	if storeURL == "" && envSetEmpty(e, storeurl.EnvVar) {
		return usagef("doctor", "%s is set but empty; set it to a store URL, or unset it to use the default SQLite file of this host", storeurl.EnvVar)
	}
	t, err := storeurl.Resolve(storeURL, e.getenv)
	if err != nil {
		return err
	}
	e.announceDefault(t, "to examine another store")
	var findings []doctor.Finding
	octx, cancel := context.WithTimeout(ctx, storeTimeout)
	opened, err := storeopen.Open(octx, t, storeopen.Options{})
	cancel()
	switch {
	case errors.Is(err, store.ErrInvalid):
		return err
	case err != nil:
		findings = []doctor.Finding{doctor.Unreachable(t.Display, err)}
	default:
		findings = doctor.Check(ctx, opened, opts)
		_ = opened.Close() // The findings are what doctor reports.
	}
	if ctx.Err() != nil {
		return fmt.Errorf("doctor: interrupted: %w", ctx.Err())
	}
	write := doctor.WriteTable
	if asJSON {
		write = doctor.WriteJSON
	}
	if err := write(e.stdout, t.Display, findings); err != nil {
		return err
	}
	if doctor.Failed(findings) {
		return &exitError{code: ExitFailure}
	}
	return nil
}
