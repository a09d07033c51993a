package store

import (
	"context"
	"fmt"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"
)

// Limits on names, identities and batches, which every [Store] enforces: a
// call outside them fails with an error matching [ErrInvalid] and changes
// nothing. A client takes no lease shorter than MinTTL; a store that cannot
// keep leases that short says so with [TTLFloor].
const (
	// MaxNameLen is the longest lease name, in bytes.
	MaxNameLen = 255
	// MaxLabelLen is the longest holder label, in bytes.
	MaxLabelLen = 128
	// MaxInstanceLen is the longest holder instance id, in bytes.
	MaxInstanceLen = 64
	// MaxRenewBatch is the most leases one [Store.Renew] call may carry.
	// A [Client] holding more splits its renewals into batches of this size.
	MaxRenewBatch = 10_000
	// MinTTL is the shortest lease a client takes.
	MinTTL = 500 * time.Millisecond
	// MaxPayloadLen is the longest holder payload, in bytes (see
	// [AcquireParams.Payload]).
	MaxPayloadLen = 1024
)

// Store is the one place leases live. Every expiry decision is taken by the
// store, on the store's clock, inside one atomic operation (promise P1), and
// every compare-and-set is spelled out in the params; a Store keeps no hidden
// state that decides one. (A store may remember its own last writes as
// hints that save round trips, as consulstore does to renew in place; a
// hint never stands in for the store's own compare-and-set.)
//
// A call that returns an error matching [ErrUnavailable] may have been
// applied: the client treats its outcome as unknown (promise P3).
type Store interface {
	// Acquire starts a new tenure for p.Holder when the lease is absent,
	// released or expired by the store's clock: it hands out a token strictly
	// greater than every token handed out before for that name (promise P2),
	// sets seq to 1 and the expiry to the store's now + p.TTL.
	//
	// When the lease is held, by anyone (p.Holder included: a clone shares
	// its parent's identity), Acquire changes nothing and returns a
	// [*HeldError] carrying the current holder, token, seq and remaining time.
	Acquire(ctx context.Context, p AcquireParams) (Grant, error)

	// Renew extends, in one round trip, every lease in ps that is still held
	// by the store's clock with exactly the given holder, token and seq; each
	// renewed lease has its seq advanced by one and its expiry set to the
	// store's now + TTL. Results come back in the order of ps.
	//
	// A lease that does not match is left untouched and its result reports
	// the lease as it is (holder, token, seq, remaining), so the caller can
	// tell a seq mismatch (a clone, or a lost reply) from a takeover.
	Renew(ctx context.Context, ps []RenewParams) ([]RenewResult, error)

	// Release expires the lease now if it is held by p.Holder with p.Token,
	// keeping the token counter, so the next tenure gets a greater token. A
	// lease that is not held that way is left alone and Release returns
	// [ErrNotHeld].
	Release(ctx context.Context, p ReleaseParams) error

	// Get returns the lease as the store sees it now, or [ErrNotFound].
	Get(ctx context.Context, name string) (Record, error)

	// Close ends the store's own background work. Calls after Close fail
	// with [ErrClosed]. It does not close connections the caller passed in.
	Close() error
}

// Notifier is implemented by stores that can announce releases and
// takeovers. Notifications are an optimisation: they let a follower retry at
// once instead of at the expiry it was told; correctness never depends on
// them.
type Notifier interface {
	// Listen calls notify with a [Notice] for each lease that was released
	// or taken over, until ctx is done or the store is closed. It
	// reconnects by itself and returns only then. notify must not block.
	//
	// Each time Listen has subscribed (at first, and again after every
	// reconnection that may have lost announcements) it calls notify with
	// a Notice whose Name is empty: whatever was announced before then is
	// lost, so the caller looks again at every lease it is waiting for.
	Listen(ctx context.Context, notify func(Notice)) error
}

// Subscriber is implemented by notifiers that can hand a listener only the
// notices of the lease names it follows, so that a notice costs the store
// the listeners that follow its name rather than every listener: of a
// thousand clients sharing one store, only those waiting for or holding a
// lease hear of it. A client subscribes with [Subscribe], which for a
// store that is no Subscriber drops the other names on the listener's
// side instead.
type Subscriber interface {
	Notifier
	// Subscribe returns a new subscription, following no name.
	Subscribe() Subscription
}

// Subscription is a listener that follows some lease names (see
// [Subscriber]). Its methods are safe for concurrent use: names are
// followed and unfollowed while Listen runs.
type Subscription interface {
	// Listen is [Notifier.Listen] for the names followed: notify gets
	// every notice of a name from the moment Follow for it returns until
	// Unfollow for it is called, and every empty notice (a subscription,
	// or notices of any name that may have been lost). A notice of a name
	// no longer followed may still come (one queued before Unfollow).
	// Listen may be called more than once, at once or in turn; each call
	// hears the names followed.
	Listen(ctx context.Context, notify func(Notice)) error
	// Follow adds name to the names followed; a name already followed
	// stays followed. Once Follow returns, no notice of name is held back
	// from a Listen call that has subscribed, and one that has not will
	// report its subscription with the empty notice.
	Follow(name string)
	// Unfollow removes name from the names followed, if it was.
	Unfollow(name string)
}

// Subscribe returns a new subscription of n, following no name: n's own
// when n is a [Subscriber], else one that hears every notice of n and
// passes on, on the listening goroutine, the empty ones and those of the
// names it follows.
func Subscribe(n Notifier) Subscription {
	if s, ok := n.(Subscriber); ok {
		return s.Subscribe()
	}
	return &filter{n: n, names: make(map[string]struct{})}
}

// filter is the subscription of a [Notifier] that is no [Subscriber].
type filter struct {
	n     Notifier
	mu    sync.Mutex
	names map[string]struct{}
}

func (f *filter) Listen(ctx context.Context, notify func(Notice)) error {
	if notify == nil {
		return f.n.Listen(ctx, nil) // the store refuses it
	}
	return f.n.Listen(ctx, func(n Notice) {
		if n.Name == "" || f.follows(n.Name) {
			notify(n)
		}
	})
}

func (f *filter) follows(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.names[name]
	return ok
}

func (f *filter) Follow(name string) {
	f.mu.Lock()
	f.names[name] = struct{}{}
	f.mu.Unlock()
}

func (f *filter) Unfollow(name string) {
	f.mu.Lock()
	delete(f.names, name)
	f.mu.Unlock()
}

// TTLFloor is implemented by stores that cannot keep a lease as short as
// [MinTTL] (etcd's lessor refuses less than 2 s; Consul's servers refuse
// sessions below their session_ttl_min). A client refuses a TTL below the
// floor when it is made, rather than at its first acquisition.
type TTLFloor interface {
	// MinTTL returns the shortest TTL the store accepts.
	MinTTL() time.Duration
}

// MinTTLOf returns the shortest TTL s accepts: [MinTTL], or the store's own
// floor when it is greater.
func MinTTLOf(s Store) time.Duration {
	if f, ok := s.(TTLFloor); ok {
		return max(MinTTL, f.MinTTL())
	}
	return MinTTL
}

// TTLUnit is implemented by stores that keep TTLs in a unit coarser than
// the nanosecond: etcd and NATS in whole seconds, Redis, Consul and
// Kubernetes in milliseconds, PostgreSQL and MySQL in microseconds. Such a
// store rounds a TTL that is no whole number of its unit, and a TTL rounded
// up is a grant longer than the one asked for, which a client must refuse
// (it would believe in a lease the store does not keep as it was asked
// for), and would refuse at every attempt. A client therefore refuses such
// a TTL when it is made ([CheckTTLUnit]), as it refuses one below the
// store's floor ([TTLFloor]). A store without it keeps TTLs exactly.
type TTLUnit interface {
	// TTLUnit returns the unit the store keeps TTLs in. A TTL that is a
	// whole number of it is granted as asked.
	TTLUnit() time.Duration
}

// TTLUnitOf returns the unit s keeps TTLs in: its own ([TTLUnit]), or a
// nanosecond when it keeps them exactly.
func TTLUnitOf(s Store) time.Duration {
	if u, ok := s.(TTLUnit); ok && u.TTLUnit() > 0 {
		return u.TTLUnit()
	}
	return time.Nanosecond
}

// CheckTTLUnit returns a [*TTLUnitError] when ttl is no whole number of
// the unit s keeps TTLs in ([TTLUnitOf]), and nil when it is.
func CheckTTLUnit(s Store, ttl time.Duration) error {
	unit := TTLUnitOf(s)
	if ttl%unit == 0 {
		return nil
	}
	return &TTLUnitError{TTL: ttl, Unit: unit, Floor: MinTTLOf(s)}
}

// TTLUnitError reports a TTL that is no whole number of the unit its
// store keeps TTLs in (see [TTLUnit]). It matches [ErrInvalid].
type TTLUnitError struct {
	TTL   time.Duration // the TTL asked for
	Unit  time.Duration // the unit the store keeps TTLs in
	Floor time.Duration // the store's shortest TTL ([MinTTLOf])
}

// Error returns, for example, "TTL 2.5s: the store keeps TTLs in whole
// seconds; use 2s or 3s".
func (e *TTLUnitError) Error() string {
	return fmt.Sprintf("%s: TTL %s: the store %s", ErrInvalid, e.TTL, e.Advice())
}

// Advice says what the store keeps and what to use instead, for example
// "keeps TTLs in whole seconds; use 2s or 3s": the nearest TTLs on either
// side that the store keeps as asked, the shorter one only when it is not
// below Floor.
func (e *TTLUnitError) Advice() string {
	down := e.TTL.Truncate(e.Unit)
	use := (down + e.Unit).String()
	if down >= e.Floor && down > 0 {
		use = down.String() + " or " + use
	}
	return fmt.Sprintf("keeps TTLs in %s; use %s", unitWords(e.Unit), use)
}

// Is reports whether target is [ErrInvalid].
func (e *TTLUnitError) Is(target error) bool { return target == ErrInvalid }

// unitWords names a TTL unit in a message: "whole seconds", or "multiples
// of 250ms" for a unit without a name.
func unitWords(u time.Duration) string {
	switch u {
	case time.Second:
		return "whole seconds"
	case time.Millisecond:
		return "whole milliseconds"
	case time.Microsecond:
		return "whole microseconds"
	}
	return "multiples of " + u.String()
}

// Lister is implemented by stores that can enumerate their leases.
type Lister interface {
	// List returns every lease the store knows, ordered by name.
	List(ctx context.Context) ([]Record, error)
}

// BatchReleaser is implemented by stores that release many tenures in one
// round trip. A client releases through it when it gives back several
// tenures at once (at shutdown), in batches of at most [MaxRenewBatch].
type BatchReleaser interface {
	// ReleaseBatch releases each tenure as [Store.Release] would and
	// returns one error per params, in order: nil when it was released,
	// an error matching [ErrNotHeld] when it was not held by that holder
	// with that token. An error for the whole call (errs nil) means none
	// or some may have been applied. Params are checked with
	// [ValidateReleaseBatch].
	ReleaseBatch(ctx context.Context, ps []ReleaseParams) (errs []error, err error)
}

// BatchAcquirer is implemented by stores that attempt many acquisitions
// in one round trip. A client acquires through it when several attempts
// are due at once (many Acquire calls made together, or many campaigns
// retrying at one expiry), in batches of at most [MaxRenewBatch].
type BatchAcquirer interface {
	// AcquireBatch attempts each acquisition as [Store.Acquire] would and
	// returns one result per params, in order: the grant, or the error
	// Acquire would have returned for it (a [*HeldError] when the lease is
	// held). An error for the whole call (results nil) means none or some
	// may have been applied. Params are checked with
	// [ValidateAcquireBatch].
	AcquireBatch(ctx context.Context, ps []AcquireParams) ([]AcquireResult, error)
}

// AcquireResult is the outcome of one entry of an [BatchAcquirer.AcquireBatch].
type AcquireResult struct {
	Grant Grant // the new tenure, when Err is nil
	Err   error
}

// ValidateAcquireBatch reports whether ps is a well-formed acquire batch:
// at most [MaxRenewBatch] entries, each valid, no name twice.
func ValidateAcquireBatch(ps []AcquireParams) error {
	if len(ps) > MaxRenewBatch {
		return fmt.Errorf("%w: acquire batch of %d leases exceeds the maximum of %d; split it", ErrInvalid, len(ps), MaxRenewBatch)
	}
	seen := make(map[string]struct{}, len(ps))
	for _, p := range ps {
		if err := p.Validate(); err != nil {
			return err
		}
		if _, dup := seen[p.Name]; dup {
			return fmt.Errorf("%w: lease %q appears twice in one acquire batch", ErrInvalid, p.Name)
		}
		seen[p.Name] = struct{}{}
	}
	return nil
}

// Holder identifies one holder instance (promise P5): a human label and an
// instance id made in memory at start and regenerated whenever leadership is
// lost or revoked. Two holders are the same only when both fields are equal.
type Holder struct {
	Label    string
	Instance string
}

// String returns "label/instance".
func (h Holder) String() string {
	if h == (Holder{}) {
		return ""
	}
	return h.Label + "/" + h.Instance
}

// Validate reports whether h can be stored.
func (h Holder) Validate() error {
	if err := ValidateText("holder label", h.Label, MaxLabelLen); err != nil {
		return err
	}
	return ValidateText("holder instance", h.Instance, MaxInstanceLen)
}

// AcquireParams asks for a new tenure of a lease.
type AcquireParams struct {
	Name   string
	Holder Holder
	TTL    time.Duration
	// Payload is published with the tenure for followers to read: the
	// holder's address, typically. It is fixed for the tenure (a renewal
	// carries none and cannot change it) and replaced by the next tenure's.
	// It may be empty; see [ValidatePayload] for what it may hold.
	Payload string
	// Wait asks a store that keeps followers in line to put p.Holder in
	// line for the lease when it is held (or keep its place there), until
	// it acquires the lease or the line forgets it: the store forgets a
	// follower that has not asked again within twice the TTL after the
	// lease's expiry it was told. When the lease is released, the store
	// announces the head of the line ([Notice].Next) and keeps the lease
	// for it for [Handoff] (a store whose transactions cannot read its
	// clock, etcd, keeps no hold and only announces); the refusal reports
	// the follower's place ([HeldError].Position). Stores that keep no line ignore Wait. The
	// line only orders followers: it never grants a lease before its
	// expiry, and a lease kept for a follower that does not come is free
	// again after [Handoff].
	Wait bool
}

// Validate reports whether p is well formed.
func (p AcquireParams) Validate() error {
	if err := validateTenure(p.Name, p.Holder); err != nil {
		return err
	}
	if err := ValidatePayload(p.Payload); err != nil {
		return err
	}
	return validateTTL(p.TTL)
}

// ValidatePayload reports whether s can be published with a tenure: empty,
// or text that [ValidateText] accepts of at most [MaxPayloadLen] bytes. A
// payload is text rather than bytes because followers show it (an address,
// a URL, a short JSON object on one line) and status pages print it; the
// rule that keeps names honest on a terminal keeps payloads honest too, and
// every store can keep it as text (no NUL, no encoding to agree on).
func ValidatePayload(s string) error {
	if s == "" {
		return nil
	}
	return ValidateText("payload", s, MaxPayloadLen)
}

// validateTenure checks the lease name and holder every call carries.
func validateTenure(name string, h Holder) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	return h.Validate()
}

// validateToken checks a token a call presents as its own.
func validateToken(name string, t Token) error {
	if t <= 0 {
		return fmt.Errorf("%w: token %d for lease %q must be positive", ErrInvalid, t, name)
	}
	return nil
}

// RenewParams extends one tenure: a compare-and-set on holder, token and seq.
type RenewParams struct {
	Name   string
	Holder Holder
	Token  Token
	Seq    int64
	TTL    time.Duration
}

// Validate reports whether p is well formed.
func (p RenewParams) Validate() error {
	if err := validateTenure(p.Name, p.Holder); err != nil {
		return err
	}
	if err := validateToken(p.Name, p.Token); err != nil {
		return err
	}
	if p.Seq <= 0 {
		return fmt.Errorf("%w: seq %d for lease %q must be positive", ErrInvalid, p.Seq, p.Name)
	}
	return validateTTL(p.TTL)
}

// ValidateRenewBatch checks a whole [Store.Renew] batch: its size, each
// entry, and that no name appears twice.
func ValidateRenewBatch(ps []RenewParams) error {
	if len(ps) > MaxRenewBatch {
		return fmt.Errorf("%w: renew batch of %d leases exceeds the maximum of %d; split it", ErrInvalid, len(ps), MaxRenewBatch)
	}
	seen := make(map[string]struct{}, len(ps))
	for _, p := range ps {
		if err := p.Validate(); err != nil {
			return err
		}
		if _, dup := seen[p.Name]; dup {
			return fmt.Errorf("%w: lease %q appears twice in one renew batch", ErrInvalid, p.Name)
		}
		seen[p.Name] = struct{}{}
	}
	return nil
}

// ReleaseParams ends one tenure early.
type ReleaseParams struct {
	Name   string
	Holder Holder
	Token  Token
}

// Validate reports whether p is well formed.
func (p ReleaseParams) Validate() error {
	if err := validateTenure(p.Name, p.Holder); err != nil {
		return err
	}
	return validateToken(p.Name, p.Token)
}

// ValidateReleaseBatch reports whether ps is a well-formed release batch:
// at most [MaxRenewBatch] entries, each valid, no name twice.
func ValidateReleaseBatch(ps []ReleaseParams) error {
	if len(ps) > MaxRenewBatch {
		return fmt.Errorf("%w: release batch of %d leases exceeds the maximum of %d; split it", ErrInvalid, len(ps), MaxRenewBatch)
	}
	seen := make(map[string]struct{}, len(ps))
	for _, p := range ps {
		if err := p.Validate(); err != nil {
			return err
		}
		if _, dup := seen[p.Name]; dup {
			return fmt.Errorf("%w: lease %q appears twice in one release batch", ErrInvalid, p.Name)
		}
		seen[p.Name] = struct{}{}
	}
	return nil
}

// Grant is a lease as the store saw it at the moment it decided.
type Grant struct {
	Name   string
	Holder Holder // zero when nobody holds the lease
	Token  Token  // the current or last tenure's token; 0 if there never was one
	Seq    int64  // the renewal sequence of the current tenure
	// Remaining is the time left before expiry by the store's clock; zero
	// when the lease is not held.
	Remaining time.Duration
	// At is the store's wall clock when it decided, for stores whose
	// expiry runs on a wall clock (PostgreSQL, Redis, SQLite): a holder
	// compares the store time between two renewals with its own monotonic
	// time and stands down when the store's clock ran ahead (a forward
	// step expires leases early). Stores set it on grants and renewals
	// (elsewhere it may be zero); it is zero when the store's expiry does
	// not run on a wall clock (etcd and Consul time leases with monotonic
	// timers).
	At time.Time
	// Payload is what the holder published with its tenure
	// ([AcquireParams.Payload]); empty when the lease is not held. Acquire
	// returns it with the grant; a [RenewResult] leaves it empty, since a
	// renewal cannot change it and a batch of many leases would otherwise
	// carry every payload on every renewal.
	Payload string
}

// RenewResult is the outcome of one entry of a [Store.Renew] batch.
type RenewResult struct {
	// Renewed reports whether the compare-and-set matched.
	Renewed bool
	// Grant is the lease after the call: the renewed tenure when Renewed,
	// otherwise whatever the store holds now.
	Grant Grant
}

// State is a lease's condition by the store's clock.
type State int

const (
	// StateHeld: a holder has it and its expiry is in the future.
	StateHeld State = iota + 1
	// StateExpired: the last holder stopped renewing and the TTL ran out.
	StateExpired
	// StateReleased: the last holder (or an operator) released it.
	StateReleased
)

// String returns "held", "expired" or "released".
func (s State) String() string {
	switch s {
	case StateHeld:
		return "held"
	case StateExpired:
		return "expired"
	case StateReleased:
		return "released"
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// Record is a lease as [Store.Get] and [Lister.List] report it.
type Record struct {
	Grant
	// Holder, Token and Payload in Grant name the last tenure even when
	// the lease is no longer held; State says whether it is.
	State State
	// AcquiredAt is when the current or last tenure began, by the store's
	// clock. It is for people to read; nothing decides on it.
	AcquiredAt time.Time
}

// ValidateName reports whether name can be a lease name: non-empty valid
// UTF-8 of at most [MaxNameLen] bytes without control characters,
// invisible format characters or line separators (see [ValidateText]).
func ValidateName(name string) error {
	return ValidateText("lease name", name, MaxNameLen)
}

// ValidateText reports whether s can be stored as what (a name, a label, an
// id): non-empty valid UTF-8 of at most maxLen bytes made of characters
// that show on a terminal as what they are. It refuses control characters
// (C0, DEL, C1), the invisible format characters of Unicode category Cf
// (among them the bidirectional controls U+061C, U+200E, U+200F,
// U+202A–U+202E and U+2066–U+2069, which reorder what a terminal shows,
// and the zero-width U+200B–U+200D, U+2060 and U+FEFF, which make two
// different names look the same), and the line and paragraph separators
// U+2028 and U+2029. Its error matches [ErrInvalid], names what and the
// offending code point, and shows s escaped.
func ValidateText(what, s string, maxLen int) error {
	switch {
	case s == "":
		return fmt.Errorf("%w: %s is empty", ErrInvalid, what)
	case len(s) > maxLen:
		return fmt.Errorf("%w: %s is %d bytes long; the maximum is %d", ErrInvalid, what, len(s), maxLen)
	case !utf8.ValidString(s):
		return fmt.Errorf("%w: %s %q is not valid UTF-8", ErrInvalid, what, s)
	}
	for _, r := range s {
		if kind := unsafeRune(r); kind != "" {
			return fmt.Errorf("%w: %s %q contains the %s %U; use visible characters only", ErrInvalid, what, s, kind, r)
		}
	}
	return nil
}

// unsafeRune says what r is when a name must not hold it ("" when it may):
// a character that changes a terminal's display instead of showing.
func unsafeRune(r rune) string {
	switch {
	case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
		return "control character"
	case r == 0x061c || r == 0x200e || r == 0x200f || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069):
		return "bidirectional control"
	case r == 0x2028 || r == 0x2029:
		return "line separator"
	case unicode.Is(unicode.Cf, r):
		return "invisible format character"
	}
	return ""
}

func validateTTL(ttl time.Duration) error {
	if ttl <= 0 {
		return fmt.Errorf("%w: TTL %s must be positive", ErrInvalid, ttl)
	}
	return nil
}
