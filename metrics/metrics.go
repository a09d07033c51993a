package metrics

import (
	"errors"
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tenure-dev/tenure"
)

// Config configures [New]. Pass it by value; zero fields mean the
// documented defaults.
type Config struct {
	// Registerer receives the collectors. Default:
	// prometheus.DefaultRegisterer. Give each registry one Observer and
	// share it among the clients that report to that registry.
	Registerer prometheus.Registerer

	// Store, when set, is the value of the store label of every lease
	// metric, instead of the store's package name ([tenure.StoreName]:
	// pgstore, redisstore, …). Set it to tell two stores of one kind
	// apart (e.g. "billing-pg").
	Store string

	// RenewBuckets are the upper bounds, in seconds, of the
	// tenure_renew_duration_seconds histogram. Default
	// [DefaultRenewBuckets].
	RenewBuckets []float64

	// WaitBuckets are the upper bounds, in seconds, of the
	// tenure_campaign_wait_seconds histogram. Default [DefaultWaitBuckets].
	WaitBuckets []float64
}

// DefaultRenewBuckets span a renewal round trip from half a millisecond to
// ten seconds, the longest a renewal of a 30 s lease may take.
var DefaultRenewBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// DefaultWaitBuckets span a campaign's wait from a handover (milliseconds)
// to a day-long wait behind a long-running holder.
var DefaultWaitBuckets = []float64{.01, .1, .5, 1, 5, 15, 30, 60, 300, 900, 3600, 14400, 86400}

// Observer turns a [tenure.Client]'s events into Prometheus metrics. Set it
// as [tenure.Config.Observer]. It is safe for concurrent use: one Observer
// serves every client that reports to its registry.
type Observer struct {
	store string

	held          *prometheus.GaugeVec
	holderInfo    *prometheus.GaugeVec
	token         *prometheus.GaugeVec
	transitions   *prometheus.CounterVec
	acquisitions  *prometheus.CounterVec
	losses        *prometheus.CounterVec
	acquireErrors *prometheus.CounterVec
	renewDuration *prometheus.HistogramVec
	renewErrors   *prometheus.CounterVec
	suspensions   *prometheus.CounterVec
	clones        *prometheus.CounterVec
	notifications *prometheus.CounterVec
	subscriptions *prometheus.CounterVec
	campaignWait  *prometheus.HistogramVec
	fenceRefused  *prometheus.CounterVec
	buildInfo     prometheus.Gauge
}

var _ tenure.Observer = (*Observer)(nil)

// New makes the collectors and registers them with cfg.Registerer. It
// fails, registering nothing, when the registry already has metrics of
// these names (an Observer made before for it: share that one instead) or
// a bucket list is not strictly increasing.
func New(cfg Config) (*Observer, error) {
	if cfg.Registerer == nil {
		cfg.Registerer = prometheus.DefaultRegisterer
	}
	if cfg.RenewBuckets == nil {
		cfg.RenewBuckets = DefaultRenewBuckets
	}
	if cfg.WaitBuckets == nil {
		cfg.WaitBuckets = DefaultWaitBuckets
	}
	for _, b := range []struct {
		name string
		v    []float64
	}{{"RenewBuckets", cfg.RenewBuckets}, {"WaitBuckets", cfg.WaitBuckets}} {
		if err := checkBuckets(b.v); err != nil {
			return nil, fmt.Errorf("metrics: %w: Config.%s %v: %w", tenure.ErrInvalid, b.name, b.v, err)
		}
	}
	lease := []string{"store", "lease"}
	perStore := []string{"store"}
	o := &Observer{
		store: cfg.Store,
		held: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tenure_lease_held",
			Help: "1 while this process holds the lease (a tenure is trusted or not yet found lost), 0 after.",
		}, lease),
		holderInfo: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tenure_lease_holder_info",
			Help: "1 while this process holds the lease as holder (label/instance); the series goes with the tenure.",
		}, []string{"store", "lease", "holder"}),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tenure_lease_transitions_total",
			Help: "Changes of this process's leadership of the lease, either way (a grant or an end of a tenure).",
		}, lease),
		token: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tenure_lease_token",
			Help: "The fencing token of the lease's current tenure in this process; 0 while it holds none.",
		}, lease),
		acquisitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tenure_acquisitions_total",
			Help: "Tenures this process began (each with a new token).",
		}, lease),
		losses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tenure_losses_total",
			Help: "Tenures this process ended, by reason (released and closed are the clean ones).",
		}, []string{"store", "lease", "reason"}),
		acquireErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tenure_acquire_errors_total",
			Help: "Acquisition attempts that failed to reach the store or to get an answer (refusals are not counted).",
		}, lease),
		renewDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "tenure_renew_duration_seconds",
			Help:    "Round trip of each renewal round (all of a client's leases in one round trip), failed ones included.",
			Buckets: cfg.RenewBuckets,
		}, perStore),
		renewErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tenure_renew_errors_total",
			Help: "Renewal rounds the store failed or did not answer in time; each ends the tenures it carried.",
		}, perStore),
		suspensions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tenure_suspensions_total",
			Help: "Times the process was found paused (clocks disagreed or a timer fired far too late) and dropped every lease.",
		}, perStore),
		clones: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tenure_clones_detected_total",
			Help: "Times the store showed another copy of this process using its identity (a moved renewal chain).",
		}, perStore),
		notifications: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tenure_notifications_total",
			Help: "Release and takeover announcements received from the store.",
		}, perStore),
		subscriptions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tenure_notification_subscriptions_total",
			Help: "Times the store's listener subscribed to announcements: once at start, once more after each reconnection.",
		}, perStore),
		campaignWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "tenure_campaign_wait_seconds",
			Help:    "How long each successful campaign waited from its start to its grant.",
			Buckets: cfg.WaitBuckets,
		}, lease),
		fenceRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tenure_fence_refused_total",
			Help: "Writes a fence refused because their token was stale, as counted by Observer.Fenced.",
		}, []string{"resource"}),
		buildInfo: prometheus.NewGauge(prometheus.GaugeOpts{
			Name:        "tenure_build_info",
			Help:        "Always 1; its labels name the tenure module's version and the Go version the program was built with.",
			ConstLabels: buildLabels(),
		}),
	}
	o.buildInfo.Set(1)
	var done []prometheus.Collector
	for _, c := range o.collectors() {
		if err := cfg.Registerer.Register(c); err != nil {
			for _, d := range done {
				cfg.Registerer.Unregister(d)
			}
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				return nil, fmt.Errorf("metrics: %w: the registry already has tenure's metrics; make one Observer per registry and share it among clients: %w", tenure.ErrInvalid, err)
			}
			return nil, fmt.Errorf("metrics: register: %w", err)
		}
		done = append(done, c)
	}
	return o, nil
}

func (o *Observer) collectors() []prometheus.Collector {
	return []prometheus.Collector{o.held, o.holderInfo, o.token, o.transitions, o.acquisitions, o.losses, o.acquireErrors, o.renewDuration,
		o.renewErrors, o.suspensions, o.clones, o.notifications, o.subscriptions, o.campaignWait, o.fenceRefused, o.buildInfo}
}

// buildLabels names the tenure module's version in the running program
// (its version as a dependency, "(devel)" when tenure is the main module
// or the program was built without module information) and the Go version.
func buildLabels() prometheus.Labels {
	version, goVersion := "(devel)", "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		goVersion = bi.GoVersion
		for _, m := range bi.Deps {
			if m.Path == tenureModule {
				version = m.Version
			}
		}
		if bi.Main.Path == tenureModule && bi.Main.Version != "" {
			version = bi.Main.Version
		}
	}
	return prometheus.Labels{"version": version, "goversion": goVersion}
}

// tenureModule is the path of the module whose version tenure_build_info
// reports.
const tenureModule = "github.com/tenure-dev/tenure"

func checkBuckets(b []float64) error {
	if len(b) == 0 {
		return errors.New("no buckets; leave it nil for the default")
	}
	for i := 1; i < len(b); i++ {
		if b[i] <= b[i-1] {
			return fmt.Errorf("bucket %d (%g) is not above bucket %d (%g); list them in increasing order", i, b[i], i-1, b[i-1])
		}
	}
	return nil
}

// Handle implements [tenure.Observer].
func (o *Observer) Handle(e tenure.Event) {
	st := e.Store
	if o.store != "" {
		st = o.store
	}
	switch e.Kind {
	case tenure.EventAcquired:
		o.held.WithLabelValues(st, e.Name).Set(1)
		o.holderInfo.WithLabelValues(st, e.Name, e.Holder.String()).Set(1)
		o.transitions.WithLabelValues(st, e.Name).Inc()
		o.token.WithLabelValues(st, e.Name).Set(float64(e.Token))
		o.acquisitions.WithLabelValues(st, e.Name).Inc()
		if e.Campaign {
			o.campaignWait.WithLabelValues(st, e.Name).Observe(e.Duration.Seconds())
		}
	case tenure.EventLost:
		o.held.WithLabelValues(st, e.Name).Set(0)
		o.holderInfo.DeleteLabelValues(st, e.Name, e.Holder.String())
		o.transitions.WithLabelValues(st, e.Name).Inc()
		o.token.WithLabelValues(st, e.Name).Set(0)
		o.losses.WithLabelValues(st, e.Name, Reason(e.Reason)).Inc()
	case tenure.EventAcquireFailed:
		o.acquireErrors.WithLabelValues(st, e.Name).Inc()
	case tenure.EventRenewed:
		o.renewDuration.WithLabelValues(st).Observe(e.Duration.Seconds())
		if e.Err != nil {
			o.renewErrors.WithLabelValues(st).Inc()
		}
	case tenure.EventSuspended:
		o.suspensions.WithLabelValues(st).Inc()
	case tenure.EventCloneDetected:
		o.clones.WithLabelValues(st).Inc()
	case tenure.EventNotified:
		o.notifications.WithLabelValues(st).Inc()
	case tenure.EventSubscribed:
		o.subscriptions.WithLabelValues(st).Inc()
	}
}

// Fenced counts err in tenure_fence_refused_total when it is a write a
// fence refused (it matches [tenure.ErrFenced]; the resource label is the
// [tenure.FencedError]'s Resource), and returns err unchanged, so that a
// fenced write can be wrapped where it is made:
//
//	err := m.Fenced(pgfence.Fence(ctx, tx, "invoices", tok))
//
// It does nothing for other errors and for nil.
func (o *Observer) Fenced(err error) error {
	var fe *tenure.FencedError
	if errors.As(err, &fe) {
		o.fenceRefused.WithLabelValues(fe.Resource).Inc()
	} else if errors.Is(err, tenure.ErrFenced) {
		o.fenceRefused.WithLabelValues("").Inc()
	}
	return err
}

// Reason returns the value of the reason label for r: expired_locally,
// renew_error, superseded, expired_at_store, seq_mismatch, suspended,
// revoked, progress_stalled, released, closed or store_clock_ahead. A
// reason this package does not know yet gets its description in snake
// case.
func Reason(r tenure.LossReason) string {
	if s, ok := reasons[r]; ok {
		return s
	}
	return strings.Join(strings.FieldsFunc(strings.ToLower(r.String()), func(c rune) bool {
		return (c < 'a' || c > 'z') && (c < '0' || c > '9')
	}), "_")
}

var reasons = map[tenure.LossReason]string{
	tenure.LossExpiredLocally:  "expired_locally",
	tenure.LossRenewError:      "renew_error",
	tenure.LossSuperseded:      "superseded",
	tenure.LossExpiredAtStore:  "expired_at_store",
	tenure.LossSeqMismatch:     "seq_mismatch",
	tenure.LossSuspended:       "suspended",
	tenure.LossRevoked:         "revoked",
	tenure.LossProgressStalled: "progress_stalled",
	tenure.LossReleased:        "released",
	tenure.LossClosed:          "closed",
	tenure.LossStoreClockAhead: "store_clock_ahead",
}
