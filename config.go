package tenure

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/tenure-dev/tenure/store"
)

const (
	// DefaultTTL is how long a lease lives at the store without renewal.
	DefaultTTL = 30 * time.Second
	// MinTTL is the shortest TTL a [Client] takes. A store may require
	// more (etcd: 2 s; Consul: the servers' session_ttl_min).
	MinTTL = store.MinTTL
)

// The defaults and limits of the renew interval, the suspension tolerance
// and the safety margin, as fractions of the TTL.
const (
	defaultRenewDivisor   = 3
	defaultSuspendDivisor = 20
	// marginDivisor sets the minimum safety margin: a holder stands down at
	// least TTL/10 before the store could expire its lease (longer when
	// round trips are slow: the margin is max(TTL/10, 2×last round trip)).
	marginDivisor = 10
)

// Config tunes a [Client]. Pass it by value; every zero field means the
// documented default. [New] validates it and says what to change.
type Config struct {
	// Label is the human part of the holder identity, shown in status and
	// logs. Default: the program's base name. Up to 128 bytes, no
	// control characters. The instance part is generated (promise P5).
	Label string

	// TTL is the lease's lifetime at the store without renewal. A longer
	// TTL rides out longer store outages but makes failover after a crash
	// slower. Default DefaultTTL (30 s); at least MinTTL (500 ms).
	TTL time.Duration

	// RenewInterval is how often held leases are renewed, all in one round
	// trip. Default TTL/3; at most TTL/2, so a renewal can fail once and
	// be retried before the lease is in danger.
	RenewInterval time.Duration

	// Grace is how long before its local deadline a tenure is declared
	// lost, so the work has time to stop before the store can hand the
	// lease to someone else (the CLI kills its child in this window).
	// Default 0. TTL − TTL/10 − Grace must exceed RenewInterval.
	Grace time.Duration

	// SuspendTolerance is how far the wall clock and the monotonic clock
	// may disagree about the time since the last seen renewal, and how late
	// a timer may fire, before the client assumes it was paused and revokes
	// at once. Default TTL/20; must be below TTL/10 (the minimum margin),
	// or a pause could outlast the margin unnoticed.
	SuspendTolerance time.Duration

	// ProgressTimeout, when positive, requires the work under a lease to
	// call [Lease.Progress] at least this often; a tenure whose work stalls
	// stops renewing and stands down so a healthy holder can take over.
	// Default 0: no progress gate.
	ProgressTimeout time.Duration

	// Clock reads time. Default: the system clock. Tests and fault
	// injection set their own; the store's clock still decides expiry.
	Clock Clock

	// OnTransition, if set, is called with every leadership transition, in
	// order, none dropped, from one goroutine owned by [Client.Run]. A slow
	// callback delays later callbacks, never the lease loop.
	OnTransition func(Transition)

	// Observer, if set, receives every acquisition, loss, renewal round,
	// store failure while acquiring, detected suspension or clone, and
	// store notification, as an [Event], from the lease loop, one at a
	// time (see [Observer]). Package github.com/tenure-dev/tenure/metrics turns
	// them into Prometheus metrics. Default nil: nothing is reported, and
	// nothing is spent reporting.
	Observer Observer

	// Payload is published with every tenure this client takes, for
	// followers to read: typically the address where the leader serves
	// (followers read it with [Client.Observe], in a [HeldError] when they
	// are refused, or with `tenure status`). It is fixed for each tenure
	// and replaced by the next holder's. Default "": none. Up to
	// [store.MaxPayloadLen] (1 KiB) of text without control characters
	// (see [store.ValidatePayload]); it is not secret: whoever can read
	// the store can read it.
	Payload string

	// Logger, if set, receives the client's log lines (log/slog), with
	// the keys lease, token, holder, reason, store and err: acquisitions
	// and releases at Info; losses, renewal failures (when renewals start
	// failing, not each failure), detected suspensions and a store that
	// cannot be reached while campaigning (the first failure, then once a
	// minute) at Warn; detected clones at Error. Lines are written on the
	// lease loop's goroutine: give it a handler that does not block.
	// Default nil: the library logs nothing.
	Logger *slog.Logger
}

func (cfg Config) withDefaults() Config {
	if cfg.Label == "" {
		cfg.Label = filepath.Base(os.Args[0])
		if len(cfg.Label) > store.MaxLabelLen {
			cfg.Label = cfg.Label[:store.MaxLabelLen]
		}
	}
	if cfg.TTL == 0 {
		cfg.TTL = DefaultTTL
	}
	if cfg.RenewInterval == 0 {
		cfg.RenewInterval = cfg.TTL / defaultRenewDivisor
	}
	if cfg.SuspendTolerance == 0 {
		cfg.SuspendTolerance = cfg.TTL / defaultSuspendDivisor
	}
	if cfg.Clock == nil {
		cfg.Clock = NewSystemClock()
	}
	return cfg
}

// Validate reports whether cfg, its zero fields filled with the defaults,
// makes a working client; [New] calls it. The error matches [ErrInvalid]
// and says which field to change, and to what.
func (cfg Config) Validate() error { return cfg.withDefaults().validate() }

func (cfg Config) validate() error {
	if err := store.ValidateText("Label", cfg.Label, store.MaxLabelLen); err != nil {
		return err
	}
	if err := store.ValidatePayload(cfg.Payload); err != nil {
		return fmt.Errorf("%w (Config.Payload)", err)
	}
	margin := cfg.TTL / marginDivisor
	switch {
	case cfg.TTL < MinTTL:
		return fmt.Errorf("%w: TTL (%s) must be at least %s", ErrInvalid, cfg.TTL, MinTTL)
	case cfg.RenewInterval <= 0:
		return fmt.Errorf("%w: RenewInterval (%s) must be positive", ErrInvalid, cfg.RenewInterval)
	case cfg.RenewInterval > cfg.TTL/2:
		return fmt.Errorf("%w: RenewInterval (%s) must be at most TTL/2 (%s)", ErrInvalid, cfg.RenewInterval, cfg.TTL/2)
	case cfg.Grace < 0:
		return fmt.Errorf("%w: Grace (%s) must not be negative", ErrInvalid, cfg.Grace)
	case cfg.TTL-margin-cfg.Grace <= cfg.RenewInterval:
		return fmt.Errorf("%w: Grace (%s) leaves no time to renew: TTL (%s) − margin (%s) − Grace must exceed RenewInterval (%s); lower Grace to below %s or raise TTL",
			ErrInvalid, cfg.Grace, cfg.TTL, margin, cfg.RenewInterval, cfg.TTL-margin-cfg.RenewInterval)
	case cfg.SuspendTolerance <= 0:
		return fmt.Errorf("%w: SuspendTolerance (%s) must be positive", ErrInvalid, cfg.SuspendTolerance)
	case cfg.SuspendTolerance >= margin:
		return fmt.Errorf("%w: SuspendTolerance (%s) must be below TTL/%d (%s), the minimum safety margin", ErrInvalid, cfg.SuspendTolerance, marginDivisor, margin)
	case cfg.ProgressTimeout < 0:
		return fmt.Errorf("%w: ProgressTimeout (%s) must not be negative (0 turns the progress gate off)", ErrInvalid, cfg.ProgressTimeout)
	}
	return nil
}
