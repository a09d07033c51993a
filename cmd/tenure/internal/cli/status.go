package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/tenure-dev/tenure/store"

	"github.com/tenure-dev/tenure/cmd/tenure/internal/doctor"
	"github.com/tenure-dev/tenure/cmd/tenure/internal/storeopen"
)

// DefaultInterval is the default of status's --interval.
const DefaultInterval = time.Second

// stateAbsent is the state status reports for a name the store has never
// seen.
const stateAbsent = "absent"

func statusCommand() *command {
	return &command{
		summary:      "show leases as the store sees them",
		synopsis:     "status [NAME...] [--slots N] [--json] [--watch [--interval 1s]] [--store URL]",
		interspersed: true,
		about: `Status shows the leases NAME..., or every lease the store knows: state (held,
expired, released, or absent for a name never used), holder (label/instance),
fencing token, renewal seq, when the current or last tenure was acquired and
how long it has left, all by the store's clock, and the payload the holder
published with its tenure (tenure run --payload: its address, say; for an
expired or released lease, the last tenure's).

With --json it prints one JSON object per snapshot, on one line:
  {"leases":[{"name":"nightly","state":"held","holder":"host1/3f…","label":"host1",
   "instance":"3f…","token":12,"seq":40,"acquired_at":"2025-01-31T02:00:00.123456Z",
   "expires_in_ms":27403,"payload":"10.0.0.7:8443"}]}
acquired_at is null and holder, label and instance are empty for an absent
lease; expires_in_ms is 0 unless the lease is held; payload is empty when
the holder published none.

A name, holder, payload or reason in the store that holds characters which would act
on the terminal instead of showing (control characters, bidirectional
controls such as U+202E, zero-width characters such as U+200B) is printed
quoted with Go escapes ("job\u202e"); --json writes them as JSON \u escapes ("job\u202e").

With --slots N it shows the N slots of each NAME (tenure run --slots):
the leases NAME#0 … NAME#N-1, each a lease of its own.

With --watch it prints a snapshot every --interval until interrupted; a
snapshot that fails prints one error line and the watch goes on.

Without --store and TENURE_STORE, status reads this host's SQLite file
(saying so on standard error when that call creates the file); an empty
--store or TENURE_STORE is refused (exit 64).`,
		setup: func(fs *flag.FlagSet) action {
			var o statusOptions
			fs.BoolVar(&o.json, "json", false, "print JSON, one object per snapshot")
			fs.BoolVar(&o.watch, "watch", false, "print a snapshot every --interval until interrupted")
			o.interval = durationFlag(fs, "interval", DefaultInterval, "with --watch, the `duration` between snapshots")
			fs.StringVar(&o.store, "store", "", storeUsage)
			fs.IntVar(&o.slots, "slots", 0, slotsUsage)
			return func(ctx context.Context, e *env, names []string) error {
				o.storeGiven = flagSet(fs, "store")
				names, err := slotNames("status", names, o.slots)
				if err != nil {
					return err
				}
				return o.run(ctx, e, names)
			}
		},
	}
}

type statusOptions struct {
	json       bool
	watch      bool
	interval   *time.Duration
	store      string
	storeGiven bool
	slots      int
	reason     string // of an always-leader store
}

// leaseJSON is one lease in status --json.
type leaseJSON struct {
	Name        string     `json:"name"`
	State       string     `json:"state"`
	Holder      string     `json:"holder"`
	Label       string     `json:"label"`
	Instance    string     `json:"instance"`
	Token       int64      `json:"token"`
	Seq         int64      `json:"seq"`
	AcquiredAt  *time.Time `json:"acquired_at"`
	ExpiresInMS int64      `json:"expires_in_ms"`
	Payload     string     `json:"payload"`
}

type snapshotJSON struct {
	Leases []leaseJSON `json:"leases"`
	// AlwaysLeader is the written reason of an always-leader store.
	AlwaysLeader string `json:"always_leader_reason,omitempty"`
}

func (o *statusOptions) run(ctx context.Context, e *env, names []string) error {
	for _, n := range names {
		if err := store.ValidateName(n); err != nil {
			return usagef("status", "%s", message(err))
		}
	}
	if o.watch && *o.interval <= 0 {
		return usagef("status", "--interval must be positive")
	}
	opened, err := e.openStore(ctx, "status", o.storeGiven, o.store)
	if err != nil {
		return err
	}
	defer func() { _ = opened.Close() }() // Nothing is left to do about a failed close.
	if len(names) == 0 {
		if _, ok := opened.Store.(store.Lister); !ok {
			return usagef("status", "this store cannot list its leases; name them")
		}
	}
	o.reason = opened.Target.Backend.Traits().Reason
	if !o.watch {
		leases, err := snapshot(ctx, opened, names)
		if err != nil {
			return err
		}
		return o.print(e.stdout, leases)
	}
	ctx, stop := signal.NotifyContext(ctx, forwarded...)
	defer stop()
	tick := time.NewTicker(*o.interval)
	defer tick.Stop()
	for {
		leases, err := snapshot(ctx, opened, names)
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, store.ErrNotMigrated), errors.Is(err, store.ErrInvalid):
			return err
		case err != nil:
			e.errorf("%s", message(err))
		default:
			if err := o.print(e.stdout, leases); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// snapshot reads names, or every lease, from the store.
func snapshot(ctx context.Context, opened *storeopen.Opened, names []string) ([]leaseJSON, error) {
	ctx, cancel := withStoreTimeout(ctx)
	defer cancel()
	var recs []store.Record
	if len(names) == 0 {
		all, err := opened.Store.(store.Lister).List(ctx)
		if err != nil {
			return nil, opened.Target.Wrap(err)
		}
		recs = slices.DeleteFunc(all, func(r store.Record) bool { return doctor.Hidden(r.Name) })
	}
	for _, n := range names {
		r, err := opened.Store.Get(ctx, n)
		if errors.Is(err, store.ErrNotFound) {
			r = store.Record{Grant: store.Grant{Name: n}}
		} else if err != nil {
			return nil, opened.Target.Wrap(err)
		}
		recs = append(recs, r)
	}
	leases := make([]leaseJSON, len(recs))
	for i, r := range recs {
		l := leaseJSON{
			Name:     r.Name,
			State:    stateAbsent,
			Holder:   r.Holder.String(),
			Label:    r.Holder.Label,
			Instance: r.Holder.Instance,
			Token:    int64(r.Token),
			Seq:      r.Seq,
			Payload:  r.Payload,
		}
		if r.State != 0 {
			l.State = r.State.String()
			at := r.AcquiredAt.UTC()
			l.AcquiredAt = &at
		}
		if r.State == store.StateHeld {
			l.ExpiresInMS = r.Remaining.Milliseconds()
		}
		leases[i] = l
	}
	return leases, nil
}

func (o *statusOptions) print(w io.Writer, leases []leaseJSON) error {
	if o.json {
		b, err := json.Marshal(snapshotJSON{Leases: leases, AlwaysLeader: o.reason})
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", escapeHiddenJSON(b))
		return err
	}
	if o.reason != "" {
		fmt.Fprintf(w, "always-leader store: every holder leads, without mutual exclusion; reason: %s\n", terminalSafe(o.reason))
	}
	if len(leases) == 0 {
		_, err := fmt.Fprintln(w, "no leases")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSTATE\tHOLDER\tTOKEN\tACQUIRED\tEXPIRES IN\tPAYLOAD")
	for _, l := range leases {
		holder, token, acquired, expires := dash(l.Holder), "-", "-", "-"
		if l.Token > 0 {
			token = fmt.Sprint(l.Token)
		}
		if l.AcquiredAt != nil {
			acquired = l.AcquiredAt.Format("2006-01-02T15:04:05.000Z07:00")
		}
		if l.State == store.StateHeld.String() {
			expires = remaining(time.Duration(l.ExpiresInMS) * time.Millisecond)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", terminalSafe(l.Name), l.State, terminalSafe(holder), token, acquired, expires, terminalSafe(dash(l.Payload)))
	}
	if o.watch {
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// terminalSafe returns s as status prints it in its table: unchanged when
// every character shows as itself, else quoted with Go's escapes
// (strconv.QuoteToGraphic), so that a name, holder or reason that the
// store holds (written by an older tenure, or straight into the store)
// cannot rewrite the terminal: a control character, a bidirectional
// control (U+202E) or a zero-width character (U+200B) is shown as \x1b,
// \u202e or \u200b. A string that begins with a double quote is quoted
// too, so a quoted name cannot pass for a raw one.
func terminalSafe(s string) string {
	if s == "" || (s[0] != '"' && utf8.ValidString(s) && strings.IndexFunc(s, hidden) < 0) {
		return s
	}
	return strconv.QuoteToGraphic(s)
}

// hidden reports whether r would act on a terminal instead of showing:
// anything but a graphic character or the space.
func hidden(r rune) bool {
	return r != ' ' && !unicode.IsGraphic(r)
}

// escapeHiddenJSON rewrites every hidden character in the JSON b as a
// JSON \u escape of four hex digits, which JSON decoders read back as the
// same character.
// encoding/json escapes the ASCII controls, U+2028 and U+2029 itself, and
// replaces invalid UTF-8 with U+FFFD, but leaves DEL, C1 controls,
// bidirectional controls and zero-width characters raw.
func escapeHiddenJSON(b []byte) []byte {
	var out []byte
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r < 0x7f || !hidden(r) {
			out = append(out, b[i:i+size]...)
			i += size
			continue
		}
		if r1, r2 := utf16.EncodeRune(r); r1 != utf8.RuneError {
			out = fmt.Appendf(out, `\u%04x\u%04x`, r1, r2)
		} else {
			out = fmt.Appendf(out, `\u%04x`, r)
		}
		i += size
	}
	return out
}
