package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/tenure-dev/tenure/store"
)

func historyCommand() *command {
	return &command{
		summary:      "show who held a lease, with which token, and why it moved",
		synopsis:     "history NAME [--since DURATION|TIME] [--limit N] [--json] [--store URL]",
		interspersed: true,
		about: `History shows the recorded events of the lease NAME, oldest first, by the
store's clock: granted (a new tenure on an absent or released lease),
taken-over (a new tenure after the previous one expired without a release:
its holder stopped renewing), released (by its holder) and force-released
(tenure release --force). Each names the holder (label/instance) and token of
the tenure it is about; a new tenure also names the one before it. Renewals
record nothing. The windows of run --once-per show as window-started (and
the tenure it took over from, after a failed or half-run attempt),
window-completed and window-failed, followed by the window.

--since keeps the events from then on: a duration counts back from now on
this host's clock ("3h", "90m"), a time is RFC 3339 ("2025-01-31T03:00:00Z").
--limit keeps the most recent N events (default 100, at most 10000).

With --json it prints one JSON object:
  {"lease":"nightly","events":[{"at":"2025-01-31T02:00:00.123456Z",
   "event":"taken-over","holder":"host2/9a…","label":"host2","instance":"9a…",
   "token":13,"previous_holder":"host1/3f…","previous_label":"host1",
   "previous_instance":"3f…","previous_token":12}]}
previous_* are empty and 0 where there is no previous tenure; the
events of windows add "window", the window's key.

Holders whose labels hold characters that would act on the terminal are
printed quoted with Go escapes, and as JSON \u escapes with --json, as status
does.

The PostgreSQL store (after tenure migrate; 30 days by default) and the
SQLite store (30 days) keep history. Redis, etcd, Consul and MySQL stores do
not: history with them exits 64 and says so.

Without --store and TENURE_STORE, history reads this host's SQLite file
(saying so on standard error when that call creates the file); an empty
--store or TENURE_STORE is refused (exit 64).`,
		setup: func(fs *flag.FlagSet) action {
			var o historyOptions
			fs.BoolVar(&o.json, "json", false, "print JSON")
			fs.StringVar(&o.since, "since", "", "show events from this `duration` ago (3h) or time (RFC 3339) on")
			fs.IntVar(&o.limit, "limit", store.DefaultHistoryLimit, "show at most the `N` most recent events")
			fs.StringVar(&o.store, "store", "", storeUsage)
			return func(ctx context.Context, e *env, args []string) error {
				o.storeGiven = flagSet(fs, "store")
				return o.run(ctx, e, args)
			}
		},
	}
}

type historyOptions struct {
	json       bool
	since      string
	limit      int
	store      string
	storeGiven bool
}

// historyJSON is history --json's output.
type historyJSON struct {
	Lease  string      `json:"lease"`
	Events []eventJSON `json:"events"`
}

type eventJSON struct {
	At               time.Time `json:"at"`
	Event            string    `json:"event"`
	Holder           string    `json:"holder"`
	Label            string    `json:"label"`
	Instance         string    `json:"instance"`
	Token            int64     `json:"token"`
	PreviousHolder   string    `json:"previous_holder"`
	PreviousLabel    string    `json:"previous_label"`
	PreviousInstance string    `json:"previous_instance"`
	PreviousToken    int64     `json:"previous_token"`
	Window           string    `json:"window,omitempty"`
}

func (o *historyOptions) run(ctx context.Context, e *env, args []string) error {
	if len(args) != 1 {
		return usagef("history", "takes one lease NAME, got %d arguments", len(args))
	}
	p := store.HistoryParams{Name: args[0], Limit: o.limit}
	if err := store.ValidateName(p.Name); err != nil {
		return usagef("history", "%s", message(err))
	}
	if o.limit < 1 || o.limit > store.MaxHistoryLimit {
		return usagef("history", "--limit %d is outside 1–%d", o.limit, store.MaxHistoryLimit)
	}
	if o.since != "" {
		since, err := parseSince(o.since, time.Now())
		if err != nil {
			return usagef("history", "%s", err)
		}
		p.Since = since
	}
	if err := p.Validate(); err != nil {
		return usagef("history", "%s", message(err))
	}
	opened, err := e.openStore(ctx, "history", o.storeGiven, o.store)
	if err != nil {
		return err
	}
	defer func() { _ = opened.Close() }() // Nothing is left to do about a failed close.
	hs, ok := opened.Store.(store.Historian)
	if !ok {
		return usagef("history", "%s keeps no history of its leases; only the PostgreSQL and SQLite stores do. Use one of them for leases whose history you need, or read the holder's own logs (tenure run logs every grant and loss)",
			opened.Target.Display)
	}
	sctx, cancel := withStoreTimeout(ctx)
	defer cancel()
	events, err := hs.History(sctx, p)
	if err != nil {
		return opened.Target.Wrap(err)
	}
	return o.print(e.stdout, p, events)
}

// parseSince reads --since: a positive duration counted back from now, or
// an RFC 3339 time.
func parseSince(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d <= 0 {
			return time.Time{}, fmt.Errorf("--since %s must be a positive duration", s)
		}
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("--since %q is neither a duration (3h, 90m) nor an RFC 3339 time (2025-01-31T03:00:00Z)", s)
	}
	return t, nil
}

func (o *historyOptions) print(w io.Writer, p store.HistoryParams, events []store.HistoryEvent) error {
	if o.json {
		out := historyJSON{Lease: p.Name, Events: make([]eventJSON, len(events))}
		for i, ev := range events {
			out.Events[i] = eventJSON{
				At: ev.At.UTC(), Event: ev.Kind.String(),
				Holder: ev.Holder.String(), Label: ev.Holder.Label, Instance: ev.Holder.Instance, Token: int64(ev.Token),
				PreviousHolder: ev.PreviousHolder.String(), PreviousLabel: ev.PreviousHolder.Label,
				PreviousInstance: ev.PreviousHolder.Instance, PreviousToken: int64(ev.PreviousToken),
				Window: ev.Window,
			}
		}
		b, err := json.Marshal(out)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", escapeHiddenJSON(b))
		return err
	}
	if len(events) == 0 {
		since := ""
		if !p.Since.IsZero() {
			since = " since " + p.Since.UTC().Format(time.RFC3339)
		}
		_, err := fmt.Fprintf(w, "no events for lease %s%s\n", terminalSafe(p.Name), since)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tEVENT\tHOLDER\tTOKEN\tPREVIOUS")
	for _, ev := range events {
		previous := "-"
		if ev.PreviousToken != 0 {
			previous = terminalSafe(ev.PreviousHolder.String()) + " (token " + strconv.FormatInt(int64(ev.PreviousToken), 10) + ")"
		}
		kind := ev.Kind.String()
		if ev.Window != "" {
			kind += " " + windowLabel(ev.Window)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", ev.At.UTC().Format("2006-01-02T15:04:05.000Z07:00"), kind,
			terminalSafe(ev.Holder.String()), ev.Token, previous)
	}
	return tw.Flush()
}

// windowLabel shows a window key in history's table: a derived one as its
// start and period, a named one as it is (quoted when it would act on the
// terminal).
func windowLabel(key string) string {
	if _, _, ok := store.ParseDerivedWindowKey(key); ok {
		return store.WindowKeyString(key)
	}
	return terminalSafe(key)
}
