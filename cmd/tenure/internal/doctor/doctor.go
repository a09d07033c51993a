package doctor

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tenure-dev/tenure"
	"github.com/tenure-dev/tenure/cmd/tenure/internal/storeopen"
	"github.com/tenure-dev/tenure/cmd/tenure/internal/storeurl"
	"github.com/tenure-dev/tenure/store"
)

// Status is a finding's verdict.
type Status string

// The verdicts, from good to bad.
const (
	OK   Status = "OK"
	Warn Status = "WARN"
	Fail Status = "FAIL"
)

// The checks, by the name a finding carries.
const (
	CheckReachable     = "reachable"
	CheckSchema        = "schema"
	CheckTTL           = "ttl"
	CheckClock         = "clock"
	CheckLeaseCycle    = "lease-cycle"
	CheckNotifications = "notifications"
	CheckHistory       = "history"
	CheckDurability    = "durability"
)

// Lease is the name of the lease doctor's lease cycle takes, renews and
// releases. It is one fixed name, so that doctor leaves one released record
// in a store however often it runs (a store keeps a released lease's record
// for its token counter: promise P2), and `tenure status` and `tenure
// serve` leave it out of their lists of every lease ([Hidden]); named, it
// shows as any lease does.
const Lease = "tenure-doctor"

// Hidden reports whether the lease name is left out of a list of every
// lease: doctor's own.
func Hidden(name string) bool { return name == Lease }

// Finding is one check's verdict and what to do about it.
type Finding struct {
	Check  string `json:"check"`
	Status Status `json:"status"`
	// Detail says what was found.
	Detail string `json:"detail"`
	// Fix says what to do; empty when nothing needs doing.
	Fix string `json:"fix,omitempty"`
}

// Options tune [Check]. Zero fields take the defaults.
type Options struct {
	// TTL is the lease TTL to judge; default tenure.DefaultTTL.
	TTL time.Duration
	// Clock is this host's clock as the lease client reads it; default
	// the system clock. A skewed clock (see [OffsetClock]) lets a drill
	// show what a host with a wrong clock looks like.
	Clock tenure.Clock
	// Pings is how many round trips measure the latency; default 5.
	Pings int
	// ClockSamples is how many readings of the store's clock are taken,
	// spread over ClockSpan; default 5 over 1 s.
	ClockSamples int
	ClockSpan    time.Duration
	// NotifyTimeout bounds the wait for the store's notification of the
	// lease cycle's release; default 5 s.
	NotifyTimeout time.Duration
	// Lease is the name of the lease the lease cycle takes; default
	// [Lease].
	Lease string
	// Label is the holder label this host uses, compared with the live
	// holders' labels; default [DefaultLabel], tenure run's.
	Label string
	// LocalHolders returns the holders run by processes on this host and
	// whether it saw every process; default [LocalHolders].
	LocalHolders func() (map[string]bool, bool)
}

func (o Options) withDefaults() Options {
	if o.TTL == 0 {
		o.TTL = tenure.DefaultTTL
	}
	if o.Clock == nil {
		o.Clock = tenure.NewSystemClock()
	}
	if o.Pings <= 0 {
		o.Pings = 5
	}
	if o.ClockSamples < 2 {
		o.ClockSamples = 5
	}
	if o.ClockSpan <= 0 {
		o.ClockSpan = time.Second
	}
	if o.NotifyTimeout <= 0 {
		o.NotifyTimeout = 5 * time.Second
	}
	if o.Lease == "" {
		o.Lease = Lease
	}
	if o.Label == "" {
		o.Label = DefaultLabel()
	}
	if o.LocalHolders == nil {
		o.LocalHolders = LocalHolders
	}
	return o
}

// randomHex returns n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails.
	return hex.EncodeToString(b)
}

// callTimeout bounds one store call of a check.
const callTimeout = 10 * time.Second

// Unreachable is the finding for a store that could not be opened. Its
// detail is err's message without the "storeurl: " prefix: the finding
// names the check, not the package.
func Unreachable(display string, err error) Finding {
	return Finding{Check: CheckReachable, Status: Fail,
		Detail: strings.TrimPrefix(err.Error(), "storeurl: "),
		Fix:    fmt.Sprintf("check that the server behind %s runs and that this host can reach it (address, port, firewall, credentials), then run doctor again", display)}
}

// Check examines the open store o and returns its findings, in a fixed
// order: reachable, schema, ttl, clock, lease-cycle, notifications,
// history (stores that keep one), identity, for Redis and NATS,
// durability, and supervision (how tenure run keeps its command's
// processes on this host). It takes the lease [Lease] (acquired, renewed
// and released), which stays in the store as a released record.
func Check(ctx context.Context, o *storeopen.Opened, opts Options) []Finding {
	opts = opts.withDefaults()
	var fs []Finding
	reach, getErr := checkReachable(ctx, o, opts)
	fs = append(fs, reach)
	if reach.Status == Fail {
		return fs
	}
	fs = append(fs, checkSchema(ctx, o, getErr))
	fs = append(fs, checkTTL(o, opts))
	fs = append(fs, checkClock(ctx, o, opts)...)
	if slices.ContainsFunc(fs, func(f Finding) bool { return f.Check == CheckSchema && f.Status == Fail }) {
		return fs
	}
	fs = append(fs, checkLeaseCycle(ctx, o, opts)...)
	if !slices.ContainsFunc(fs, func(f Finding) bool { return f.Check == CheckLeaseCycle && f.Status != OK }) {
		fs = append(fs, checkHistory(ctx, o, opts)...)
	}
	fs = append(fs, checkIdentity(ctx, o, opts)...)
	fs = append(fs, checkDurability(ctx, o)...)
	return append(fs, checkSupervision())
}

// Failed reports whether any finding is a FAIL.
func Failed(fs []Finding) bool {
	return slices.ContainsFunc(fs, func(f Finding) bool { return f.Status == Fail })
}

// WriteTable prints the findings as a table, with the fixes below.
func WriteTable(w io.Writer, display string, fs []Finding) error {
	fmt.Fprintf(w, "tenure doctor: %s\n\n", display)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CHECK\tSTATUS\tFINDING")
	for _, f := range fs {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", f.Check, f.Status, f.Detail)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	first := true
	for _, f := range fs {
		if f.Fix == "" {
			continue
		}
		if first {
			fmt.Fprintln(w, "\nWhat to do:")
			first = false
		}
		fmt.Fprintf(w, "  %s (%s): %s\n", f.Check, f.Status, f.Fix)
	}
	_, err := fmt.Fprintf(w, "\n%s\n", summary(fs))
	return err
}

// Report is the JSON form of doctor's output.
type Report struct {
	Store    string    `json:"store"`
	OK       bool      `json:"ok"`
	Findings []Finding `json:"findings"`
}

// WriteJSON prints the findings as one JSON object ([Report]) on one line.
func WriteJSON(w io.Writer, display string, fs []Finding) error {
	b, err := json.Marshal(Report{Store: display, OK: !Failed(fs), Findings: fs})
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

func summary(fs []Finding) string {
	var n [3]int
	for _, f := range fs {
		switch f.Status {
		case OK:
			n[0]++
		case Warn:
			n[1]++
		case Fail:
			n[2]++
		}
	}
	return fmt.Sprintf("%d OK, %d WARN, %d FAIL", n[0], n[1], n[2])
}

// checkReachable times opts.Pings reads of doctor's lease (a real
// round trip on every store) and returns the finding and the first read's
// error other than ErrNotFound, for the schema check.
func checkReachable(ctx context.Context, o *storeopen.Opened, opts Options) (Finding, error) {
	var rtts []time.Duration
	var firstErr error
	for range opts.Pings {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		start := time.Now()
		_, err := o.Store.Get(cctx, opts.Lease)
		rtt := time.Since(start)
		cancel()
		if errors.Is(err, store.ErrNotFound) {
			err = nil
		}
		if errors.Is(err, store.ErrUnavailable) || errors.Is(err, store.ErrClosed) {
			return Unreachable(o.Target.Display, o.Target.Wrap(err)), nil
		}
		if err != nil && firstErr == nil {
			firstErr = err
		}
		rtts = append(rtts, rtt)
	}
	slices.Sort(rtts)
	median := rtts[len(rtts)/2]
	f := Finding{Check: CheckReachable, Status: OK,
		Detail: fmt.Sprintf("%d round trips: median %s, max %s", len(rtts), round(median), round(rtts[len(rtts)-1]))}
	// A renewal must come back well within the margin the client keeps
	// before its local deadline (TTL/10).
	if margin := opts.TTL / 10; median > margin/2 {
		f.Status = Warn
		f.Detail += fmt.Sprintf("; that is more than half the safety margin (%s) of a %s TTL", round(margin), opts.TTL)
		f.Fix = "raise --ttl, or run the holders closer to the store"
	}
	return f, firstErr
}

func checkSchema(ctx context.Context, o *storeopen.Opened, getErr error) Finding {
	f := Finding{Check: CheckSchema, Status: OK, Detail: o.Target.Backend.Traits().Schema}
	if f.Detail == "" {
		f.Detail = fmt.Sprintf("the %s store keeps no schema", o.Target.Backend.Name())
	}
	switch {
	case getErr == nil:
	case errors.Is(getErr, store.ErrNotMigrated):
		f.Status, f.Detail = Fail, "not migrated to this library's version: "+o.Target.Wrap(getErr).Error()
		f.Fix = fmt.Sprintf("run `tenure migrate --store %s` as the schema's owner (or `tenure migrate --print` for a DBA)", o.Target.Display)
	case o.PermissionDenied(getErr):
		f.Status, f.Detail = Fail, "the role may not read the leases: "+o.Target.Wrap(getErr).Error()
		f.Fix = grantFix(ctx, o)
	default:
		f.Status, f.Detail = Fail, "reading a lease failed: "+o.Target.Wrap(getErr).Error()
		f.Fix = "read the error above; `tenure status --store URL` fails the same way until it is fixed"
	}
	return f
}

// grantFix names the command that prints the grants the current role
// lacks.
func grantFix(ctx context.Context, o *storeopen.Opened) string {
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	role, err := o.Role(cctx)
	if err != nil || role == "" {
		role = "ROLE"
	}
	return fmt.Sprintf("have the schema's owner apply the grants `tenure migrate --print --grant %s --store %s` prints", role, o.Target.Display)
}

func checkTTL(o *storeopen.Opened, opts Options) Finding {
	f := Finding{Check: CheckTTL, Status: OK}
	cfg := tenure.Config{TTL: opts.TTL}
	if err := cfg.Validate(); err != nil {
		f.Status, f.Detail = Fail, err.Error()
		f.Fix = "choose a --ttl the lease client accepts (at least " + tenure.MinTTL.String() + ")"
		return f
	}
	floor := store.MinTTLOf(o.Store)
	renew, margin := opts.TTL/3, opts.TTL/10
	f.Detail = fmt.Sprintf("TTL %s: renewals every %s, safety margin %s, store minimum %s", opts.TTL, round(renew), round(margin), floor) +
		o.Target.Backend.Traits().TTLFloor
	if opts.TTL < floor {
		f.Status = Fail
		f.Detail = fmt.Sprintf("TTL %s is below the %s store's minimum %s", opts.TTL, o.Target.Backend.Name(), floor)
		f.Fix = fmt.Sprintf("use --ttl %s or more with this store", floor)
		return f
	}
	var ue *store.TTLUnitError
	if errors.As(store.CheckTTLUnit(o.Store, opts.TTL), &ue) {
		f.Status = Fail
		f.Detail = fmt.Sprintf("TTL %s: the %s store %s", opts.TTL, o.Target.Backend.Name(), ue.Advice())
		f.Fix = fmt.Sprintf("use a --ttl that is a whole number of %s with this store: the lease client refuses another", ue.Unit)
	}
	return f
}

// checkClock compares the store's wall clock with this host's, and the
// store's elapsed time with this host's monotonic elapsed time.
func checkClock(ctx context.Context, o *storeopen.Opened, opts Options) []Finding {
	clock, err := o.WallClock(ctx)
	switch {
	case errors.Is(err, storeurl.ErrNoWallClock) && o.Target.Backend.Traits().NoClock != "":
		return []Finding{{Check: CheckClock, Status: OK, Detail: o.Target.Backend.Traits().NoClock}}
	case errors.Is(err, storeurl.ErrNoWallClock):
		return []Finding{{Check: CheckClock, Status: OK,
			Detail: fmt.Sprintf("the %s store has no wall-clock expiry (its leases run on monotonic timers): no offset to check", o.Target.Backend.Name())}}
	case err != nil:
		return []Finding{{Check: CheckClock, Status: Warn, Detail: "cannot read the store's clock: " + err.Error(),
			Fix: "check the host's time synchronisation (chronyc tracking, timedatectl) by hand"}}
	}
	defer func() { _ = clock.Close() }() // A read-only connection.
	type sample struct {
		store, wall time.Time
		mono, rtt   time.Duration
	}
	var samples []sample
	gap := opts.ClockSpan / time.Duration(opts.ClockSamples-1)
	for i := range opts.ClockSamples {
		if i > 0 {
			select {
			case <-ctx.Done():
				return []Finding{{Check: CheckClock, Status: Warn, Detail: "interrupted"}}
			case <-time.After(gap):
			}
		}
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		wall0, mono0 := opts.Clock.Now()
		st, err := clock.Read(cctx)
		_, mono1 := opts.Clock.Now()
		cancel()
		if err != nil {
			return []Finding{{Check: CheckClock, Status: Warn, Detail: "cannot read the store's clock: " + err.Error(),
				Fix: "check the host's time synchronisation (chronyc tracking, timedatectl) by hand"}}
		}
		half := (mono1 - mono0) / 2
		samples = append(samples, sample{store: st, wall: wall0.Add(half), mono: mono0 + half, rtt: mono1 - mono0})
	}
	var offsets []time.Duration
	maxRTT := time.Duration(0)
	for _, s := range samples {
		offsets = append(offsets, s.store.Sub(s.wall))
		maxRTT = max(maxRTT, s.rtt)
	}
	slices.Sort(offsets)
	offset := offsets[len(offsets)/2]
	first, last := samples[0], samples[len(samples)-1]
	monoElapsed := last.mono - first.mono
	storeElapsed := last.store.Sub(first.store)
	localElapsed := last.wall.Sub(first.wall)

	var fs []Finding
	if clock.Local {
		fs = append(fs, Finding{Check: CheckClock, Status: OK,
			Detail: "the SQLite store's clock is this host's: no offset between them"})
	} else {
		f := Finding{Check: CheckClock, Status: OK,
			Detail: fmt.Sprintf("this host's clock is %s the store's (median of %d readings, ±%s)", describeOffset(offset), len(samples), round(maxRTT/2))}
		switch abs := max(offset, -offset); {
		case abs > opts.TTL:
			f.Status = Fail
			f.Fix = "fix this host's time synchronisation (chronyc tracking, timedatectl status); leases stay safe (the store's clock decides expiry) but every time this host logs or compares with the store's is off by more than a lease's lifetime"
		case abs > time.Second:
			f.Status = Warn
			f.Fix = "fix this host's time synchronisation (chronyc tracking, timedatectl status): times in logs and in `tenure status` disagree with the store's"
		}
		fs = append(fs, f)
	}
	// A clock that steps: the store's (or this host's) elapsed time
	// disagrees with this host's monotonic elapsed time.
	tolerance := 50*time.Millisecond + maxRTT
	step := Finding{Check: CheckClock, Status: OK,
		Detail: fmt.Sprintf("no step: over %s of this host's monotonic time the store's clock moved %s", round(monoElapsed), round(storeElapsed))}
	if d := storeElapsed - monoElapsed; d > tolerance || d < -tolerance {
		step.Status = Fail
		step.Detail = fmt.Sprintf("the store's clock moved %s over %s of this host's monotonic time: it stepped", round(storeElapsed), round(monoElapsed))
		step.Fix = "fix the store server's time synchronisation (slew, do not step: chrony makestep off, ntpd -x); a forward step expires leases early and holders stand down"
	} else if d := localElapsed - monoElapsed; d > tolerance || d < -tolerance {
		step.Status = Warn
		step.Detail = fmt.Sprintf("this host's wall clock moved %s over %s of its monotonic time: it stepped", round(localElapsed), round(monoElapsed))
		step.Fix = "fix this host's time synchronisation (slew, do not step); a holder whose wall and monotonic clocks disagree assumes it was suspended and stands down"
	}
	return append(fs, step)
}

func describeOffset(d time.Duration) string {
	switch {
	case d > 0:
		return round(d).String() + " behind"
	case d < 0:
		return round(-d).String() + " ahead of"
	}
	return "level with"
}

// checkLeaseCycle acquires, renews and releases doctor's lease with
// the store's notifications subscribed, and reports whether the protocol's
// calls are allowed and the release was announced.
func checkLeaseCycle(ctx context.Context, o *storeopen.Opened, opts Options) []Finding {
	n, isNotifier := o.Store.(store.Notifier)
	var (
		subscribed = make(chan struct{}, 1)
		announced  = make(chan struct{}, 1)
		listenDone = make(chan struct{})
	)
	lctx, stopListen := context.WithCancel(ctx)
	defer func() {
		stopListen()
		if isNotifier {
			<-listenDone
		}
	}()
	subscribeFailed := ""
	if isNotifier {
		go func() {
			defer close(listenDone)
			_ = n.Listen(lctx, func(got store.Notice) { // It returns only when lctx ends.
				ch := subscribed
				if got.Name == opts.Lease {
					ch = announced
				} else if got.Name != "" {
					return
				}
				select {
				case ch <- struct{}{}:
				default:
				}
			})
		}()
		select {
		case <-subscribed:
		case <-time.After(opts.NotifyTimeout):
			subscribeFailed = fmt.Sprintf("subscribing to the store's notifications took longer than %s", opts.NotifyTimeout)
		case <-ctx.Done():
			return nil
		}
	}
	cycle := Finding{Check: CheckLeaseCycle, Status: OK}
	holder := store.Holder{Label: "tenure-doctor", Instance: randomHex(8)}
	ttl := store.MinTTLOf(o.Store)
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	g, err := acquireOwnLease(cctx, o.Store, store.AcquireParams{Name: opts.Lease, Holder: holder, TTL: ttl})
	step := "acquire"
	if err == nil {
		step = "renew"
		var res []store.RenewResult
		res, err = o.Store.Renew(cctx, []store.RenewParams{{Name: opts.Lease, Holder: holder, Token: g.Token, Seq: g.Seq, TTL: ttl}})
		if err == nil && (len(res) != 1 || !res[0].Renewed) {
			err = fmt.Errorf("the store did not renew a lease it had just granted")
		}
		step = "release"
		if rerr := o.Store.Release(cctx, store.ReleaseParams{Name: opts.Lease, Holder: holder, Token: g.Token}); err == nil {
			err = rerr
		}
	}
	switch {
	case err == nil:
		cycle.Detail = fmt.Sprintf("acquired, renewed and released the lease %q (token %d); status and serve leave it out of their lists", opts.Lease, g.Token)
	case o.PermissionDenied(err):
		cycle.Status, cycle.Detail = Fail, fmt.Sprintf("the role may not %s a lease: %s", step, o.Target.Wrap(err))
		cycle.Fix = grantFix(ctx, o) + " (a read-only role, granted with --grant-read for status and dashboards, fails here by design)"
	case errors.Is(err, store.ErrNotMigrated):
		cycle.Status, cycle.Detail = Fail, fmt.Sprintf("%s failed: %s", step, o.Target.Wrap(err))
		cycle.Fix = fmt.Sprintf("run `tenure migrate --store %s` as the schema's owner", o.Target.Display)
	default:
		cycle.Status, cycle.Detail = Fail, fmt.Sprintf("%s of the lease %q failed: %s", step, opts.Lease, o.Target.Wrap(err))
		cycle.Fix = "read the error above: holders fail the same way"
	}
	fs := []Finding{cycle}
	note := Finding{Check: CheckNotifications, Status: OK}
	switch {
	case o.Target.Backend.Traits().NoNotify != "":
		note.Detail = o.Target.Backend.Traits().NoNotify
	case !isNotifier:
		note.Detail = fmt.Sprintf("the %s store sends no notifications: followers retry at the expiry they were told", o.Target.Backend.Name())
	case cycle.Status == Fail:
		return fs
	case subscribeFailed != "":
		note.Status, note.Detail = Warn, subscribeFailed
		note.Fix = "followers still take over at expiry, but slower than a release allows; check the store's notification channel (PostgreSQL LISTEN, Redis pub/sub, the etcd or Consul watch)"
	default:
		start := time.Now()
		select {
		case <-announced:
			note.Detail = fmt.Sprintf("the release of %q was announced after %s", opts.Lease, round(time.Since(start)))
		case <-time.After(opts.NotifyTimeout):
			note.Status = Warn
			note.Detail = fmt.Sprintf("the release of %q was not announced within %s", opts.Lease, opts.NotifyTimeout)
			note.Fix = "followers still take over at expiry, but a release does not wake them: check that the store's notifications reach this host (a proxy such as PgBouncer in transaction mode drops LISTEN; Redis pub/sub needs the same server)"
		case <-ctx.Done():
			return fs
		}
	}
	return append(fs, note)
}

// heldAttempts bounds how often the lease cycle waits for another doctor
// on the same store to give the lease back.
const heldAttempts = 3

// acquireOwnLease acquires doctor's lease, waiting out another doctor's
// cycle on the same store (a lease of the store's shortest TTL, held for
// a few round trips) at most [heldAttempts] times.
func acquireOwnLease(ctx context.Context, st store.Store, p store.AcquireParams) (store.Grant, error) {
	for attempt := 1; ; attempt++ {
		g, err := st.Acquire(ctx, p)
		var held *store.HeldError
		if !errors.As(err, &held) || attempt == heldAttempts {
			return g, err
		}
		t := time.NewTimer(held.Remaining + 10*time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return g, err
		}
	}
}

// checkHistory reads back the history of doctor's lease, for stores
// that keep one: its last event must be the release the lease cycle just
// made. A failure is a WARN: holders do not read the history, people do
// (tenure history, the status page).
func checkHistory(ctx context.Context, o *storeopen.Opened, opts Options) []Finding {
	h, ok := o.Store.(store.Historian)
	if !ok {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	evs, err := h.History(cctx, store.HistoryParams{Name: opts.Lease, Limit: 1})
	f := Finding{Check: CheckHistory, Status: OK}
	switch {
	case o.PermissionDenied(err):
		f.Status, f.Detail = Warn, fmt.Sprintf("the role may not read the history: %s", o.Target.Wrap(err))
		f.Fix = grantFix(ctx, o) + " (holders do not need it; tenure history and the status page do)"
	case err != nil:
		f.Status, f.Detail = Warn, fmt.Sprintf("reading the history of %q failed: %s", opts.Lease, o.Target.Wrap(err))
		f.Fix = "tenure history fails the same way; holders are not affected"
	case len(evs) == 0 || evs[len(evs)-1].Kind != store.EventReleased:
		f.Status, f.Detail = Warn, fmt.Sprintf("the history of %q does not show the release the lease cycle just made", opts.Lease)
		f.Fix = fmt.Sprintf("run `tenure migrate --store %s` as the schema's owner: the history is recorded by what it installs", o.Target.Display)
	default:
		f.Detail = fmt.Sprintf("the history of %q shows the release the lease cycle just made", opts.Lease)
	}
	return []Finding{f}
}

// checkDurability reports what the store's own check of its durability
// says, for stores that have one (Redis, NATS).
func checkDurability(ctx context.Context, o *storeopen.Opened) []Finding {
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	concerns, ok := o.Durability(cctx)
	if !ok {
		return nil
	}
	fs := make([]Finding, 0, len(concerns))
	for _, c := range concerns {
		f := Finding{Check: CheckDurability, Status: OK, Detail: c.Detail, Fix: c.Fix}
		if c.Warn {
			f.Status = Warn
		}
		fs = append(fs, f)
	}
	return fs
}

// round rounds d for people: to the microsecond under a millisecond, to
// 0.1 ms under a second, else to the millisecond.
func round(d time.Duration) time.Duration {
	switch {
	case d < time.Millisecond && d > -time.Millisecond:
		return d.Round(time.Microsecond)
	case d < time.Second && d > -time.Second:
		return d.Round(100 * time.Microsecond)
	}
	return d.Round(time.Millisecond)
}
